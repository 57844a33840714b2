/**
 * The WorkspaceStorageService on plain directories (the `none` backend, no quota), through a
 * real runner and a real client; clones from a `git daemon` on loopback. Needs root (chown,
 * other uids).
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { execFileSync } from 'node:child_process';
import {
  chmodSync,
  chownSync,
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Code } from '@connectrpc/connect';
import { readToolRunnerConfig } from '../src/config.ts';
import type { ToolRunner } from '../src/create-tool-runner.ts';
import { openWorkspaceStorage } from '../src/workspaces/workspace-storage.ts';
import { asUser, isRoot, newWorkspaceId as newId } from './support-btrfs.ts';
import { startTestRunner } from './support-runner.ts';
import { client, failure, gitDaemon, MiB, UID } from './support-workspace-storage.ts';

if (!isRoot) console.warn('workspace-storage-plain.test.ts: skipped: needs root (chown, other uids)');

const describeRoot = isRoot ? describe : describe.skip;

describeRoot('WorkspaceStorageService on plain directories (no quota)', () => {
  let dir: string;
  let root: string;
  let runner: ToolRunner;
  let git: Awaited<ReturnType<typeof gitDaemon>>;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'bedrock-ws-plain-'));
    chmodSync(dir, 0o711);
    root = join(dir, 'root');
    runner = await startTestRunner({ workspaces: { root, cloneTimeout: 60_000 } });
    git = await gitDaemon(dir);
  }, 60_000);
  afterAll(async () => {
    git?.stop();
    await runner?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('says why nothing is enforced', async () => {
    const info = await client(runner).getStorageInfo({});
    const fs = execFileSync('stat', ['-f', '-c', '%T', dir]).toString().trim();
    expect(info.quotaMechanism).toBe('none');
    if (fs !== 'btrfs')
      expect(info.description).toMatch(new RegExp(`^the workspace root ${root} is on \\S+, not btrfs: no disk quota per workspace$`));
    expect(statSync(root).mode & 0o7777).toBe(0o711);
  });

  it('prepares, copies (as the owner), clones, measures and removes', async () => {
    const id = newId();
    const { path } = await client(runner).prepareWorkspace({ workspaceId: id, uid: UID, gid: UID, quotaBytes: BigInt(MiB) });
    expect([statSync(path).uid, statSync(path).mode & 0o7777]).toEqual([UID, 0o700]);
    asUser(UID, path, 'sh', '-c', `mkdir ${path}/d && head -c 100000 /dev/zero > ${path}/d/f && ln -s / ${path}/up`);
    const copy = newId();
    const copied = await client(runner).prepareWorkspace({
      workspaceId: copy,
      uid: UID,
      gid: UID,
      source: { case: 'copyFromId', value: id },
    });
    expect(statSync(join(copied.path, 'd', 'f')).size).toBe(100000);
    expect(statSync(join(copied.path, 'd', 'f')).uid).toBe(UID);
    expect(lstatSync(join(copied.path, 'up')).isSymbolicLink()).toBe(true);
    const cloned = newId();
    const { path: clonePath } = await client(runner).prepareWorkspace({
      workspaceId: cloned,
      uid: UID,
      gid: UID,
      source: { case: 'gitUrl', value: git.url('repo.git') },
    });
    expect(readFileSync(join(clonePath, 'README.md'), 'utf8')).toBe('hello from the repository\n');
    const { usage } = await client(runner).getWorkspaceUsage({ workspaceIds: [id] });
    // The top, d, d/f and the symlink (not followed into /).
    expect(usage[0]).toMatchObject({ exists: true, inodes: 4n });
    expect(Number(usage[0]!.bytes)).toBeGreaterThanOrEqual(100000);
    for (const w of [id, copy, cloned]) expect((await client(runner).removeWorkspace({ workspaceId: w })).removed).toBe(true);
    expect(readdirSync(root)).toEqual([]);
    // The symlink to / was removed, not followed.
    expect(existsSync('/etc/passwd')).toBe(true);
  });

  it('copies, clones and removes as the owner under a 0700 directory (the embedded data directory), which the owner cannot search', async () => {
    const hidden = join(dir, 'data');
    mkdirSync(hidden, { mode: 0o700 });
    const below = await startTestRunner({ workspaces: { root: join(hidden, 'workspaces'), cloneTimeout: 60_000 } });
    try {
      const id = newId();
      const { path } = await client(below).prepareWorkspace({ workspaceId: id, uid: UID, gid: UID });
      mkdirSync(join(path, 'd'));
      writeFileSync(join(path, 'd', 'f'), 'kept\n');
      for (const p of [join(path, 'd'), join(path, 'd', 'f')]) chownSync(p, UID, UID);
      const copy = newId();
      const copied = await client(below).prepareWorkspace({
        workspaceId: copy,
        uid: UID,
        gid: UID,
        source: { case: 'copyFromId', value: id },
      });
      expect(readFileSync(join(copied.path, 'd', 'f'), 'utf8')).toBe('kept\n');
      const cloned = newId();
      const { path: clonePath } = await client(below).prepareWorkspace({
        workspaceId: cloned,
        uid: UID,
        gid: UID,
        source: { case: 'gitUrl', value: git.url('repo.git') },
      });
      expect(readFileSync(join(clonePath, 'README.md'), 'utf8')).toBe('hello from the repository\n');
      for (const w of [id, copy, cloned]) expect((await client(below).removeWorkspace({ workspaceId: w })).removed).toBe(true);
      expect(readdirSync(join(hidden, 'workspaces'))).toEqual([]);
    } finally {
      await below.stop();
    }
  });

  it('never changes a root it did not make, and says what is wrong with it', async () => {
    const existing = join(dir, 'existing');
    mkdirSync(existing);
    chmodSync(existing, 0o755);
    const lines: string[] = [];
    const storage = await openWorkspaceStorage({
      config: readToolRunnerConfig({}, { workspaces: { root: existing } }).workspaces,
      log: (_, message) => lines.push(message),
    });
    storage.close();
    expect(statSync(existing).mode & 0o7777).toBe(0o755);
    expect(lines).toContainEqual(expect.stringMatching(/belongs to uid 0 with mode 755: make it root's and 0711/));
  });

  it('kills a clone that outlives BEDROCK_WORKSPACE_CLONE_TIMEOUT and leaves nothing', async () => {
    // A server that accepts and never answers: git waits for it forever.
    const silent = createServer(() => undefined);
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    const port = (silent.address() as { port: number }).port;
    const impatient = await startTestRunner({ workspaces: { root, cloneTimeout: 1500 } });
    try {
      const id = newId();
      const started = Date.now();
      const err = await failure(
        client(impatient).prepareWorkspace({
          workspaceId: id,
          uid: UID,
          gid: UID,
          source: { case: 'gitUrl', value: `git://127.0.0.1:${port}/repo.git` },
        }),
      );
      expect(err.code).toBe(Code.FailedPrecondition);
      expect(err.rawMessage).toMatch(
        /^git clone of git:\/\/127\.0\.0\.1:\d+\/repo\.git did not finish within 2 s \(BEDROCK_WORKSPACE_CLONE_TIMEOUT\)/,
      );
      expect(Date.now() - started).toBeLessThan(10_000);
      expect(readdirSync(root)).toEqual([]);
    } finally {
      await impatient.stop();
      silent.close();
    }
  });

  it('refuses bad ids, owners and URLs with INVALID_ARGUMENT, touching nothing', async () => {
    const c = client(runner);
    const bad: Array<[Promise<unknown>, RegExp]> = [
      [c.prepareWorkspace({ workspaceId: '../etc', uid: UID, gid: UID }), /workspace_id must be "ws-"/],
      [c.prepareWorkspace({ workspaceId: 'ws-ABCDEFGHIJKLMNOPQRSTUVWXYZ', uid: UID, gid: UID }), /workspace_id/],
      [
        c.prepareWorkspace({ workspaceId: newId(), uid: 0, gid: UID }),
        /uid 0 is outside the tool uids this runner may give workspaces to \(200000-299999/,
      ],
      [c.prepareWorkspace({ workspaceId: newId(), uid: UID, gid: 0 }), /gid 0/],
      [c.prepareWorkspace({ workspaceId: newId(), uid: 1000, gid: 1000 }), /uid 1000 is outside/],
      [
        c.prepareWorkspace({ workspaceId: newId(), uid: UID, gid: UID, source: { case: 'gitUrl', value: `file://${dir}/git/repo.git` } }),
        /scheme "file:"/,
      ],
      [
        c.prepareWorkspace({ workspaceId: newId(), uid: UID, gid: UID, source: { case: 'gitUrl', value: `${dir}/git/repo.git` } }),
        /local paths and file:\/\/ are refused/,
      ],
      [
        c.prepareWorkspace({ workspaceId: newId(), uid: UID, gid: UID, source: { case: 'gitUrl', value: 'ext::sh -c touch% /tmp/pwned' } }),
        /git_url/,
      ],
      [
        c.prepareWorkspace({ workspaceId: newId(), uid: UID, gid: UID, source: { case: 'gitUrl', value: 'ssh://-oProxyCommand=touch/x' } }),
        /git_url/,
      ],
      [c.prepareWorkspace({ workspaceId: newId(), uid: UID, gid: UID, source: { case: 'copyFromId', value: '..' } }), /copy_from_id/],
      [c.removeWorkspace({ workspaceId: '.' }), /workspace_id/],
      [c.getWorkspaceUsage({ workspaceIds: ['ws-../../'] }), /workspace_ids\[\]/],
    ];
    for (const [call, message] of bad) {
      const err = await failure(call);
      expect(err.code).toBe(Code.InvalidArgument);
      expect(err.rawMessage).toMatch(message);
    }
    expect(readdirSync(root)).toEqual([]);
  });

  it('refuses a caller without the service token, or with one that is not a peer', async () => {
    for (const token of [null, 'not-a-peer-token']) {
      const err = await failure(client(runner, token).prepareWorkspace({ workspaceId: newId(), uid: UID, gid: UID }));
      expect(err.code).toBe(Code.Unauthenticated);
      expect((await failure(client(runner, token).getStorageInfo({}))).code).toBe(Code.Unauthenticated);
    }
    expect(readdirSync(root)).toEqual([]);
  });
});
