/**
 * `bedrock ws new|ls|rm` and `bedrock new --workspace` against the real web-bff and conversation service
 * with workspaces (host paths off), a real tool-runner as the workspace storage (web-bff's test system:
 * plain directories, no quota) and a repository served by `git daemon` on loopback. Needs root (each
 * workspace is given to its owner's uid) and git: docs/testing.md.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { startGitDaemon, startSystem, type GitDaemon, type System } from '@bedrock/web-bff/test-support';
import { run } from '../src/run.ts';
import { humanBytes } from '../src/workspaces.ts';

let git: GitDaemon;
let REPO: string;

let s: System;
beforeAll(async () => {
  git = await startGitDaemon({ 'acme/api.git': { 'README.md': '# api\n', 'src/index.ts': 'export const answer = 42;\n' } });
  REPO = git.url('acme/api.git');
  s = await startSystem({ label: 'cli_ws', workspaceStorage: true });
}, 60_000);
afterAll(async () => {
  await s?.close();
  await git?.close();
});

async function bedrock(args: string[], user: 'alice' | 'bob' = 'alice') {
  let stdout = '';
  let stderr = '';
  const code = await run(
    args,
    { BEDROCK_URL: s.bff.httpUrl, BEDROCK_TOKEN: s.tokens[user], HOME: '/nonexistent', BEDROCK_RETRY_FOR: '0' },
    { out: (t) => void (stdout += t), err: (t) => void (stderr += t) },
  );
  return { code, stdout, stderr };
}

interface WorkspaceJson {
  id: string;
  name: string;
  path: string;
  origin: string;
  conversations?: number;
  sizeBytes?: string;
}

async function workspaces(user: 'alice' | 'bob' = 'alice'): Promise<{ workspaces?: WorkspaceJson[]; quota: string }> {
  const res = await bedrock(['ws', 'ls', '--json'], user);
  expect(res.code).toBe(0);
  return JSON.parse(res.stdout) as { workspaces?: WorkspaceJson[]; quota: string };
}

describe('bedrock ws and new --workspace', () => {
  it('lists none at first, and `new` without flags makes and uses the default workspace', async () => {
    const empty = await bedrock(['ws', 'ls']);
    expect(empty.code).toBe(0);
    expect(empty.stdout).toBe(
      `no workspaces yet (bedrock ws new NAME; bedrock new makes "default" on first use)\nquota: ${s.storage!.description}\n`,
    );
    expect(s.storage!.description).toMatch(/^the workspace root .* is on .*, not btrfs: no disk quota per workspace$/);

    const created = await bedrock(['new', '--json']);
    expect(created.code).toBe(0);
    const c = JSON.parse(created.stdout) as { id: string; cwd: string; workspaceName: string; workspaceId: string };
    expect(c.workspaceName).toBe('default');
    expect(c.cwd).toBe(join(s.storage!.root, c.workspaceId));
    expect(existsSync(c.cwd)).toBe(true);
    const shown = await bedrock(['show', c.id]);
    expect(shown.stdout.split('\n')).toContain('workspace: default');

    // A second one lands in the same default workspace.
    const again = JSON.parse((await bedrock(['new', '--json'])).stdout) as { workspaceId: string };
    expect(again.workspaceId).toBe(c.workspaceId);
    const listed = await workspaces();
    expect(listed.workspaces).toEqual([expect.objectContaining({ name: 'default', origin: 'empty', conversations: 2 })]);
  });

  it('creates from git and as a copy, shows them in the table, and places conversations inside them', async () => {
    const api = await bedrock(['ws', 'new', 'api', '--git', REPO]);
    expect(api.code).toBe(0);
    expect(api.stdout).toMatch(
      new RegExp(`^created workspace api \\(git ${REPO.replace(/\./g, '\\.')}\\): ${s.storage!.root}/ws-[0-9a-z]{26}\\n$`),
    );
    const copy = await bedrock(['ws', 'new', 'api-copy', '--copy', 'api']);
    expect(copy.code).toBe(0);
    const byName = Object.fromEntries((await workspaces()).workspaces!.map((w) => [w.name, w]));
    expect(byName['api-copy']!.origin).toBe('copy of api');
    expect(readFileSync(join(byName['api-copy']!.path, 'src/index.ts'), 'utf8')).toContain('answer = 42');
    // The storage made them as asked: ids of the right form, given to a tool uid that is not root;
    // api cloned from REPO, api-copy copied from api's workspace (cp -a keeps the times a new clone would not).
    expect(readdirSync(s.storage!.root).every((name) => /^ws-[0-9a-z]{26}$/.test(name))).toBe(true);
    expect(Object.values(byName).every((w) => statSync(w.path).uid >= 200_000)).toBe(true);
    expect(readFileSync(join(byName.api!.path, '.git', 'config'), 'utf8')).toContain(`url = ${REPO}\n`);
    expect(statSync(join(byName['api-copy']!.path, 'README.md'), { bigint: true }).mtimeNs).toBe(
      statSync(join(byName.api!.path, 'README.md'), { bigint: true }).mtimeNs,
    );

    const table = await bedrock(['ws', 'ls']);
    expect(table.code).toBe(0);
    const lines = table.stdout.trimEnd().split('\n');
    expect(lines[0]).toMatch(/^NAME +SIZE +FILES +CONVERSATIONS +LAST USE +ORIGIN$/);
    const apiLine = lines.find((l) => l.startsWith('api '))!;
    // What the clone takes on disk (README.md, src/index.ts and git's .git, the top included); no
    // quota shown, as this test's root (not btrfs) enforces none; files: every entry and the top,
    // as du and find count them.
    const bytes = Number(execFileSync('du', ['-s', '-B1', byName.api!.path]).toString().split('\t')[0]);
    const files = execFileSync('find', [byName.api!.path]).toString().trimEnd().split('\n').length;
    expect(files).toBeGreaterThan(4);
    expect(byName.api).toMatchObject({ sizeBytes: String(bytes) });
    expect(byName.api).not.toHaveProperty('quotaBytes');
    expect(apiLine).toMatch(
      new RegExp(
        `^api +${humanBytes(bytes).replace('.', '\\.')} +${files.toLocaleString('en-US')} +0 +just now +git ${REPO.replace(/\./g, '\\.')}$`,
      ),
    );
    expect(lines.at(-1)).toBe(`quota: ${s.storage!.description}`);

    const inside = await bedrock(['new', '--workspace', 'api', '--cwd', 'src', '--json']);
    expect(inside.code).toBe(0);
    expect(JSON.parse(inside.stdout)).toMatchObject({ workspaceName: 'api', cwd: join(byName.api!.path, 'src') });
    const absolute = await bedrock(['new', '--workspace', 'api', '--cwd', '/etc']);
    expect([absolute.code, absolute.stdout]).toEqual([2, '']);
    expect(absolute.stderr).toContain('with --workspace, --cwd is a directory inside the workspace');
    const escape = await bedrock(['new', '--workspace', 'api', '--cwd', '../other']);
    expect(escape.code).toBe(3);
    expect(escape.stderr).toMatch(/^bedrock: InvalidArgument: .*leaves the workspace/);

    const failed = await bedrock(['ws', 'new', 'nope', '--git', git.url('missing.git')]);
    expect(failed.code).toBe(3);
    expect(failed.stderr).toMatch(/^bedrock: FailedPrecondition: workspace nope could not be made: git clone .* failed/);
    expect((await workspaces()).workspaces!.map((w) => w.name)).not.toContain('nope');
    const taken = await bedrock(['ws', 'new', 'api']);
    expect(taken.code).toBe(3);
    expect(taken.stderr).toMatch(/AlreadyExists: you already have a workspace named api/);
    expect((await bedrock(['ws', 'new', 'Bad Name'])).code).toBe(3);
  });

  it('refuses a host path with the server’s words and the hint', async () => {
    for (const args of [
      ['new', '--cwd', '/tmp'],
      ['new', '--cwd', '.'],
    ]) {
      const res = await bedrock(args);
      expect([res.code, res.stdout]).toEqual([3, '']);
      expect(res.stderr).toBe(
        'bedrock: PermissionDenied: host paths are off on this deployment: create the conversation in one of your workspaces (leave the directory out for your default workspace, or name a workspace; bedrock ws ls lists them) (use --workspace NAME, or leave --cwd out for your default workspace)\n',
      );
    }
  });

  it("keeps users apart: another user's workspace is not found", async () => {
    const theirs = await bedrock(['new', '--workspace', 'api'], 'bob');
    expect(theirs.code).toBe(3);
    expect(theirs.stderr).toMatch(/^bedrock: NotFound: workspace "api" not found/);
    expect((await bedrock(['ws', 'rm', 'api', '--yes'], 'bob')).code).toBe(3);
    expect((await bedrock(['ws', 'new', 'mine', '--copy', 'api'], 'bob')).code).toBe(3);
    expect((await workspaces('bob')).workspaces ?? []).toEqual([]);
    // Bob's own name may be the same as Alice's.
    expect((await bedrock(['ws', 'new', 'api'], 'bob')).code).toBe(0);
  });

  it("gives each user's workspaces their own uid on disk (200000 and up), 0700", async () => {
    expect((await bedrock(['ws', 'new', 'alices'], 'alice')).code).toBe(0);
    expect((await bedrock(['ws', 'new', 'bobs'], 'bob')).code).toBe(0);
    const owners = async (user: 'alice' | 'bob') =>
      ((await workspaces(user)).workspaces ?? []).map((w) => {
        const st = statSync(w.path);
        return { name: w.name, uid: st.uid, gid: st.gid, mode: st.mode & 0o7777 };
      });
    const alice = await owners('alice');
    const bob = await owners('bob');
    expect(alice.map((w) => w.name)).toEqual(expect.arrayContaining(['default', 'api', 'api-copy', 'alices']));
    expect(bob.map((w) => w.name)).toEqual(expect.arrayContaining(['api', 'bobs']));
    const aliceUid = alice[0]!.uid;
    const bobUid = bob[0]!.uid;
    expect(aliceUid).toBeGreaterThanOrEqual(200_000);
    expect(bobUid).toBeGreaterThanOrEqual(200_000);
    expect(bobUid).not.toBe(aliceUid);
    for (const w of alice) expect(w).toEqual({ name: w.name, uid: aliceUid, gid: aliceUid, mode: 0o700 });
    for (const w of bob) expect(w).toEqual({ name: w.name, uid: bobUid, gid: bobUid, mode: 0o700 });
    // What the clone wrote is its owner's too.
    const api = ((await workspaces('alice')).workspaces ?? []).find((w) => w.name === 'api')!;
    expect(statSync(join(api.path, 'src', 'index.ts')).uid).toBe(aliceUid);
  });

  it('refuses to delete a workspace while conversations use it, unless they go with it', async () => {
    const id = (await bedrock(['new', '--workspace', 'api-copy'])).stdout.trim();
    const unasked = await bedrock(['ws', 'rm', 'api-copy']);
    expect(unasked.code).toBe(2);
    expect(unasked.stderr).toContain('pass --yes');

    const refused = await bedrock(['ws', 'rm', 'api-copy', '--yes']);
    expect(refused.code).toBe(3);
    expect(refused.stderr).toMatch(/^bedrock: FailedPrecondition: workspace api-copy still has conversations/);
    const path = (await workspaces()).workspaces!.find((w) => w.name === 'api-copy')!.path;
    expect(existsSync(path)).toBe(true);

    const deleted = await bedrock(['ws', 'rm', 'api-copy', '--with-conversations', '--yes']);
    expect(deleted.code).toBe(0);
    expect(deleted.stdout).toMatch(new RegExp(`^deleted workspace api-copy \\(ws-[0-9a-z]{26}\\)\\ndeleted conversation ${id}\\n$`));
    expect(existsSync(path)).toBe(false);
    expect((await bedrock(['show', id])).code).toBe(3);
    expect((await workspaces()).workspaces!.map((w) => w.name)).not.toContain('api-copy');
    expect((await bedrock(['ws', 'rm', 'api-copy', '--yes'])).code).toBe(3);
  });

  it('says what is wrong with a command line', async () => {
    for (const [args, words] of [
      [['ws'], 'expected ws new NAME, ws ls or ws rm NAME'],
      [['ws', 'new'], "expected the new workspace's name"],
      [['ws', 'new', 'x', '--git', REPO, '--copy', 'api'], 'a clone (--git URL) or a copy (--copy NAME), not both'],
      [['ws', 'ls', '--git', REPO], '--git does not apply to ws ls'],
      [['ws', 'new', 'x', '--with-conversations'], '--with-conversations does not apply to ws new'],
      [['new', '--git', REPO], '--git applies to ws'],
      [['ls', '--workspace', 'api'], '--workspace applies to new and chat without an id'],
      [['new', '--workspace', ''], '--workspace: give the name of one of your workspaces'],
      [['ls', '--yes'], '--yes applies to rm, ws rm and admin users delete'],
    ] as const) {
      const res = await bedrock([...args]);
      expect([res.code, res.stdout]).toEqual([2, '']);
      expect(res.stderr).toContain(words);
    }
  });
});
