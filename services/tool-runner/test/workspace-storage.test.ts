/**
 * The WorkspaceStorageService through real runners and a real client: on a btrfs image the
 * runner creates and loop-mounts itself (BEDROCK_WORKSPACE_IMAGE), with quotas the kernel
 * enforces, and on plain directories (the `none` backend). Clones come from a `git daemon` on
 * loopback. Needs root (loop devices, chown, other uids) and btrfs-progs for the btrfs part.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { execFileSync, spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
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
import { createServer, connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Code, ConnectError, createClient } from '@connectrpc/connect';
import type { Client } from '@connectrpc/connect';
import { createGrpcTransport } from '@connectrpc/connect-node';
import { Mode, ToolExecJobSchema, WorkspaceStorageService } from '@bedrock/contracts';
import { create } from '@bufbuild/protobuf';
import { serviceTokenInterceptor } from '@bedrock/platform/server';
import { readToolRunnerConfig } from '../src/config.ts';
import type { ToolRunner } from '../src/create-tool-runner.ts';
import { openWorkspaceStorage } from '../src/workspaces/workspace-storage.ts';
import { grpcClient, startTestRunner, TEST_SERVICES } from './support-runner.ts';

const isRoot = process.getuid?.() === 0;
const hasBtrfs = (() => {
  try {
    execFileSync('mkfs.btrfs', ['--version'], { stdio: 'ignore' });
    execFileSync('btrfs', ['--version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
})();
if (!isRoot) console.warn('workspace-storage.test.ts: skipped: needs root (loop devices, chown, other uids)');
else if (!hasBtrfs) console.warn('workspace-storage.test.ts: btrfs part skipped: btrfs-progs missing (apt-get install btrfs-progs)');

const UID = 200_001;
const OTHER_UID = 200_002;
const MiB = 1024 ** 2;

let sequence = 0;
/** A fresh valid workspace id. */
function newId(): string {
  const tail = `${Date.now().toString(36)}${(sequence++).toString(36)}${Math.random().toString(36).slice(2)}`.replace(/[^0-9a-z]/g, '');
  return `ws-${tail.padEnd(26, '0').slice(0, 26)}`;
}

function client(runner: ToolRunner, token: string | null = TEST_SERVICES.tokens.conversation!): Client<typeof WorkspaceStorageService> {
  return createClient(
    WorkspaceStorageService,
    createGrpcTransport({ baseUrl: runner.grpcUrl, interceptors: token === null ? [] : [serviceTokenInterceptor(token)] }),
  );
}

async function failure(promise: Promise<unknown>): Promise<ConnectError> {
  try {
    await promise;
  } catch (err) {
    return ConnectError.from(err);
  }
  throw new Error('the call succeeded');
}

function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const server = createServer();
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

async function listening(port: number): Promise<void> {
  for (let i = 0; i < 100; i++) {
    const ok = await new Promise<boolean>((resolve) => {
      const socket = connect(port, '127.0.0.1', () => {
        socket.end();
        resolve(true);
      });
      socket.on('error', () => resolve(false));
    });
    if (ok) return;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`nothing listens on ${port}`);
}

/** A bare repository with one commit, served read-only by `git daemon` on loopback. */
async function gitDaemon(dir: string): Promise<{ url: (name: string) => string; stop: () => void }> {
  const base = join(dir, 'git');
  const work = join(dir, 'git-work');
  mkdirSync(work, { recursive: true });
  const git = (cwd: string, ...args: string[]) =>
    execFileSync('git', ['-c', 'user.name=t', '-c', 'user.email=t@example.invalid', ...args], { cwd, stdio: 'pipe' });
  git(work, 'init', '-q', '-b', 'main');
  writeFileSync(join(work, 'README.md'), 'hello from the repository\n');
  git(work, 'add', 'README.md');
  git(work, 'commit', '-q', '-m', 'first');
  mkdirSync(base, { recursive: true });
  git(base, 'clone', '-q', '--bare', work, join(base, 'repo.git'));
  const port = await freePort();
  const daemon: ChildProcess = spawn(
    'git',
    ['daemon', '--export-all', `--base-path=${base}`, '--listen=127.0.0.1', `--port=${port}`, '--reuseaddr', base],
    { stdio: 'ignore' },
  );
  await listening(port);
  return { url: (name) => `git://127.0.0.1:${port}/${name}`, stop: () => daemon.kill('SIGKILL') };
}

/** Writes `mib` MiB into `file` as uid:gid; dd's stderr and status. */
function ddAs(uid: number, file: string, mib: number): { status: number | null; stderr: string } {
  try {
    execFileSync(
      'setpriv',
      [`--reuid=${uid}`, `--regid=${uid}`, '--clear-groups', 'dd', 'if=/dev/zero', `of=${file}`, 'bs=1M', `count=${mib}`, 'conv=fsync'],
      {
        stdio: 'pipe',
      },
    );
    return { status: 0, stderr: '' };
  } catch (err) {
    const e = err as { status: number | null; stderr: Buffer };
    return { status: e.status, stderr: e.stderr.toString() };
  }
}

function asUser(uid: number, ...argv: string[]): void {
  execFileSync('setpriv', [`--reuid=${uid}`, `--regid=${uid}`, '--clear-groups', ...argv], { stdio: 'pipe' });
}

const describeRoot = isRoot ? describe : describe.skip;
const describeBtrfs = isRoot && hasBtrfs ? describe : describe.skip;

describeBtrfs('WorkspaceStorageService on btrfs (a loop-mounted image the runner made)', () => {
  let dir: string;
  let root: string;
  let runner: ToolRunner;
  let second: ToolRunner;
  let git: Awaited<ReturnType<typeof gitDaemon>>;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'bedrock-ws-btrfs-'));
    chmodSync(dir, 0o711); // the owners must be able to reach their workspaces
    root = join(dir, 'root');
    const workspaces = { root, image: join(dir, 'image', 'workspaces.btrfs'), imageSize: 512 * MiB, cloneTimeout: 60_000 };
    runner = await startTestRunner({ workspaces });
    // A second runner of the same deployment: same root, same image (already mounted).
    second = await startTestRunner({ workspaces });
    git = await gitDaemon(dir);
  }, 120_000);

  afterAll(async () => {
    git?.stop();
    await runner?.stop();
    await second?.stop();
    if (root && existsSync(root)) {
      const loop = /^(\/dev\/loop\d+):/.exec(execFileSync('losetup', ['-j', join(dir, 'image', 'workspaces.btrfs')]).toString())?.[1];
      execFileSync('umount', [root]);
      // A loop device attached by `mount -o loop` detaches itself at umount (autoclear).
      if (
        loop &&
        execFileSync('losetup', ['-j', join(dir, 'image', 'workspaces.btrfs')])
          .toString()
          .includes(loop)
      ) {
        execFileSync('losetup', ['-d', loop], { stdio: 'ignore' });
      }
    }
    rmSync(dir, { recursive: true, force: true });
  }, 60_000);

  it('says what it enforces: btrfs qgroups, bytes only', async () => {
    const info = await client(runner).getStorageInfo({});
    expect(info.root).toBe(root);
    expect(info.quotaMechanism).toBe('btrfs');
    expect(info.description).toMatch(/^btrfs qgroups on .*: each workspace is a subvolume with its own byte quota/);
    expect(info.description).toContain('btrfs has no inode quota');
    expect(execFileSync('stat', ['-f', '-c', '%T', root]).toString().trim()).toBe('btrfs');
    expect(statSync(root).mode & 0o7777).toBe(0o711);
    expect(statSync(root).uid).toBe(0);
  });

  it("prepares an empty workspace: a subvolume, 0700, its owner's; again, the same path", async () => {
    const id = newId();
    const { path } = await client(runner).prepareWorkspace({ workspaceId: id, uid: UID, gid: UID, quotaBytes: BigInt(64 * MiB) });
    expect(path).toBe(join(root, id));
    const st = statSync(path);
    expect(st.ino).toBe(256); // a subvolume's root
    expect([st.uid, st.gid, st.mode & 0o7777]).toEqual([UID, UID, 0o700]);
    expect((await client(runner).prepareWorkspace({ workspaceId: id, uid: UID, gid: UID })).path).toBe(path);
    expect((await client(second).prepareWorkspace({ workspaceId: id, uid: UID, gid: UID })).path).toBe(path);
  });

  it('answers two runners preparing the same workspace at once, both with the one workspace', async () => {
    const id = newId();
    const calls = [runner, second, runner, second].map((r) =>
      client(r).prepareWorkspace({
        workspaceId: id,
        uid: UID,
        gid: UID,
        quotaBytes: BigInt(32 * MiB),
        source: { case: 'gitUrl', value: git.url('repo.git') },
      }),
    );
    const answers = await Promise.all(calls);
    expect(new Set(answers.map((a) => a.path))).toEqual(new Set([join(root, id)]));
    expect(readFileSync(join(root, id, 'README.md'), 'utf8')).toBe('hello from the repository\n');
    // Nothing half-made left beside it.
    expect(readdirSync(root).filter((n) => n.startsWith('.'))).toEqual([]);
  });

  it("fails a write past the quota with the kernel's EDQUOT, and measures the usage", async () => {
    const id = newId();
    const { path } = await client(runner).prepareWorkspace({ workspaceId: id, uid: UID, gid: UID, quotaBytes: BigInt(8 * MiB) });
    const small = ddAs(UID, join(path, 'small'), 2);
    expect(small.status).toBe(0);
    const big = ddAs(UID, join(path, 'big'), 32);
    expect(big.status).not.toBe(0);
    expect(big.stderr).toContain('Disk quota exceeded');
    execFileSync('btrfs', ['filesystem', 'sync', root]);
    const { usage } = await client(runner).getWorkspaceUsage({ workspaceIds: [id, newId()] });
    expect(usage[0]).toMatchObject({ workspaceId: id, exists: true, inodes: 3n }); // the directory, small, big
    expect(Number(usage[0]!.bytes)).toBeGreaterThanOrEqual(2 * MiB);
    expect(Number(usage[0]!.bytes)).toBeLessThanOrEqual(8 * MiB);
    expect(usage[1]).toMatchObject({ exists: false, bytes: 0n, inodes: 0n });
  });

  it('keeps tools from making subvolumes, which would escape the quota (seccomp refuses the ioctls)', async () => {
    const id = newId();
    const { path } = await client(runner).prepareWorkspace({ workspaceId: id, uid: UID, gid: UID, quotaBytes: BigInt(8 * MiB) });
    // The escape exists: outside the sandbox, the owner may make a subvolume (with a quota group of its own).
    asUser(UID, 'btrfs', 'subvolume', 'create', join(path, 'outside'));
    for (const mode of [Mode.UNRESTRICTED, Mode.RESTRICTED]) {
      const job = create(ToolExecJobSchema, {
        toolUseId: `subvol-${mode}`,
        conversationId: 'c-subvol',
        toolName: 'bash',
        inputJson: JSON.stringify({ command: 'btrfs subvolume create inside; btrfs subvolume snapshot outside snap; ls' }),
        cwd: path,
        mode,
        toolUid: UID,
        toolGid: UID,
        workspacePath: path,
      });
      let content = '';
      for await (const msg of grpcClient(runner).executeTool({ job })) if (msg.kind.case === 'result') content = msg.kind.value.content;
      if (mode === Mode.UNRESTRICTED) expect(content).toMatch(/Operation not permitted/);
      expect(content).not.toMatch(/^inside$/m);
      expect(content).not.toMatch(/^snap$/m);
    }
  });

  it('copies a workspace as a snapshot, with its own quota', async () => {
    const from = newId();
    const { path: source } = await client(runner).prepareWorkspace({ workspaceId: from, uid: UID, gid: UID, quotaBytes: BigInt(64 * MiB) });
    asUser(UID, 'sh', '-c', `mkdir ${source}/sub && echo kept > ${source}/sub/file && ln -s /etc/passwd ${source}/link`);
    const id = newId();
    const { path } = await client(second).prepareWorkspace({
      workspaceId: id,
      uid: UID,
      gid: UID,
      quotaBytes: BigInt(4 * MiB),
      source: { case: 'copyFromId', value: from },
    });
    expect(statSync(path).ino).toBe(256);
    expect(readFileSync(join(path, 'sub', 'file'), 'utf8')).toBe('kept\n');
    expect(lstatSync(join(path, 'link')).isSymbolicLink()).toBe(true);
    expect([statSync(path).uid, statSync(path).mode & 0o7777]).toEqual([UID, 0o700]);
    expect(ddAs(UID, join(path, 'big'), 16).stderr).toContain('Disk quota exceeded');
    // The source is untouched by writes to the copy.
    expect(existsSync(join(source, 'big'))).toBe(false);
    // Another owner's workspace is not copied.
    const err = await failure(
      client(runner).prepareWorkspace({
        workspaceId: newId(),
        uid: OTHER_UID,
        gid: OTHER_UID,
        source: { case: 'copyFromId', value: from },
      }),
    );
    expect(err.code).toBe(Code.FailedPrecondition);
    expect(
      (
        await failure(
          client(runner).prepareWorkspace({ workspaceId: newId(), uid: UID, gid: UID, source: { case: 'copyFromId', value: newId() } }),
        )
      ).code,
    ).toBe(Code.NotFound);
  });

  it('clones as the owner; a failed clone leaves nothing and says what git said', async () => {
    const id = newId();
    const { path } = await client(runner).prepareWorkspace({
      workspaceId: id,
      uid: UID,
      gid: UID,
      source: { case: 'gitUrl', value: git.url('repo.git') },
    });
    expect(statSync(join(path, 'README.md')).uid).toBe(UID);
    expect(statSync(join(path, '.git', 'HEAD')).uid).toBe(UID);
    const missing = newId();
    const err = await failure(
      client(runner).prepareWorkspace({ workspaceId: missing, uid: UID, gid: UID, source: { case: 'gitUrl', value: git.url('nope.git') } }),
    );
    expect(err.code).toBe(Code.FailedPrecondition);
    expect(err.rawMessage).toMatch(/^git clone of git:\/\/127\.0\.0\.1:\d+\/nope\.git failed: /);
    expect(err.rawMessage).toMatch(/remote|repository|not exported/i);
    expect(existsSync(join(root, missing))).toBe(false);
    expect(readdirSync(root).filter((n) => n.startsWith('.'))).toEqual([]);
  });

  it('removes a workspace (even with subvolumes its owner made inside), idempotently', async () => {
    const id = newId();
    const { path } = await client(runner).prepareWorkspace({ workspaceId: id, uid: UID, gid: UID, quotaBytes: BigInt(16 * MiB) });
    asUser(UID, 'btrfs', 'subvolume', 'create', join(path, 'nested'));
    asUser(UID, 'btrfs', 'subvolume', 'create', join(path, 'nested', 'deeper'));
    writeFileSync(join(path, 'file'), 'x');
    expect((await client(runner).removeWorkspace({ workspaceId: id })).removed).toBe(true);
    expect(existsSync(path)).toBe(false);
    expect((await client(second).removeWorkspace({ workspaceId: id })).removed).toBe(false);
    expect(readdirSync(root).filter((n) => n.startsWith('.'))).toEqual([]);
  });
});

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
    asUser(UID, 'sh', '-c', `mkdir ${path}/d && head -c 100000 /dev/zero > ${path}/d/f && ln -s / ${path}/up`);
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
