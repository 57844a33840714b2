/**
 * Checkpoints of workspaces (docs/workspaces.md#checkpoints): read-only btrfs snapshots of a
 * workspace's subvolume, kept under ROOT/.checkpoints/<workspace id>/ inside the workspace's
 * family qgroup, restored by a crash-safe swap, and compared (checkpoint-diff.ts).
 */
import { randomBytes } from 'node:crypto';
import { chmod, lstat, mkdir, readdir, readFile, rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Code, ConnectError } from '@connectrpc/connect';
import { diffTrees } from './checkpoint-diff.ts';
import type { DiffResult } from './checkpoint-diff.ts';
import { errno, lstatOrUndefined } from './errno.ts';
import { leftoverWorkspaceIds, recoverRewinds, rewindPaths } from './rewind-leftovers.ts';
import { lastLines, run } from './run.ts';
import type { SnapshotHelper } from './snapshot-helper.ts';
import { checkWorkspaceId } from './validate.ts';
import type { QuotaMode } from './btrfs-backend.ts';

/** Every subvolume's root directory has this inode number. */
const SUBVOLUME_ROOT_INO = 256;
/** Checkpoint ids: 1 to 64 of [0-9a-z_-], starting with a letter or digit (never `.`-anything). */
export const CHECKPOINT_ID = /^[0-9a-z][0-9a-z_-]{0,63}$/;

export function checkCheckpointId(id: string, field = 'checkpoint_id'): string {
  if (!CHECKPOINT_ID.test(id))
    throw new ConnectError(
      `${field} must be 1 to 64 characters of 0-9, a-z, _ and -, starting with a letter or digit, got ${JSON.stringify(id.slice(0, 80))}`,
      Code.InvalidArgument,
    );
  return id;
}

export interface CheckpointInfo {
  readonly id: string;
  /** When it was taken, ms since the epoch. */
  readonly createdMs: number;
  /**
   * Bytes only this checkpoint holds (its qgroup's exclusive bytes; lags up to a transaction
   * commit). Under simple quotas only what the checkpoint itself wrote (its root node): the bytes
   * it keeps alive stay charged to the workspace that wrote them.
   */
  readonly exclusiveBytes: number;
}

export interface Retention {
  /** Keep at most this many checkpoints per workspace (0: no limit). */
  readonly maxCount: number;
  /**
   * Keep the checkpoints' exclusive bytes under this (0: no limit); the newest is always kept.
   * Under simple quotas, where they are not known, see `simpleRetentionThreshold`.
   */
  readonly maxBytes: number;
}

/**
 * Under simple quotas the bytes checkpoints hold alone cannot be read (each extent is charged to
 * the workspace that wrote it), so byte retention keeps `maxBytes` of the quota free instead:
 * while the family's bytes are above `quota - maxBytes`, each new checkpoint retires the oldest.
 * A quota no larger than `maxBytes` bounds the checkpoints by itself (Infinity: none retired for
 * bytes); without a quota the family's bytes are held under `maxBytes`.
 */
export function simpleRetentionThreshold(quotaBytes: number, maxBytes: number): number {
  if (quotaBytes <= 0) return maxBytes;
  return quotaBytes > maxBytes ? quotaBytes - maxBytes : Infinity;
}

export interface Checkpoints {
  /** Whether checkpoints can be taken here (btrfs), and if not, why. */
  readonly unavailable: string | undefined;
  /** Takes a read-only snapshot of the workspace as checkpoint `id` (idempotent); then applies `retention`, answering the ids it removed. */
  create(workspaceId: string, id: string, quotaBytes: number, retention: Retention): Promise<{ created: boolean; removed: string[] }>;
  list(workspaceId: string): Promise<CheckpointInfo[]>;
  /** Makes the workspace byte-identical to checkpoint `id` (crash-safe swap). */
  restore(workspaceId: string, id: string, quotaBytes: number): Promise<void>;
  /** Removes checkpoints: those named, or, with `prefix`, every one whose id starts with it. */
  remove(workspaceId: string, ids: readonly string[], prefix?: string): Promise<string[]>;
  /** Removes every checkpoint of the workspace and the directory that holds them. */
  removeAll(workspaceId: string): Promise<void>;
  /** Changes from `from` to `to` (checkpoint ids; '' is the live workspace). */
  diff(workspaceId: string, from: string, to: string): Promise<DiffResult>;
  /** Path of checkpoint `id` (existing), for making a workspace from it. */
  path(workspaceId: string, id: string): Promise<string>;
  /**
   * Snapshots `source` (a workspace or one of its checkpoints) to `dest`, writable, inside the
   * workspace's family qgroup, and records that family for `destWorkspaceId`; false when the
   * workspace has no family yet (no checkpoint ever: the caller snapshots as usual). A snapshot
   * sharing extents with a family but outside it would leave btrfs's accounting inconsistent.
   * Under simple quotas the family is made when there is none (limited to the source's own
   * quota): a copy's shared extents stay charged to its source, also once the source is deleted,
   * and only the family's limit still counts them.
   */
  snapshotIntoFamily(workspaceId: string, source: string, dest: string, destWorkspaceId: string): Promise<boolean>;
  /**
   * Under simple quotas, the bytes of the workspace's family (what it, its checkpoints, its
   * earlier selves before rewinds and the workspaces made from them wrote and still keep): what
   * its quota bounds. Undefined under full qgroups or without a family.
   */
  familyBytes(workspaceId: string): Promise<number | undefined>;
  /** Finishes or undoes what a killed runner left (docs/workspaces.md#crash-safety); `minAgeMs`: only leftovers at least this old. */
  recover(minAgeMs: number): Promise<void>;
}

export interface CheckpointsOptions {
  readonly root: string;
  /** 'btrfs' or why checkpoints cannot be taken. */
  readonly btrfs: true | string;
  /** The filesystem's quota mode (btrfs-backend.ts): `simple` changes what byte retention and copies do. Default `full`. */
  readonly quotaMode?: QuotaMode;
  /** Deletes a subvolume (the backend's delete: nested subvolumes first, qgroup later). */
  readonly deleteSubvolume: (path: string) => Promise<void>;
  readonly log?: (level: 'info' | 'warn', message: string) => void;
  /**
   * Takes the snapshots and reads the checkpoints' bytes by ioctl (snapshot-helper.ts); without
   * it, each is a `btrfs` command (the benchmark's "before", and a build without the helper).
   */
  readonly snapshots?: SnapshotHelper;
}

async function btrfs(args: readonly string[], what: string, timeoutMs = 120_000): Promise<string> {
  const result = await run(['btrfs', ...args], { timeoutMs });
  if (result.code !== 0)
    throw new ConnectError(`${what}: btrfs ${args[0]} ${args[1] ?? ''} failed: ${lastLines(result.stderr, 3)}`, Code.Internal);
  return result.stdout;
}

export function openCheckpoints(options: CheckpointsOptions): Checkpoints {
  const { root } = options;
  const simple = options.quotaMode === 'simple';
  const log = options.log ?? (() => undefined);
  const base = join(root, '.checkpoints');
  const unavailable =
    options.btrfs === true
      ? undefined
      : `checkpoints need the workspace root on btrfs (copy-on-write snapshots; files are never copied): ${options.btrfs}. Put BEDROCK_WORKSPACE_ROOT on btrfs with quotas, or set BEDROCK_WORKSPACE_IMAGE to have the runner loop-mount a btrfs image there`;
  const helper = options.snapshots;
  /** A snapshot of `source` at `dest`, read-only or not, inside `qgroup` when given: one ioctl. */
  async function snapshot(source: string, dest: string, readonly: boolean, qgroup: string | undefined, what: string): Promise<void> {
    if (helper) return helper.snapshot(source, dest, { readonly, ...(qgroup ? { qgroup } : {}) });
    await btrfs(['subvolume', 'snapshot', ...(readonly ? ['-r'] : []), ...(qgroup ? ['-i', qgroup] : []), source, dest], what);
  }
  /** The limit this process last set on each family qgroup. */
  const limits = new Map<string, number>();
  /** One operation per workspace at a time on this runner. */
  const locks = new Map<string, Promise<unknown>>();
  function locked<T>(workspaceId: string, fn: () => Promise<T>): Promise<T> {
    const prior = locks.get(workspaceId) ?? Promise.resolve();
    const next = prior.catch(() => undefined).then(fn);
    locks.set(workspaceId, next);
    void next
      .catch(() => undefined)
      .finally(() => {
        if (locks.get(workspaceId) === next) locks.delete(workspaceId);
      });
    return next;
  }

  function usable(workspaceId: string): void {
    checkWorkspaceId(workspaceId);
    if (unavailable) throw new ConnectError(unavailable, Code.FailedPrecondition);
  }

  /** The workspace's subvolume; FAILED_PRECONDITION when it is a plain directory, NOT_FOUND when absent. */
  async function workspaceSubvolume(workspaceId: string): Promise<string> {
    const path = join(root, workspaceId);
    const st = await lstatOrUndefined(path);
    if (!st?.isDirectory()) throw new ConnectError(`workspace ${workspaceId} does not exist`, Code.NotFound);
    if (st.ino !== SUBVOLUME_ROOT_INO)
      throw new ConnectError(
        `workspace ${workspaceId} is a plain directory (made before quotas were on), not a subvolume: it cannot have checkpoints; copy it into a new workspace to get them`,
        Code.FailedPrecondition,
      );
    return path;
  }

  /** Holders this process made or found (removeAll forgets its own): not made again on each checkpoint. */
  const holders = new Set<string>();
  async function holder(workspaceId: string): Promise<string> {
    const dir = join(base, workspaceId);
    if (holders.has(workspaceId)) return dir;
    await mkdir(base, { recursive: true, mode: 0o700 });
    await mkdir(dir, { recursive: true, mode: 0o700 });
    holders.add(workspaceId);
    return dir;
  }
  /** The family qgroup of each workspace as this process last read or wrote it (removeAll forgets it). */
  const families = new Map<string, string>();

  /** The level-1 qgroup of the workspace and its checkpoints, made (limited to `quotaBytes`) on first use. */
  async function parentQgroup(workspaceId: string, workspace: string, quotaBytes: number): Promise<string> {
    const file = join(await holder(workspaceId), '.qgroup');
    let qgroup = families.get(workspaceId) ?? (await readFile(file, 'utf8').catch(() => '')).trim();
    if (!/^1\/\d+$/.test(qgroup)) {
      const id = Number((await btrfs(['inspect-internal', 'rootid', workspace], `reading the subvolume id of ${workspace}`)).trim());
      qgroup = `1/${id}`;
      const made = await run(['btrfs', 'qgroup', 'create', qgroup, root], { timeoutMs: 60_000 });
      if (made.code !== 0 && !/exists/i.test(made.stderr))
        throw new ConnectError(`creating the qgroup ${qgroup}: ${lastLines(made.stderr, 2)}`, Code.Internal);
      const assigned = await run(['btrfs', 'qgroup', 'assign', `0/${id}`, qgroup, root], { timeoutMs: 10 * 60_000 });
      if (assigned.code !== 0 && !/exists/i.test(assigned.stderr))
        throw new ConnectError(`putting ${workspaceId} in the qgroup ${qgroup}: ${lastLines(assigned.stderr, 2)}`, Code.Internal);
      await writeFile(`${file}.tmp`, qgroup);
      await rename(`${file}.tmp`, file);
    }
    families.set(workspaceId, qgroup);
    // Set when it changes (this process remembers what it set): one command less per checkpoint.
    if (quotaBytes > 0 && limits.get(qgroup) !== quotaBytes) {
      await btrfs(['qgroup', 'limit', String(quotaBytes), qgroup, root], `limiting ${qgroup}`);
      limits.set(qgroup, quotaBytes);
    }
    return qgroup;
  }

  async function existingIds(workspaceId: string): Promise<string[]> {
    try {
      return (await readdir(join(base, workspaceId))).filter((n) => CHECKPOINT_ID.test(n));
    } catch (err) {
      if (errno(err) === 'ENOENT') return [];
      throw err;
    }
  }

  /** The referenced bytes of a qgroup (`1/N`): one ioctl, or `btrfs qgroup show`; 0 when it does not exist. */
  async function qgroupBytes(qgroup: string): Promise<number> {
    if (helper) return (await helper.qgroup(root, qgroup)).referenced;
    const out = await btrfs(['qgroup', 'show', '--raw', root], 'reading qgroups', 60_000);
    const line = out.split('\n').find((l) => l.startsWith(`${qgroup} `));
    return line ? Number(line.trim().split(/\s+/)[1]) : 0;
  }

  /** Exclusive bytes by subvolume id (level-0 qgroups). */
  async function exclusiveBytes(): Promise<Map<number, number>> {
    const out = await btrfs(['qgroup', 'show', '--raw', root], 'reading qgroups', 60_000);
    const bytes = new Map<number, number>();
    for (const m of out.matchAll(/^0\/(\d+)\s+(\d+)\s+(\d+)/gm)) bytes.set(Number(m[1]), Number(m[3]));
    return bytes;
  }

  /** Subvolume ids of the checkpoints of a workspace, by checkpoint id (one `btrfs subvolume list`). */
  async function subvolumeIds(workspaceId: string): Promise<Map<string, number>> {
    const out = await btrfs(['subvolume', 'list', '-o', join(base, workspaceId)], 'listing checkpoints', 60_000);
    const ids = new Map<string, number>();
    for (const m of out.matchAll(/^ID (\d+) .* path (.+)$/gm)) ids.set(m[2]!.split('/').at(-1)!, Number(m[1]));
    return ids;
  }

  /**
   * The checkpoints, oldest first; with `bytes`, each one's exclusive bytes (an ioctl each, or two
   * btrfs commands), else 0. Oldest by subvolume id, which btrfs hands out in increasing order: a
   * snapshot's root directory keeps its source's birth time, so file times cannot order them.
   * With the helper each one's creation time is its subvolume's own (GET_SUBVOL_INFO); without
   * it, the directory's birth time (the source's: approximate).
   */
  async function list(workspaceId: string, bytes = true): Promise<CheckpointInfo[]> {
    const ids = await existingIds(workspaceId);
    if (ids.length === 0) return [];
    const [excl, subs] = helper
      ? [new Map<number, number>(), new Map<string, number>()]
      : [bytes ? await exclusiveBytes() : new Map<number, number>(), await subvolumeIds(workspaceId)];
    // All at once: one wait for the lot rather than one per checkpoint.
    const found = await Promise.all(
      ids.map(async (id): Promise<(CheckpointInfo & { subvolume: number }) | undefined> => {
        const path = join(base, workspaceId, id);
        if (helper) {
          const info = await helper.info(path).catch((err: unknown) => {
            if (/ENOENT/.test(String((err as Error).message))) return undefined;
            throw err;
          });
          if (!info) return undefined;
          const exclusiveBytes = bytes ? (await helper.exclusive(path)).bytes : 0;
          return { id, createdMs: info.createdMs, exclusiveBytes, subvolume: info.subvolume };
        }
        const st = await lstatOrUndefined(path);
        const sub = subs.get(id);
        if (!st || sub === undefined) return undefined;
        return { id, createdMs: st.birthtimeMs || st.ctimeMs, exclusiveBytes: excl.get(sub) ?? 0, subvolume: sub };
      }),
    );
    return found
      .filter((c) => c !== undefined)
      .sort((a, b) => a.subvolume - b.subvolume)
      .map(({ subvolume: _subvolume, ...info }) => info);
  }

  async function removeOne(workspaceId: string, id: string): Promise<boolean> {
    const path = join(base, workspaceId, id);
    if (!(await lstatOrUndefined(path))) return false;
    await options.deleteSubvolume(path);
    return true;
  }

  /**
   * Retention's removals. With the snapshot helper: one delete ioctl (a checkpoint holds no
   * nested subvolume; the kernel frees the blocks in the background, and the level-0 qgroup
   * goes with the subvolume on current kernels, else by `btrfs qgroup clear-stale` at start).
   * Without it: renamed `.gone-…` (gone from every listing at once), then deleted one after
   * another in the background, so that a checkpoint never waits for the `btrfs` commands (and
   * the transaction commit) of the one it replaces. Leftovers of a killed runner are deleted by
   * `recover`.
   */
  let deleting: Promise<void> = Promise.resolve();
  async function retire(workspaceId: string, id: string): Promise<boolean> {
    const path = join(base, workspaceId, id);
    if (helper)
      return helper.destroy(path).then(
        () => true,
        (err: unknown) => {
          if (/ENOENT/.test(String((err as Error).message))) return false;
          throw err;
        },
      );
    if (!(await lstatOrUndefined(path))) return false;
    const gone = join(base, workspaceId, `.gone-${stamp()}`);
    await rename(path, gone);
    deleting = deleting
      .then(() => options.deleteSubvolume(gone))
      .catch((err: unknown) => log('warn', `checkpoints: could not delete ${gone} (deleted at the next start): ${(err as Error).message}`));
    return true;
  }

  const stamp = (): string => `${Date.now().toString(36)}-${randomBytes(4).toString('hex')}`;
  const leftovers = { root, deleteSubvolume: options.deleteSubvolume, log };

  async function snapshotLiveTemporarily<T>(workspaceId: string, fn: (path: string) => Promise<T>): Promise<T> {
    const workspace = await workspaceSubvolume(workspaceId);
    const tmp = join(await holder(workspaceId), `.tmp-${stamp()}`);
    // Inside the family qgroup when there is one (outside it, btrfs's accounting would turn inconsistent).
    const family = (await readFile(join(base, workspaceId, '.qgroup'), 'utf8').catch(() => '')).trim();
    await snapshot(workspace, tmp, true, /^1\/\d+$/.test(family) ? family : undefined, `snapshotting ${workspaceId}`);
    try {
      return await fn(tmp);
    } finally {
      await options
        .deleteSubvolume(tmp)
        .catch((err: unknown) => log('warn', `checkpoints: could not delete ${tmp}: ${(err as Error).message}`));
    }
  }

  async function checkpointPath(workspaceId: string, id: string): Promise<string> {
    checkCheckpointId(id);
    const path = join(base, workspaceId, id);
    if (!(await lstatOrUndefined(path)))
      throw new ConnectError(`workspace ${workspaceId} has no checkpoint ${id} (never taken, or removed by retention)`, Code.NotFound);
    return path;
  }

  return {
    unavailable,

    async create(workspaceId, id, quotaBytes, retention) {
      usable(workspaceId);
      checkCheckpointId(id);
      return locked(workspaceId, async () => {
        await recoverRewinds(leftovers, workspaceId, await readdir(root), 0);
        const workspace = await workspaceSubvolume(workspaceId);
        const path = join(await holder(workspaceId), id);
        let created = false;
        if (helper) {
          // One ioctl: the checkpoint exists whole or not at all; one that exists already is this id's (idempotent).
          const qgroup = await parentQgroup(workspaceId, workspace, quotaBytes);
          created = await snapshot(workspace, path, true, qgroup, `checkpointing ${workspaceId}`).then(
            () => true,
            (err: unknown) => {
              if (ConnectError.from(err).code === Code.AlreadyExists) return false;
              throw err;
            },
          );
        } else if (!(await lstatOrUndefined(path))) {
          const qgroup = await parentQgroup(workspaceId, workspace, quotaBytes);
          await snapshot(workspace, path, true, qgroup, `checkpointing ${workspaceId}`);
          created = true;
        }
        const removed: string[] = [];
        const count = retention.maxCount > 0 ? (await existingIds(workspaceId)).length : 0;
        // The bytes all checkpoints hold alone are at most what the family (the workspace and its
        // checkpoints) references: under the limit, no checkpoint's own bytes need reading. Under
        // simple quotas the family's bytes are all there is to read.
        const family = async () => families.get(workspaceId) ?? (await parentQgroup(workspaceId, workspace, quotaBytes));
        const bytesOver =
          retention.maxBytes > 0 &&
          (simple
            ? (await qgroupBytes(await family())) > simpleRetentionThreshold(quotaBytes, retention.maxBytes)
            : helper
              ? (await qgroupBytes(await family())) > retention.maxBytes
              : true);
        if (count > retention.maxCount || bytesOver) {
          const all = await list(workspaceId, bytesOver && !simple);
          let total = all.reduce((s, c) => s + c.exclusiveBytes, 0);
          let retired = false;
          for (const [i, c] of all.entries()) {
            const left = all.length - i;
            if (c.id === id || left <= 1) break;
            const overCount = retention.maxCount > 0 && left > retention.maxCount;
            // Simple quotas: one (the oldest) per checkpoint; the kernel frees its blocks in the background.
            const overBytes = bytesOver && (simple ? !retired : total > retention.maxBytes);
            if (!overCount && !overBytes) break;
            if (await retire(workspaceId, c.id)) removed.push(c.id);
            retired = true;
            total -= c.exclusiveBytes;
          }
        }
        return { created, removed };
      });
    },

    async list(workspaceId) {
      usable(workspaceId);
      return list(workspaceId);
    },

    async restore(workspaceId, id, quotaBytes) {
      usable(workspaceId);
      return locked(workspaceId, async () => {
        await recoverRewinds(leftovers, workspaceId, await readdir(root), 0);
        const checkpoint = await checkpointPath(workspaceId, id);
        const workspace = await workspaceSubvolume(workspaceId);
        const st = await lstat(workspace);
        const qgroup = await parentQgroup(workspaceId, workspace, quotaBytes);
        const { building, ready, old } = rewindPaths(root, workspaceId, stamp());
        await snapshot(checkpoint, building, false, qgroup, `rewinding ${workspaceId}`);
        // Both through the root, never charged to the new subvolume: a workspace whose quota is
        // full (its family at the limit) can still be rewound, which is what frees room.
        if (quotaBytes > 0) {
          if (helper) await helper.limit(building, quotaBytes);
          else {
            const sub = (await btrfs(['inspect-internal', 'rootid', building], `reading the subvolume id of ${building}`)).trim();
            await btrfs(['qgroup', 'limit', String(quotaBytes), `0/${sub}`, root], `setting the quota of ${building}`);
          }
        }
        // The snapshot's top keeps the checkpoint's owner and mode; the workspace's mode is kept.
        // A chmod is a write inside the new subvolume (EDQUOT with a full quota): only when it differs.
        const mode = st.mode & 0o7777;
        if (((await lstat(building)).mode & 0o7777) !== mode)
          await chmod(building, mode).catch((err: unknown) => {
            if (errno(err) !== 'EDQUOT') throw err;
            log('warn', `checkpoints: the quota of ${workspaceId} is full: the rewound workspace keeps the checkpoint's mode`);
          });
        await rename(building, ready); // complete from here on
        await rename(workspace, old);
        await rename(ready, workspace);
        // One ioctl with the helper; the backend's delete when it fails (a tool made subvolumes inside).
        await (helper ? helper.destroy(old).catch(() => options.deleteSubvolume(old)) : options.deleteSubvolume(old)).catch(
          (err: unknown) => log('warn', `checkpoints: could not delete ${old} (dropped at the next start): ${(err as Error).message}`),
        );
      });
    },

    async remove(workspaceId, ids, prefix) {
      checkWorkspaceId(workspaceId);
      for (const id of ids) checkCheckpointId(id, 'checkpoint_ids[]');
      if (unavailable) return [];
      return locked(workspaceId, async () => {
        const names = prefix !== undefined ? (await existingIds(workspaceId)).filter((n) => n.startsWith(prefix)) : ids;
        const removed: string[] = [];
        for (const id of names) if (await removeOne(workspaceId, id)) removed.push(id);
        return removed;
      });
    },

    async removeAll(workspaceId) {
      checkWorkspaceId(workspaceId);
      if (unavailable) return;
      await locked(workspaceId, async () => {
        await deleting;
        holders.delete(workspaceId);
        families.delete(workspaceId);
        const dir = join(base, workspaceId);
        for (const id of await existingIds(workspaceId)) await removeOne(workspaceId, id);
        for (const name of await readdir(dir).catch(() => [] as string[]))
          if (name.startsWith('.tmp-') || name.startsWith('.gone-')) await options.deleteSubvolume(join(dir, name));
        const qgroup = (await readFile(join(dir, '.qgroup'), 'utf8').catch(() => '')).trim();
        if (/^1\/\d+$/.test(qgroup)) await run(['btrfs', 'qgroup', 'destroy', qgroup, root], { timeoutMs: 60_000 });
        await run(['rm', '-rf', '--one-file-system', '--', dir], { timeoutMs: 60_000 });
      });
    },

    async diff(workspaceId, from, to) {
      usable(workspaceId);
      if (from !== '') checkCheckpointId(from, 'from');
      if (to !== '') checkCheckpointId(to, 'to');
      return locked(workspaceId, async () => {
        const side = async <T>(id: string, fn: (path: string) => Promise<T>): Promise<T> =>
          id === '' ? snapshotLiveTemporarily(workspaceId, fn) : fn(await checkpointPath(workspaceId, id));
        return side(from, (a) => side(to, (b) => diffTrees(a, b)));
      });
    },

    async snapshotIntoFamily(workspaceId, source, dest, destWorkspaceId) {
      if (unavailable) return false;
      checkWorkspaceId(workspaceId);
      checkWorkspaceId(destWorkspaceId);
      let family = (await readFile(join(base, workspaceId, '.qgroup'), 'utf8').catch(() => '')).trim();
      if (!/^1\/\d+$/.test(family) && simple) {
        const workspace = join(root, workspaceId);
        // A plain directory (made before quotas were on) is copied, not snapshotted.
        if ((await lstatOrUndefined(workspace))?.ino !== SUBVOLUME_ROOT_INO) return false;
        // Limited as the source is: the family is its quota, which the copy now shares.
        const shown = await btrfs(['qgroup', 'show', '--raw', '-r', '-f', workspace], `reading the quota of ${workspaceId}`, 60_000);
        const limit = Number(/^0\/\d+\s+\d+\s+\d+\s+(\d+)/m.exec(shown)?.[1] ?? 0);
        family = await locked(workspaceId, () => parentQgroup(workspaceId, workspace, limit));
      }
      if (!/^1\/\d+$/.test(family)) return false;
      await snapshot(source, dest, false, family, `snapshotting ${source}`);
      const file = join(await holder(destWorkspaceId), '.qgroup');
      await writeFile(`${file}.tmp`, family);
      await rename(`${file}.tmp`, file);
      return true;
    },

    async familyBytes(workspaceId) {
      if (!simple || unavailable) return undefined;
      checkWorkspaceId(workspaceId);
      const family = (await readFile(join(base, workspaceId, '.qgroup'), 'utf8').catch(() => '')).trim();
      return /^1\/\d+$/.test(family) ? qgroupBytes(family) : undefined;
    },

    async path(workspaceId, id) {
      usable(workspaceId);
      return checkpointPath(workspaceId, id);
    },

    async recover(minAgeMs) {
      if (unavailable) return;
      const names = await readdir(root).catch(() => [] as string[]);
      for (const workspaceId of leftoverWorkspaceIds(names))
        await locked(workspaceId, () => recoverRewinds(leftovers, workspaceId, names, minAgeMs));
      // Accounting left inconsistent (by hand, or an older runner): recount in the background.
      const show = simple ? undefined : await run(['btrfs', 'qgroup', 'show', '--raw', root], { timeoutMs: 60_000 });
      if (show && /inconsistent/i.test(show.stderr + show.stdout)) {
        log('warn', `checkpoints: btrfs quota accounting on ${root} is inconsistent: rescanning (quotas are approximate until it ends)`);
        await run(['btrfs', 'quota', 'rescan', root], { timeoutMs: 60_000 });
      }
      for (const workspaceId of await readdir(base).catch(() => [] as string[])) {
        for (const name of await readdir(join(base, workspaceId)).catch(() => [] as string[]))
          // A diff's transient snapshot: old enough not to be another runner's diff in progress.
          if (
            (name.startsWith('.tmp-') || name.startsWith('.gone-')) &&
            parseInt(name.slice(name.indexOf('-') + 1).split('-')[0]!, 36) <= Date.now() - minAgeMs
          )
            await options.deleteSubvolume(join(base, workspaceId, name)).catch(() => undefined);
      }
    },
  };
}
