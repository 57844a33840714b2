/**
 * The tenants battery: two ordinary users, alice and bob, added by an admin, attack each other through the
 * public API of a running Bedrock (embedded or cluster layout) on its shipped defaults (host paths off: every
 * conversation in a workspace). Tools are run by the offline model, whose `$ cmd` lines become one bash call
 * each, and every probe prints one marker per attempt (`READ x` / `DENIED x`, `WROTE x` / `REFUSED x`, ...),
 * so each test reads as a list of attempts and their outcomes (docs/testing.md, the tenants rows).
 */
import { execFileSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Code, ConnectError, type Client } from '@connectrpc/connect';
import type { AdminService, ConversationService, WorkspaceService } from '@bedrock/contracts';
import { Mode, StateKind } from '@bedrock/contracts';

export interface TenantsClients {
  readonly conversations: Client<typeof ConversationService>;
  readonly workspaces: Client<typeof WorkspaceService>;
}

export interface TenantsTarget {
  /** AdminService as an admin (adds alice and bob, issues their tokens, deletes bob). */
  readonly admin: Client<typeof AdminService>;
  /** The public API (web-bff) as the holder of `token`. */
  readonly clientsOf: (token: string) => TenantsClients;
  /** The tool-runners' BEDROCK_WORKSPACE_ROOT. */
  readonly workspaceRoot: string;
  /** Files of the system a tool must not read (the token store, service tokens, ...). */
  readonly secretFiles: readonly string[];
  /** Directories of the system a tool must not list or write (the data directory, ...). */
  readonly secretDirs: readonly string[];
  /** A file of the repository checkout the services run from. */
  readonly repositoryFile: string;
  /** The workspace quota in bytes where the storage enforces one (btrfs), else undefined. */
  readonly quotaBytes?: number;
  /** How long one turn may take, ms. Default 120 000. */
  readonly turnTimeoutMs?: number;
}

type ToolResult = { content: string; isError: boolean };

interface User extends TenantsClients {
  readonly id: string;
}

const MARK = `${process.pid}-${Date.now()}`;
const BOB_SECRET = `secret-of-bob-${MARK}`;
const BOB_ARGV_SECRET = `argv-secret-of-bob-${MARK}`;
const HOME_DIR = `/home/bedrock-tenants-${MARK}`;
const ROOT_FILE = `/root/.bedrock-tenants-${MARK}`;
const TOOL_UIDS = { first: 200_000, last: 299_999 };

const codeOf = (p: Promise<unknown>): Promise<{ code: string; message: string }> =>
  p.then(
    () => ({ code: 'OK', message: '' }),
    (err: unknown) => {
      const e = ConnectError.from(err);
      return { code: Code[e.code], message: e.rawMessage };
    },
  );

async function waitFor<T>(what: string, probe: () => Promise<T | undefined | false>, timeoutMs: number): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(100);
  }
}

async function stateOf(u: User, id: string): Promise<StateKind | undefined> {
  return (await u.conversations.getConversation({ conversationId: id })).conversation?.state?.kind;
}

async function waitForState(u: User, id: string, kinds: StateKind[], timeoutMs: number): Promise<void> {
  let last: StateKind | undefined;
  await waitFor(
    `conversation ${id} in ${kinds.map((k) => StateKind[k]).join('/')}`,
    async () => {
      last = await stateOf(u, id);
      return last !== undefined && kinds.includes(last);
    },
    timeoutMs,
  ).catch((err: Error) => {
    throw new Error(`${err.message} (state ${last === undefined ? '?' : StateKind[last]})`);
  });
}

async function toolResults(u: User, id: string): Promise<ToolResult[]> {
  const { messages } = await u.conversations.getConversation({ conversationId: id });
  const results: ToolResult[] = [];
  for (const m of messages) {
    for (const block of m.content) {
      if (block.block.case === 'toolResult') results.push({ content: block.block.value.content, isError: block.block.value.isError });
    }
  }
  return results;
}

/** Runs one `$ ` line per command in one turn and answers their results, in order. */
async function run(u: User, id: string, commands: string[], timeoutMs: number): Promise<ToolResult[]> {
  const before = (await toolResults(u, id)).length;
  await u.conversations.sendMessage({ conversationId: id, text: commands.map((c) => `$ ${c}`).join('\n') });
  await waitForState(u, id, [StateKind.IDLE], timeoutMs);
  const results = (await toolResults(u, id)).slice(before);
  if (results.length !== commands.length)
    throw new Error(`expected ${commands.length} tool results, got ${results.length}: ${JSON.stringify(results)}`);
  return results;
}

async function upgrade(u: User, id: string, timeoutMs: number): Promise<void> {
  await u.conversations.sendMessage({ conversationId: id, text: '/upgrade the tenants battery needs to write' });
  await waitForState(u, id, [StateKind.AWAITING_MODE_APPROVAL], timeoutMs);
  await u.conversations.respondToModeUpgrade({ conversationId: id, approve: true });
  await waitForState(u, id, [StateKind.IDLE], timeoutMs);
  const mode = (await u.conversations.getConversation({ conversationId: id })).conversation?.mode;
  if (mode !== Mode.UNRESTRICTED) throw new Error(`conversation ${id} is not Unrestricted after the approval`);
}

/** Host processes whose command line contains `text`. */
function hostProcessesWith(text: string): number[] {
  return readdirSync('/proc')
    .filter((n) => /^\d+$/.test(n))
    .filter((n) => {
      try {
        return readFileSync(`/proc/${n}/cmdline`, 'utf8').replace(/\0/g, ' ').includes(text);
      } catch {
        return false;
      }
    })
    .map(Number);
}

/**
 * The battery as Jest tests. What alice tries: naming bob's workspace or a host path when creating a
 * conversation; from her Restricted and Unrestricted tools, reading bob's workspace (which bob opened to
 * everyone by its mode bits, so only the sandbox can refuse), the data directory's secrets, /root, /home and
 * the repository checkout, and writing anywhere but her own workspace; seeing bob's running tool in `ps -e`
 * or /proc. Then the bounds (her uid, scratch size, memory, and where the storage is btrfs the workspace
 * quota), and that deleting a workspace or a user removes the files from disk.
 */
export function defineTenantsBattery(layout: string, target: () => TenantsTarget): void {
  const t = () => target();
  const timeout = () => t().turnTimeoutMs ?? 120_000;
  let alice: User;
  let bob: User;
  /** alice's conversations in her default workspace: one stays Restricted, one is Unrestricted. */
  const aliceConv = { restricted: '', unrestricted: '' };
  let aliceWs: { id: string; path: string };
  /** bob's workspace `bob-proj`, which he opened to everyone (0755, the file 0644). */
  let bobProj: { id: string; name: string; path: string };
  let bobConv = '';
  let bobDefaultPath = '';
  let bobUid = '';

  async function addUser(id: string): Promise<User> {
    await t().admin.addUser({ userId: id });
    const issued = await t().admin.issueToken({ userId: id, label: 'tenants battery' });
    return { id, ...t().clientsOf(issued.secret) };
  }

  beforeAll(async () => {
    // Planted on the host, readable and writable by anyone's file permissions: only the sandbox keeps tools out.
    mkdirSync(HOME_DIR, { recursive: true });
    chmodSync(HOME_DIR, 0o777);
    writeFileSync(join(HOME_DIR, '.env'), `HOME_SECRET=${MARK}\n`, { mode: 0o644 });
    writeFileSync(ROOT_FILE, `root-secret-${MARK}\n`, { mode: 0o644 });

    alice = await addUser('alice');
    bob = await addUser('bob');

    // bob's workspace, opened to everyone by its mode bits, with a secret in it.
    const made = (await bob.workspaces.createWorkspace({ name: 'bob-proj', requestId: `bob-proj-${MARK}` })).workspace!;
    bobProj = { id: made.id, name: made.name, path: made.path };
    bobConv = (await bob.conversations.createConversation({ workspace: 'bob-proj' })).conversation!.id;
    await upgrade(bob, bobConv, timeout());
    const [shared, uid] = await run(
      bob,
      bobConv,
      [
        `echo ${BOB_SECRET} > "${bobProj.path}/secret.txt" && chmod 755 "${bobProj.path}" && chmod 644 "${bobProj.path}/secret.txt" && echo SHARED`,
        'id -u',
      ],
      timeout(),
    );
    if (!shared!.content.includes('SHARED')) throw new Error(`bob could not share his workspace: ${shared!.content}`);
    bobUid = uid!.content.trim();

    // alice: her default workspace, a Restricted and an Unrestricted conversation in it.
    aliceConv.restricted = (await alice.conversations.createConversation({})).conversation!.id;
    aliceConv.unrestricted = (await alice.conversations.createConversation({})).conversation!.id;
    await upgrade(alice, aliceConv.unrestricted, timeout());
    const ws = (await alice.workspaces.listWorkspaces({})).workspaces.find((w) => w.isDefault)!;
    aliceWs = { id: ws.id, path: ws.path };
  }, 600_000);

  afterAll(() => {
    rmSync(HOME_DIR, { recursive: true, force: true });
    rmSync(ROOT_FILE, { force: true });
  });

  describe(`${layout}: naming what is not yours`, () => {
    it("bob's workspace, by name or id, is NOT_FOUND to alice; so is deleting it; her list holds only hers", async () => {
      for (const workspace of [bobProj.name, bobProj.id]) {
        expect({ workspace, ...(await codeOf(alice.conversations.createConversation({ workspace }))) }).toMatchObject({
          workspace,
          code: 'NotFound',
        });
      }
      expect((await codeOf(alice.workspaces.deleteWorkspace({ workspace: bobProj.id }))).code).toBe('NotFound');
      const mine = (await alice.workspaces.listWorkspaces({})).workspaces;
      expect(mine.map((w) => w.id)).toEqual([aliceWs.id]);
      expect(existsSync(join(bobProj.path, 'secret.txt'))).toBe(true);
    });

    it('a host path (/etc, /root, a path of bob’s workspace, one that does not exist) is PERMISSION_DENIED in identical words', async () => {
      const answers = [];
      for (const cwd of ['/etc', '/root', bobProj.path, join(bobProj.path, 'secret.txt'), '/no/such/dir']) {
        const answer = await codeOf(alice.conversations.createConversation({ cwd }));
        expect({ cwd, code: answer.code }).toEqual({ cwd, code: 'PermissionDenied' });
        answers.push(answer.message);
      }
      expect(new Set(answers).size).toBe(1);
      expect(answers[0]).not.toContain(bobProj.path);
    });
  });

  for (const mode of ['restricted', 'unrestricted'] as const) {
    describe(`${layout}: alice's ${mode === 'restricted' ? 'Restricted' : 'Unrestricted'} tool`, () => {
      it(`runs as her own uid in ${TOOL_UIDS.first}-${TOOL_UIDS.last}, not bob's`, async () => {
        const [res] = await run(alice, aliceConv[mode], ['echo "uid=$(id -u) gid=$(id -g)"'], timeout());
        const [, uid, gid] = /uid=(\d+) gid=(\d+)/.exec(res!.content) ?? [];
        expect(Number(uid)).toBeGreaterThanOrEqual(TOOL_UIDS.first);
        expect(Number(uid)).toBeLessThanOrEqual(TOOL_UIDS.last);
        expect(gid).toBe(uid);
        expect(Number(bobUid)).toBeGreaterThanOrEqual(TOOL_UIDS.first);
        expect(Number(bobUid)).toBeLessThanOrEqual(TOOL_UIDS.last);
        expect(uid).not.toBe(bobUid);
        // Her workspace is hers on disk.
        expect(String(statSync(aliceWs.path).uid)).toBe(uid);
      });

      it("cannot read bob's workspace, the data directory, /root, /home or the repository", async () => {
        const files = [join(bobProj.path, 'secret.txt'), ...t().secretFiles, ROOT_FILE, join(HOME_DIR, '.env'), t().repositoryFile];
        const dirs = [bobProj.path, ...t().secretDirs, t().workspaceRoot, '/root', '/home', HOME_DIR, join(t().repositoryFile, '..')];
        const [reads, lists] = await run(
          alice,
          aliceConv[mode],
          [
            `for f in ${files.map((f) => `"${f}"`).join(' ')}; do if cat "$f" 2>/dev/null; then echo "READ $f"; else echo "DENIED $f"; fi; done`,
            `for d in ${dirs.map((d) => `"${d}"`).join(' ')}; do echo "LIST $d:$(ls -A "$d" 2>/dev/null | tr "\\n" " ")"; done`,
          ],
          timeout(),
        );
        for (const f of files) expect(reads!.content).toContain(`DENIED ${f}\n`);
        expect(reads!.content).not.toMatch(/READ /);
        expect(reads!.content).not.toContain(BOB_SECRET);
        expect(reads!.content).not.toMatch(/root-secret|HOME_SECRET/);
        // A directory lists nothing, or (a directory above her workspace, her view's mount
        // point) only the next step towards her own workspace.
        for (const d of dirs) {
          const listed = new RegExp(`^LIST ${d.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}:(.*)$`, 'm').exec(lists!.content)?.[1];
          expect({ d, listed: listed?.trim().split(' ').filter(Boolean) }).toEqual({
            d,
            listed: aliceWs.path.startsWith(`${d}/`) ? [aliceWs.path.slice(d.length + 1).split('/')[0]] : [],
          });
        }
      });

      it('cannot write outside her workspace; Unrestricted writes her workspace, as her uid', async () => {
        const targets = [
          join(bobProj.path, `planted-${MARK}`),
          ...t().secretDirs.map((d) => join(d, `planted-${MARK}`)),
          join(t().workspaceRoot, `planted-${MARK}`),
          join(HOME_DIR, `planted-${MARK}`),
          `/root/planted-${MARK}`,
          join(t().repositoryFile, '..', `planted-${MARK}`),
        ];
        const mine = `alice-${mode}-${MARK}.txt`;
        const [writes, uid] = await run(
          alice,
          aliceConv[mode],
          [
            `for f in ${targets.map((f) => `"${f}"`).join(' ')}; do if echo x > "$f"; then echo "WROTE $f"; else echo "REFUSED $f"; fi; done; ` +
              `if echo mine > "${aliceWs.path}/${mine}"; then echo WORKSPACE-WROTE; else echo WORKSPACE-REFUSED; fi`,
            'id -u',
          ],
          timeout(),
        );
        for (const f of targets) {
          expect(writes!.content).toContain(`REFUSED ${f}\n`);
          expect({ f, exists: existsSync(f) }).toEqual({ f, exists: false });
        }
        expect(writes!.content).toMatch(/Permission denied|No such file or directory|Read-only file system/);
        if (mode === 'unrestricted') {
          expect(writes!.content).toContain('WORKSPACE-WROTE');
          const st = statSync(join(aliceWs.path, mine));
          expect([String(st.uid), String(st.gid)]).toEqual([uid!.content.trim(), uid!.content.trim()]);
        } else {
          expect(writes!.content).toContain('WORKSPACE-REFUSED');
          expect(existsSync(join(aliceWs.path, mine))).toBe(false);
        }
      });
    });
  }

  describe(`${layout}: bob's running tool`, () => {
    let sleeping = '';

    beforeAll(async () => {
      // bob's long command, in his default workspace; alice looks while it runs, then bob cancels it.
      sleeping = (await bob.conversations.createConversation({})).conversation!.id;
      await bob.conversations.sendMessage({ conversationId: sleeping, text: `$ sleep 30; : ${BOB_ARGV_SECRET}` });
      await waitForState(bob, sleeping, [StateKind.TOOL_EXECUTING], timeout());
      // The host sees it (the control): its argv holds the secret.
      await waitFor('bob’s sleep on the host', async () => hostProcessesWith(BOB_ARGV_SECRET).length > 0, timeout());
      bobDefaultPath = (await bob.workspaces.listWorkspaces({})).workspaces.find((w) => w.isDefault)!.path;
    }, 300_000);

    afterAll(async () => {
      if (!sleeping) return;
      await bob.conversations.cancel({ conversationId: sleeping });
      await waitForState(bob, sleeping, [StateKind.IDLE], timeout());
      await waitFor('bob’s sleep to end', async () => hostProcessesWith(BOB_ARGV_SECRET).length === 0, 30_000);
    }, 120_000);

    for (const mode of ['restricted', 'unrestricted'] as const) {
      it(`is invisible to alice's ${mode} tool: ps -e and /proc show only her own processes`, async () => {
        const pids = hostProcessesWith(BOB_ARGV_SECRET);
        expect(pids.length).toBeGreaterThan(0);
        const [ps, proc] = await run(
          alice,
          aliceConv[mode],
          ['ps -e -o pid=,args=', 'for p in /proc/[0-9]*; do echo "${p#/proc/} $(tr "\\0" " " < $p/cmdline 2>/dev/null)"; done'],
          timeout(),
        );
        for (const out of [ps!.content, proc!.content]) {
          expect(out).not.toContain(BOB_ARGV_SECRET);
          expect(out).not.toContain('sleep 30');
        }
        // Her pid namespace: a handful of processes, numbered from 1, none of the host's.
        const seen = proc!.content
          .trim()
          .split('\n')
          .map((l) => Number(l.split(' ')[0]));
        expect(seen.length).toBeLessThanOrEqual(6);
        expect(Math.max(...seen)).toBeLessThan(50);
        expect(ps!.content.trim().split('\n').length).toBeLessThanOrEqual(4);
      });
    }
  });

  describe(`${layout}: the kernel's bounds on alice's tools`, () => {
    for (const mode of ['restricted', 'unrestricted'] as const) {
      it(`${mode}: writes past the scratch's size (256 MiB) fail with ENOSPC`, async () => {
        // Two files, each below the largest file a Restricted tool may write (also 256 MiB).
        const [res] = await run(
          alice,
          aliceConv[mode],
          [
            'head -c 200M /dev/zero > /tmp/a; echo "exit $?"; head -c 100M /dev/zero > /tmp/b; echo "exit $?"; du -cm /tmp/a /tmp/b | tail -n 1',
          ],
          timeout(),
        );
        expect(res!.content).toContain('No space left on device');
        expect(res!.content).toMatch(/^exit 0\n(.|\n)*exit 1\n/);
        expect(Number(/^(\d+)\s+total/m.exec(res!.content)?.[1])).toBeLessThanOrEqual(256);
      });
    }

    it('unrestricted: head -c 300M /dev/zero > /tmp/x fails with ENOSPC', async () => {
      const [res] = await run(alice, aliceConv.unrestricted, ['head -c 300M /dev/zero > /tmp/x; echo "exit $?"'], timeout());
      expect(res!.content).toContain('No space left on device');
      expect(res!.content).toContain('exit 1');
    });

    it('a tool allocating past its memory limit is killed, and the result says so', async () => {
      // Restricted: 4 GiB (the shipped BEDROCK_RESTRICTED_MEMORY). dd fills one 5 GiB buffer at
      // the kernel's speed (tail -n 1 on a newline-less stream did too, at ~50 MB/s under load).
      const [res, after] = await run(
        alice,
        aliceConv.restricted,
        ['dd if=/dev/zero bs=5G count=1 iflag=fullblock status=none | wc -c', 'echo healthy'],
        timeout(),
      );
      expect(res!.isError).toBe(true);
      expect(res!.content).toMatch(/killed: the run went past its memory limit of 4 GiB/);
      expect(after).toEqual({ content: 'healthy\n', isError: false });
    }, 120_000);

    it('a write past the workspace quota fails with "Disk quota exceeded" (btrfs storage only)', async () => {
      const quota = t().quotaBytes;
      const listed = await alice.workspaces.listWorkspaces({});
      if (quota === undefined) {
        expect(execFileSync('stat', ['-f', '-c', '%T', t().workspaceRoot]).toString().trim()).not.toBe('btrfs');
        // Shown as it is: no quota where none is enforced.
        expect(listed.workspaces.every((w) => w.quotaBytes === 0n && w.quotaInodes === 0n)).toBe(true);
        expect(listed.quota).toMatch(/no disk quota per workspace/);
        return;
      }
      // The byte quota is shown (btrfs enforces it); no file quota (btrfs has none).
      expect(listed.workspaces.every((w) => w.quotaBytes === BigInt(quota) && w.quotaInodes === 0n)).toBe(true);
      const MiB = 1024 ** 2;
      const [res, du] = await run(
        alice,
        aliceConv.unrestricted,
        [
          `dd if=/dev/zero of="${aliceWs.path}/big" bs=1M count=${Math.ceil((quota * 4) / MiB)} 2>&1; echo "exit $?"`,
          `rm -f "${aliceWs.path}/big"; echo removed`,
        ],
        timeout(),
      );
      expect(res!.content).toContain('Disk quota exceeded');
      expect(res!.content).not.toContain('exit 0');
      expect(du!.content).toContain('removed');
    });
  });

  describe(`${layout}: deletion removes the files`, () => {
    it("DeleteWorkspace: bob's workspace directory is gone from disk", async () => {
      expect(existsSync(bobProj.path)).toBe(true);
      const res = await bob.workspaces.deleteWorkspace({ workspace: bobProj.name, withConversations: true, requestId: `del-${MARK}` });
      expect(res.workspaceId).toBe(bobProj.id);
      expect(res.deletedConversationIds).toEqual([bobConv]);
      await waitFor('bob-proj to be removed', async () => !existsSync(bobProj.path), 30_000);
      expect(readdirSync(t().workspaceRoot)).not.toContain(bobProj.id);
    });

    it("DeleteUser: bob's remaining workspace directory is gone from disk; alice's stays", async () => {
      expect(existsSync(bobDefaultPath)).toBe(true);
      const res = await t().admin.deleteUser({ userId: 'bob', requestId: `del-bob-${MARK}` });
      expect(res.user?.id).toBe('bob');
      await waitFor("bob's default workspace to be removed", async () => !existsSync(bobDefaultPath), 30_000);
      expect(existsSync(aliceWs.path)).toBe(true);
      // His token stops within a second.
      await waitFor(
        'bob’s token to stop',
        async () => (await codeOf(bob.workspaces.listWorkspaces({}))).code === 'Unauthenticated',
        10_000,
      );
    });
  });
}
