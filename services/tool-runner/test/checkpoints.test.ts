/**
 * Checkpoints (src/workspaces/checkpoints.ts) on a real loop-mounted btrfs image: every kind
 * of change is captured and restored byte for byte, diffs name what changed, a workspace made
 * from a checkpoint is independent of its source, checkpoints count toward the workspace's
 * quota, retention bounds them, and plain directories refuse them with a reason. Needs root and
 * btrfs-progs (skipped otherwise, saying so).
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Code, ConnectError } from '@connectrpc/connect';
import { readToolRunnerConfig } from '../src/config.ts';
import { openWorkspaceStorage } from '../src/workspaces/workspace-storage.ts';
import type { PrepareRequest, WorkspaceStorage } from '../src/workspaces/workspace-storage.ts';
import { asUser, btrfsRoot, hasBtrfs, isRoot, newWorkspaceId, treeOf } from './support-btrfs.ts';
import type { BtrfsRoot } from './support-btrfs.ts';

const UID = 200_011;
const MiB = 1024 ** 2;
const RETAIN_ALL = { maxCount: 0, maxBytes: 0 };
if (!isRoot || !hasBtrfs) console.warn('checkpoints.test.ts: btrfs part skipped: needs root and btrfs-progs');
const describeBtrfs = isRoot && hasBtrfs ? describe : describe.skip;
const describeRoot = isRoot ? describe : describe.skip;

async function failure(promise: Promise<unknown>): Promise<ConnectError> {
  try {
    await promise;
  } catch (err) {
    return ConnectError.from(err);
  }
  throw new Error('the call succeeded');
}

/** Runs a shell script as the workspace's owner inside it (as a tool would). */
function sh(path: string, script: string): string {
  return asUser(UID, path, 'sh', '-c', script);
}

describeBtrfs.each(['simple', 'full'] as const)('checkpoints on btrfs, %s quotas', (quotas) => {
  let fs: BtrfsRoot;
  let storage: WorkspaceStorage;
  const simpleQuotas = () => quotas === 'simple';

  beforeAll(async () => {
    fs = await btrfsRoot('bedrock-ckpt-', 1024, quotas);
    storage = await fs.open();
    expect(storage.info().description).toMatch(quotas === 'simple' ? /^btrfs simple quotas on / : /^btrfs qgroups on /);
  }, 120_000);
  afterAll(() => {
    storage?.close();
    fs?.destroy();
  });
  // Every snapshot stays inside its family qgroup: btrfs's accounting (the quota) stays exact.
  afterEach(() => {
    expect(spawnSync('btrfs', ['qgroup', 'show', fs.root]).stderr.toString()).not.toMatch(/inconsistent/);
  });

  async function workspace(quotaMiB = 0, source: PrepareRequest['source'] = { kind: 'empty' }): Promise<{ id: string; path: string }> {
    const id = newWorkspaceId();
    const path = await storage.prepare({ workspaceId: id, uid: UID, gid: UID, quotaBytes: quotaMiB * MiB, source });
    return { id, path };
  }

  it('captures every kind of change and restores the tree byte for byte', async () => {
    const { id, path } = await workspace(256);
    sh(
      path,
      `set -e; mkdir -p src/deep; printf 'one\\ntwo\\n' > src/a.txt; printf 'keep' > b.txt; chmod 640 b.txt; ln -s src/a.txt link;
       head -c 3000000 /dev/urandom > big.bin; printf 'x' > doomed; git init -q nested && git -C nested -c user.name=t -c user.email=t@e commit -q --allow-empty -m one;
       printf 'bin\\0ary' > src/deep/bin`,
    );
    const before = treeOf(path);
    expect(await storage.checkpoints.create(id, 'turn-1', 256 * MiB, RETAIN_ALL)).toEqual({ created: true, removed: [] });
    // Again: idempotent.
    expect(await storage.checkpoints.create(id, 'turn-1', 256 * MiB, RETAIN_ALL)).toEqual({ created: false, removed: [] });
    sh(
      path,
      `set -e; printf 'three\\n' >> src/a.txt; rm doomed; mv b.txt renamed.txt; chmod 600 renamed.txt; rm link; ln -s nowhere link;
       dd if=/dev/zero of=big.bin bs=1 count=10 seek=1000 conv=notrunc status=none; git -C nested -c user.name=t -c user.email=t@e commit -q --allow-empty -m two;
       chmod 700 src/deep; mkfifo pipe || true`,
    );
    const after = treeOf(path);
    expect(after).not.toEqual(before);

    const diff = await storage.checkpoints.diff(id, 'turn-1', '');
    const kinds = Object.fromEntries(diff.changes.map((c) => [c.path, c.kind]));
    expect(kinds).toMatchObject({
      'src/a.txt': 'modified',
      doomed: 'deleted',
      'b.txt': 'deleted',
      'renamed.txt': 'added',
      link: 'symlink',
      'big.bin': 'modified',
      'src/deep': 'mode',
    });
    const a = diff.changes.find((c) => c.path === 'src/a.txt')!;
    expect(a.unifiedDiff).toContain('--- a/src/a.txt');
    expect(a.unifiedDiff).toContain('+three');
    expect(a.binary).toBe(false);
    expect(diff.changes.find((c) => c.path === 'big.bin')!.binary).toBe(true);
    expect(diff.changes.find((c) => c.path === 'src/deep')).toMatchObject({ oldMode: 0o755, newMode: 0o700 });
    expect(diff.changes.some((c) => c.path.startsWith('nested/.git/'))).toBe(true);
    expect(diff.changes.find((c) => c.path === 'src/deep/bin')).toBeUndefined(); // untouched

    await storage.checkpoints.restore(id, 'turn-1', 256 * MiB);
    expect(treeOf(path)).toEqual(before);
    expect((await storage.checkpoints.diff(id, 'turn-1', '')).changes).toEqual([]);
    // Still the owner's, still 0700, still a subvolume with its quota; nothing left beside it.
    expect(execFileSync('stat', ['-c', '%u %a %i', path]).toString().trim()).toBe(`${UID} 700 256`);
    expect(readdirSync(fs.root).filter((n) => n.includes(id))).toEqual([id]);
    // The owner can keep working in it.
    sh(path, 'printf more >> src/a.txt');
  });

  it('makes a workspace from a checkpoint that never touches its source', async () => {
    const src = await workspace();
    sh(src.path, 'printf base > f; mkdir d');
    const atFork = treeOf(src.path);
    await storage.checkpoints.create(src.id, 'at-fork', 0, RETAIN_ALL);
    sh(src.path, 'printf later > f; printf new > g');
    const { path: forkPath } = await workspace(64, { kind: 'checkpoint', fromId: src.id, checkpointId: 'at-fork' });
    expect(treeOf(forkPath)).toEqual(atFork);
    sh(forkPath, 'printf fork > f; printf only-fork > h');
    sh(src.path, 'printf source > f');
    expect(execFileSync('cat', [join(src.path, 'f')]).toString()).toBe('source');
    expect(existsSync(join(src.path, 'h'))).toBe(false);
    expect(execFileSync('cat', [join(forkPath, 'f')]).toString()).toBe('fork');
    expect(existsSync(join(forkPath, 'g'))).toBe(false);
  });

  it('answers NOT_FOUND for a checkpoint never taken and INVALID_ARGUMENT for a bad id', async () => {
    const { id } = await workspace();
    expect((await failure(storage.checkpoints.restore(id, 'nope', 0))).code).toBe(Code.NotFound);
    expect((await failure(storage.checkpoints.create(id, '../x', 0, RETAIN_ALL))).code).toBe(Code.InvalidArgument);
    expect((await failure(storage.checkpoints.create(id, '.tmp-x', 0, RETAIN_ALL))).code).toBe(Code.InvalidArgument);
  });

  it('keeps at most maxCount checkpoints, the oldest going first', async () => {
    const { id, path } = await workspace();
    for (let i = 1; i <= 5; i++) {
      sh(path, `printf ${i} > f`);
      const { removed } = await storage.checkpoints.create(id, `t${i}`, 0, { maxCount: 3, maxBytes: 0 });
      expect(removed).toEqual(i > 3 ? [`t${i - 3}`] : []);
    }
    expect((await storage.checkpoints.list(id)).map((c) => c.id)).toEqual(['t3', 't4', 't5']);
    expect((await storage.checkpoints.remove(id, [], 't')).sort()).toEqual(['t3', 't4', 't5']);
    expect(await storage.checkpoints.list(id)).toEqual([]);
  });

  it('keeps what checkpoints hold alone under maxBytes, the oldest going first (full qgroups)', async () => {
    if (simpleQuotas()) return; // the next test: simple quotas cannot read what a checkpoint holds alone
    const { id, path } = await workspace();
    const retention = { maxCount: 0, maxBytes: 8 * MiB };
    // Each round replaces a 6 MiB file: every checkpoint but the newest ends up holding one alone.
    const round = async (name: string): Promise<string[]> => {
      sh(path, `rm -f *.bin; dd if=/dev/urandom of=${name}.bin bs=1M count=6 conv=fsync status=none`);
      return (await storage.checkpoints.create(id, name, 0, retention)).removed;
    };
    expect(await round('k1')).toEqual([]); // the family references 6 MiB: under the limit, nothing is read
    expect(await round('k2')).toEqual([]); // k1 holds 6 MiB alone: under 8
    expect(await round('k3')).toEqual(['k1']); // k1 and k2 hold 12 MiB: the oldest goes
    expect((await storage.checkpoints.list(id)).map((c) => c.id)).toEqual(['k2', 'k3']);
    // Over a 1-byte limit every checkpoint but the newest goes (each holds at least its own tree's root alone).
    expect((await storage.checkpoints.create(id, 'k4', 0, { maxCount: 0, maxBytes: 1 })).removed).toEqual(['k2', 'k3']);
    expect((await storage.checkpoints.list(id)).map((c) => c.id)).toEqual(['k4']);
  }, 60_000);

  it('keeps maxBytes of the quota free, the oldest going first, one per checkpoint (simple quotas)', async () => {
    if (!simpleQuotas()) return;
    const { id, path } = await workspace(24);
    // Quota 24 MiB, 8 MiB kept free: checkpoints go while the family holds over 16 MiB.
    const retention = { maxCount: 0, maxBytes: 8 * MiB };
    const round = async (name: string): Promise<string[]> => {
      sh(path, `rm -f *.bin; dd if=/dev/urandom of=${name}.bin bs=1M count=6 conv=fsync status=none`);
      return (await storage.checkpoints.create(id, name, 24 * MiB, retention)).removed;
    };
    expect(await round('k1')).toEqual([]); // the family holds 6 MiB
    expect(await round('k2')).toEqual([]); // 12 MiB: the workspace's 6 and k1's 6
    expect(await round('k3')).toEqual(['k1']); // 18 MiB: over 16, the oldest goes
    expect((await storage.checkpoints.list(id)).map((c) => c.id)).toEqual(['k2', 'k3']);
    // Over a 1-byte limit without a quota, each checkpoint retires the oldest one, never the newest.
    expect((await storage.checkpoints.create(id, 'k4', 0, { maxCount: 0, maxBytes: 1 })).removed).toEqual(['k2']);
    expect((await storage.checkpoints.create(id, 'k5', 0, { maxCount: 0, maxBytes: 1 })).removed).toEqual(['k3']);
    expect((await storage.checkpoints.list(id)).map((c) => c.id)).toEqual(['k4', 'k5']);
    // A quota no larger than maxBytes bounds them by itself: nothing goes.
    expect((await storage.checkpoints.create(id, 'k6', 8 * MiB, retention)).removed).toEqual([]);
  }, 60_000);

  it('counts what checkpoints hold toward the workspace quota', async () => {
    const { id, path } = await workspace(24);
    sh(path, 'dd if=/dev/urandom of=a bs=1M count=14 conv=fsync status=none');
    await storage.checkpoints.create(id, 'held', 24 * MiB, RETAIN_ALL);
    sh(path, 'rm a; sync');
    execFileSync('btrfs', ['filesystem', 'sync', path]);
    // The checkpoint still holds the 14 MiB: another 14 MiB does not fit in 24.
    const write = (): string => {
      try {
        sh(path, 'set -e; dd if=/dev/urandom of=b bs=1M count=14 conv=fsync status=none; sync');
        return 'ok';
      } catch (err) {
        return String((err as { stderr: Buffer }).stderr);
      }
    };
    const written = write();
    expect(written).toMatch(/quota exceeded/i);
    // Without the checkpoint it fits.
    await storage.checkpoints.remove(id, ['held']);
    execFileSync('btrfs', ['subvolume', 'sync', fs.root]);
    execFileSync('btrfs', ['filesystem', 'sync', path]);
    sh(path, 'rm -f b; sync');
    execFileSync('btrfs', ['filesystem', 'sync', path]);
    expect(write()).toBe('ok');
  }, 60_000);

  /** Writes `mib` MiB as the owner; 'ok' or what dd said. */
  function fill(path: string, name: string, mib: number): string {
    try {
      sh(path, `set -e; dd if=/dev/urandom of=${name} bs=1M count=${mib} conv=fsync status=none; sync`);
      return 'ok';
    } catch (err) {
      return String((err as { stderr: Buffer }).stderr);
    }
  }

  // Simple quotas charge an extent to the subvolume that wrote it, for as long as anything keeps
  // it: a rewound workspace (a new subvolume) or a copy whose source is deleted must not get a
  // fresh quota on top of the bytes they still hold.
  it('does not renew the quota by rewinding', async () => {
    const { id, path } = await workspace(24);
    expect(fill(path, 'a', 14)).toBe('ok');
    await storage.checkpoints.create(id, 'full', 24 * MiB, RETAIN_ALL);
    await storage.checkpoints.restore(id, 'full', 24 * MiB);
    // The rewound workspace holds the 14 MiB: another 14 do not fit in 24.
    expect(fill(path, 'b', 14)).toMatch(/quota exceeded/i);
  }, 60_000);

  it('does not renew the quota by copying a workspace and deleting the source', async () => {
    const { id, path } = await workspace(24);
    expect(fill(path, 'a', 14)).toBe('ok');
    const { id: copyId, path: copy } = await workspace(24, { kind: 'copy', fromId: id });
    expect(await storage.remove(id)).toBe(true);
    execFileSync('btrfs', ['subvolume', 'sync', fs.root]);
    // The copy holds the source's 14 MiB: another 14 do not fit in 24.
    expect(fill(copy, 'b', 14)).toMatch(/quota exceeded/i);
    // What it may write is the rest of the quota.
    sh(copy, 'rm -f b; sync');
    execFileSync('btrfs', ['filesystem', 'sync', copy]);
    expect(fill(copy, 'c', 6)).toBe('ok');
    // Its usage says so: the bytes it holds, not only those it wrote.
    const [usage] = await storage.usage([copyId]);
    expect(usage!.bytes).toBeGreaterThanOrEqual(20 * MiB);
    expect(path).not.toBe(copy);
  }, 60_000);

  it('rewinds and copies a workspace whose quota is full (what frees room)', async () => {
    const { id, path } = await workspace(24);
    expect(fill(path, 'a', 10)).toBe('ok');
    await storage.checkpoints.create(id, 'before-full', 24 * MiB, RETAIN_ALL);
    expect(fill(path, 'b', 30)).toMatch(/quota exceeded/i);
    // Copied as it is, full quota and all.
    const { path: copy } = await workspace(24, { kind: 'copy', fromId: id });
    expect(existsSync(join(copy, 'b'))).toBe(true);
    await storage.checkpoints.restore(id, 'before-full', 24 * MiB);
    expect(existsSync(join(path, 'a'))).toBe(true);
    expect(existsSync(join(path, 'b'))).toBe(false);
    expect([statSync(path).uid, statSync(path).mode & 0o7777]).toEqual([UID, 0o700]);
  }, 60_000);

  it('orders checkpoints by when they were taken, whatever their ids', async () => {
    const { id, path } = await workspace();
    // Ids as the conversation service makes them (turn numbers): "t-10" sorts before "t-6" as text.
    for (const n of [6, 10, 14]) {
      sh(path, `printf ${n} > f`);
      await storage.checkpoints.create(id, `t-${n}`, 0, RETAIN_ALL);
    }
    const listed = await storage.checkpoints.list(id);
    expect(listed.map((c) => c.id)).toEqual(['t-6', 't-10', 't-14']);
    expect(listed[0]!.createdMs).toBeLessThanOrEqual(listed[2]!.createdMs);
    // Retention takes the oldest, not the first by name.
    expect((await storage.checkpoints.create(id, 't-18', 0, { maxCount: 3, maxBytes: 0 })).removed).toEqual(['t-6']);
  }, 60_000);

  it('frees every checkpoint with the workspace', async () => {
    const { id, path } = await workspace();
    sh(path, 'printf x > f');
    await storage.checkpoints.create(id, 'a', 0, RETAIN_ALL);
    await storage.checkpoints.create(id, 'b', 0, RETAIN_ALL);
    expect(await storage.remove(id)).toBe(true);
    expect(existsSync(join(fs.root, '.checkpoints', id))).toBe(false);
    const subvolumes = execFileSync('btrfs', ['subvolume', 'list', fs.root]).toString();
    expect(subvolumes).not.toContain(id);
  });
});

describeRoot('checkpoints on plain directories', () => {
  it('are refused with FAILED_PRECONDITION saying what to do', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'bedrock-ckpt-plain-'));
    try {
      const storage = await openWorkspaceStorage({
        config: readToolRunnerConfig({}, { workspaces: { root: join(dir, 'root') } }).workspaces,
      });
      const id = newWorkspaceId();
      const path = await storage.prepare({ workspaceId: id, uid: UID, gid: UID, quotaBytes: 0, source: { kind: 'empty' } });
      writeFileSync(join(path, 'f'), 'x');
      const err = await failure(storage.checkpoints.create(id, 'one', 0, RETAIN_ALL));
      expect(err.code).toBe(Code.FailedPrecondition);
      expect(err.rawMessage).toMatch(/checkpoints need the workspace root on btrfs .*not btrfs.*BEDROCK_WORKSPACE_IMAGE/);
      expect((await failure(storage.checkpoints.diff(id, '', ''))).code).toBe(Code.FailedPrecondition);
      expect((await failure(storage.checkpoints.restore(id, 'one', 0))).code).toBe(Code.FailedPrecondition);
      // Nothing was copied.
      expect(existsSync(join(dir, 'root', '.checkpoints'))).toBe(false);
      storage.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
