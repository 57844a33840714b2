/**
 * The WorkspaceStorageService on btrfs, through two real runners and a real client: an image the
 * runner creates and loop-mounts itself (BEDROCK_WORKSPACE_IMAGE), with quotas the kernel
 * enforces; clones from a `git daemon` on loopback. Needs root and btrfs-progs.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { execFileSync } from 'node:child_process';
import { chmodSync, existsSync, lstatSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Code } from '@connectrpc/connect';
import { Mode, ToolExecJobSchema } from '@bedrock/contracts';
import { create } from '@bufbuild/protobuf';
import type { ToolRunner } from '../src/create-tool-runner.ts';
import { asUser, hasBtrfs, isRoot, newWorkspaceId as newId } from './support-btrfs.ts';
import { grpcClient, startTestRunner } from './support-runner.ts';
import { client, failure, gitDaemon, MiB, UID } from './support-workspace-storage.ts';

if (!isRoot) console.warn('workspace-storage.test.ts: skipped: needs root (loop devices, chown, other uids)');
else if (!hasBtrfs) console.warn('workspace-storage.test.ts: skipped: btrfs-progs missing (apt-get install btrfs-progs)');

const OTHER_UID = 200_002;

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
    // Simple quotas where the kernel has them (6.7+), turned on through the snapshot helper.
    expect(info.description).toMatch(/^btrfs (simple quotas|qgroups) on .*: each workspace is a subvolume with its own byte quota/);
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
    expect(readdirSync(root).filter((n) => n.startsWith('.') && n !== '.checkpoints')).toEqual([]);
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
    asUser(UID, path, 'btrfs', 'subvolume', 'create', join(path, 'outside'));
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
    asUser(UID, source, 'sh', '-c', `mkdir ${source}/sub && echo kept > ${source}/sub/file && ln -s /etc/passwd ${source}/link`);
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
    expect(readdirSync(root).filter((n) => n.startsWith('.') && n !== '.checkpoints')).toEqual([]);
  });

  it('removes a workspace (even with subvolumes its owner made inside), idempotently', async () => {
    const id = newId();
    const { path } = await client(runner).prepareWorkspace({ workspaceId: id, uid: UID, gid: UID, quotaBytes: BigInt(16 * MiB) });
    asUser(UID, path, 'btrfs', 'subvolume', 'create', join(path, 'nested'));
    asUser(UID, path, 'btrfs', 'subvolume', 'create', join(path, 'nested', 'deeper'));
    writeFileSync(join(path, 'file'), 'x');
    expect((await client(runner).removeWorkspace({ workspaceId: id })).removed).toBe(true);
    expect(existsSync(path)).toBe(false);
    expect((await client(second).removeWorkspace({ workspaceId: id })).removed).toBe(false);
    expect(readdirSync(root).filter((n) => n.startsWith('.') && n !== '.checkpoints')).toEqual([]);
  });
});
