/**
 * Workspaces as btrfs subvolumes (root on btrfs, quotas enabled): each workspace ROOT/<id> is a
 * subvolume whose qgroup has a referenced-bytes limit (data and metadata), a copy is a snapshot
 * (O(1), copy-on-write), and removal deletes the subvolume by ioctl, never walking its files.
 * Through the `btrfs` command (btrfs-progs), run with a fixed argv: no maintained npm binding of
 * the btrfs ioctls exists, and the CLI is the interface btrfs documents.
 */
import { lstat, readFile } from 'node:fs/promises';
import { Code, ConnectError } from '@connectrpc/connect';
import type { Owner, StorageBackend } from './backend.ts';
import { removeTree } from './backend.ts';
import { lastLines, run } from './run.ts';
import type { RunResult } from './run.ts';

/** Every subvolume's root directory has this inode number. */
const SUBVOLUME_ROOT_INO = 256;

async function btrfs(args: readonly string[], what: string, timeoutMs = 120_000): Promise<RunResult> {
  const result = await run(['btrfs', ...args], { timeoutMs });
  if (result.code !== 0)
    throw new ConnectError(`${what}: btrfs ${args[0]} ${args[1] ?? ''} failed: ${lastLines(result.stderr, 3)}`, Code.Internal);
  return result;
}

/** Subvolume id of the subvolume whose root is `path`. */
async function subvolumeId(path: string): Promise<number> {
  const out = await btrfs(['inspect-internal', 'rootid', path], `reading the subvolume id of ${path}`);
  return Number(out.stdout.trim());
}

/** `btrfs subvolume list -p`: every subvolume's id and parent id. */
async function subvolumeTree(root: string): Promise<Map<number, number>> {
  const out = await btrfs(['subvolume', 'list', '-p', root], 'listing subvolumes');
  const parents = new Map<number, number>();
  for (const m of out.stdout.matchAll(/^ID (\d+) gen \d+ parent (\d+) /gm)) parents.set(Number(m[1]), Number(m[2]));
  return parents;
}

/** Which btrfs quotas account the filesystem: `simple` (squota, Linux 6.7+) or `full` (qgroups). */
export type QuotaMode = 'simple' | 'full';

/**
 * Whether `root` (on btrfs) has quotas on; turns them on when it may (root): simple quotas through
 * the snapshot helper when there is one and the kernel has them (Linux 6.7+; btrfs-progs before
 * 6.7 cannot), else full qgroups with `btrfs quota enable`. A filesystem whose quotas are on keeps
 * its mode. Returns the reason when they cannot be used.
 */
export async function btrfsQuotaProblem(root: string, snapshotHelper?: string): Promise<string | undefined> {
  const show = await run(['btrfs', 'qgroup', 'show', '--raw', root], { timeoutMs: 60_000 });
  if (show.missing) return 'btrfs-progs is not installed (the btrfs command)';
  if (show.code === 0) return undefined;
  if (process.getuid?.() !== 0) return `quotas are off and this runner is not root: run \`btrfs quota enable ${root}\` as root`;
  if (snapshotHelper) {
    const simple = await run([snapshotHelper, '--enable-simple-quota', root], { timeoutMs: 10 * 60_000 });
    if (simple.code === 0) return undefined;
  }
  const enable = await run(['btrfs', 'quota', 'enable', root], { timeoutMs: 10 * 60_000 });
  if (enable.code !== 0) return `\`btrfs quota enable ${root}\` failed: ${lastLines(enable.stderr, 2)}`;
  return undefined;
}

/** The quota mode of the btrfs filesystem at `root` (quotas on), from sysfs; `full` where the kernel does not say (before 6.7). */
export async function btrfsQuotaMode(root: string): Promise<QuotaMode> {
  const show = await run(['btrfs', 'filesystem', 'show', root], { timeoutMs: 60_000 });
  const uuid = /uuid: ([0-9a-f-]{36})/.exec(show.stdout)?.[1];
  if (!uuid) return 'full';
  const mode = await readFile(`/sys/fs/btrfs/${uuid}/qgroups/mode`, 'utf8').catch(() => 'qgroup');
  return mode.trim() === 'squota' ? 'simple' : 'full';
}

export function btrfsBackend(root: string, mode: QuotaMode = 'full'): StorageBackend {
  const background = new AbortController();

  /** After a delete, the kernel drops the subvolume in the background; its qgroup goes once it is gone (newer kernels remove it themselves). */
  function dropQgroupLater(id: number): void {
    void (async () => {
      const sync = await run(['btrfs', 'subvolume', 'sync', root, String(id)], { timeoutMs: 30 * 60_000, signal: background.signal });
      if (sync.code === 0) await run(['btrfs', 'qgroup', 'destroy', `0/${id}`, root], { timeoutMs: 60_000, signal: background.signal });
    })();
  }

  async function deleteSubvolume(path: string): Promise<void> {
    const id = await subvolumeId(path);
    for (let round = 0; ; round++) {
      const del = await run(['btrfs', 'subvolume', 'delete', '--commit-after', path], { timeoutMs: 10 * 60_000 });
      if (del.code === 0) break;
      if (!/not empty/i.test(del.stderr) || round >= 8) {
        throw new ConnectError(`cannot delete the subvolume ${path}: ${lastLines(del.stderr, 3)}`, Code.Internal);
      }
      // A tool made subvolumes inside it (unprivileged users may): delete those first, the
      // innermost ones, by id (found in the subvolume tree, not by walking files).
      const parents = await subvolumeTree(root);
      const below = [...parents.keys()].filter((sub) => {
        for (let p = parents.get(sub); p !== undefined; p = parents.get(p)) if (p === id) return true;
        return false;
      });
      const leaves = below.filter((sub) => ![...parents.values()].includes(sub));
      for (const leaf of leaves) {
        await btrfs(['subvolume', 'delete', '--subvolid', String(leaf), root], `deleting a subvolume inside ${path}`);
        dropQgroupLater(leaf);
      }
    }
    dropQgroupLater(id);
  }

  return {
    mechanism: 'btrfs',
    description: `btrfs ${mode === 'simple' ? 'simple quotas' : 'qgroups'} on ${root}: each workspace is a subvolume with its own byte quota (data and metadata); the number of files is not limited separately (btrfs has no inode quota: files count through the bytes their metadata takes)`,
    async createEmpty(path) {
      await btrfs(['subvolume', 'create', path], `creating ${path}`);
    },
    async snapshot(source, path) {
      if ((await lstat(source)).ino !== SUBVOLUME_ROOT_INO) return false; // a plain directory (made before quotas were on): copied
      await btrfs(['subvolume', 'snapshot', source, path], `snapshotting ${source}`);
      return true;
    },
    async setQuota(path, bytes) {
      // Named by id on the root: through the path, the limit's transaction is charged to the
      // subvolume, and a copy inside a family at its quota could not be limited.
      await btrfs(['qgroup', 'limit', String(bytes), `0/${await subvolumeId(path)}`, root], `setting the quota of ${path}`);
    },
    async remove(path: string, owner: Owner) {
      const st = await lstat(path);
      if (st.ino === SUBVOLUME_ROOT_INO) await deleteSubvolume(path);
      else await removeTree(path, owner); // a plain directory (made before quotas were on)
    },
    async usedBytes(path) {
      if ((await lstat(path)).ino !== SUBVOLUME_ROOT_INO) return undefined; // a plain directory: counted file by file
      const out = await btrfs(['qgroup', 'show', '--raw', '-f', path], `reading the usage of ${path}`, 60_000);
      const m = /^0\/\d+\s+(\d+)\s+\d+/m.exec(out.stdout);
      return m ? Number(m[1]) : undefined;
    },
    close() {
      background.abort();
    },
  };
}
