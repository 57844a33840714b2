/**
 * Checkpoints of workspaces (docs/workspaces.md#checkpoints): read-only btrfs snapshots of a
 * workspace's subvolume, taken by the filesystem copy-on-write (O(1) in the size of the tree,
 * never a copy of files, never through the user's .git), restored by snapshotting one back and
 * swapping it into place, and compared file by file.
 *
 * Layout, all root's and 0700 so that no tool reaches them:
 *
 *   ROOT/.checkpoints/<workspace id>/<checkpoint id>   a read-only snapshot
 *   ROOT/.checkpoints/<workspace id>/.qgroup           the level-1 qgroup holding the workspace and its checkpoints
 *   ROOT/.checkpoints/<workspace id>/.tmp-<…>          a transient read-only snapshot of the live workspace (a diff)
 *   ROOT/.checkpoints/<workspace id>/.gone-<…>         a checkpoint retention removed, being deleted in the background
 *   ROOT/.rew-<workspace id>-<time>-<random>           a rewind being built (a writable snapshot of a checkpoint)
 *   ROOT/.rdy-<workspace id>-<time>-<random>           a rewind built, about to be swapped in
 *   ROOT/.old-<workspace id>-<time>-<random>           the workspace a rewind replaced, being deleted
 *
 * Crash safety. A snapshot is one ioctl: a checkpoint exists whole or not at all. A rewind is
 * (1) snapshot the checkpoint to .rew-, set its quota, rename it .rdy- (atomic: from now it is
 * complete), (2) rename the workspace to .old-, (3) rename .rdy- to the workspace, (4) delete
 * .old-. `recover` finishes or undoes a rewind a killed runner left: a .rew- is dropped (before);
 * a .rdy- with the workspace in place is dropped (before), without it is renamed into place
 * (after); an .old- with the workspace in place is deleted (after), without it (and no .rdy-)
 * is renamed back (before). So after recovery the workspace is exactly as before or as after.
 *
 * Quota: on the first checkpoint the workspace's subvolume is put in a level-1 qgroup (1/<its
 * subvolume id>) limited to the workspace's quota; each checkpoint and each rewound workspace is
 * created inside it (`snapshot -i`), so what checkpoints hold counts toward the workspace's
 * bytes: a workspace whose checkpoints keep deleted files alive has that much less room.
 */
import { randomBytes } from 'node:crypto';
import { chmod, lstat, mkdir, open, readdir, readFile, readlink, rename, writeFile } from 'node:fs/promises';
import { constants } from 'node:fs';
import type { Stats } from 'node:fs';
import { join } from 'node:path';
import { Code, ConnectError } from '@connectrpc/connect';
import { createTwoFilesPatch } from 'diff';
import { lastLines, run } from './run.ts';
import type { SnapshotHelper } from './snapshot-helper.ts';
import { checkWorkspaceId } from './validate.ts';

/** Every subvolume's root directory has this inode number. */
const SUBVOLUME_ROOT_INO = 256;
/** Checkpoint ids: 1 to 64 of [0-9a-z_-], starting with a letter or digit (never `.`-anything). */
export const CHECKPOINT_ID = /^[0-9a-z][0-9a-z_-]{0,63}$/;
const LEFTOVER = /^\.(rew|rdy|old)-(ws-[0-9a-z]{26})-([0-9a-z]+)-[0-9a-f]+$/;
/** Text diffs only for files up to this size (each side); larger ones are reported without one. */
export const DIFF_MAX_TEXT_BYTES = 1024 * 1024;
/** At most this many changed entries per diff (the answer says when it stopped). */
export const DIFF_MAX_ENTRIES = 10_000;

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
  /** Bytes only this checkpoint holds (its qgroup's exclusive bytes; lags up to a transaction commit). */
  readonly exclusiveBytes: number;
}

export type ChangeKind = 'added' | 'modified' | 'deleted' | 'mode' | 'symlink';

export interface Change {
  readonly path: string;
  readonly kind: ChangeKind;
  /** What the entry is on the side that has it (the new side when both). */
  readonly type: 'file' | 'directory' | 'symlink' | 'other';
  readonly oldMode: number;
  readonly newMode: number;
  /** A unified diff for text files; empty otherwise. */
  readonly unifiedDiff: string;
  /** Either side is binary (a NUL byte) or larger than DIFF_MAX_TEXT_BYTES. */
  readonly binary: boolean;
}

export interface DiffResult {
  readonly changes: Change[];
  /** False when it stopped at DIFF_MAX_ENTRIES. */
  readonly complete: boolean;
}

export interface Retention {
  /** Keep at most this many checkpoints per workspace (0: no limit). */
  readonly maxCount: number;
  /** Keep the checkpoints' exclusive bytes under this (0: no limit); the newest is always kept. */
  readonly maxBytes: number;
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
   */
  snapshotIntoFamily(workspaceId: string, source: string, dest: string, destWorkspaceId: string): Promise<boolean>;
  /** Finishes or undoes what a killed runner left (see the header); `minAgeMs`: only leftovers at least this old. */
  recover(minAgeMs: number): Promise<void>;
}

export interface CheckpointsOptions {
  readonly root: string;
  /** 'btrfs' or why checkpoints cannot be taken. */
  readonly btrfs: true | string;
  /** Deletes a subvolume (the backend's delete: nested subvolumes first, qgroup later). */
  readonly deleteSubvolume: (path: string) => Promise<void>;
  readonly log?: (level: 'info' | 'warn', message: string) => void;
  /**
   * Takes the snapshots and reads the checkpoints' bytes by ioctl (snapshot-helper.ts); without
   * it, each is a `btrfs` command (the benchmark's "before", and a build without the helper).
   */
  readonly snapshots?: SnapshotHelper;
}

function errno(err: unknown): string | undefined {
  return (err as NodeJS.ErrnoException | undefined)?.code;
}

async function btrfs(args: readonly string[], what: string, timeoutMs = 120_000): Promise<string> {
  const result = await run(['btrfs', ...args], { timeoutMs });
  if (result.code !== 0)
    throw new ConnectError(`${what}: btrfs ${args[0]} ${args[1] ?? ''} failed: ${lastLines(result.stderr, 3)}`, Code.Internal);
  return result.stdout;
}

async function lstatOrUndefined(path: string): Promise<Stats | undefined> {
  try {
    return await lstat(path, { bigint: false });
  } catch (err) {
    if (errno(err) === 'ENOENT') return undefined;
    throw err;
  }
}

interface Entry {
  readonly type: Change['type'];
  readonly mode: number;
  readonly size: number;
  readonly ino: bigint;
  readonly ctimeNs: bigint;
  readonly mtimeNs: bigint;
}

function typeOf(st: { isFile(): boolean; isDirectory(): boolean; isSymbolicLink(): boolean }): Entry['type'] {
  if (st.isFile()) return 'file';
  if (st.isDirectory()) return 'directory';
  if (st.isSymbolicLink()) return 'symlink';
  return 'other';
}

/** Every entry below `top` (an immutable read-only snapshot), by relative path; never follows a symlink. */
async function listTree(top: string): Promise<Map<string, Entry>> {
  const entries = new Map<string, Entry>();
  const visit = async (rel: string): Promise<void> => {
    const names = await readdir(rel ? join(top, rel) : top);
    for (const name of names) {
      const path = rel ? `${rel}/${name}` : name;
      const st = await lstat(join(top, path), { bigint: true });
      const type = typeOf(st);
      entries.set(path, {
        type,
        mode: Number(st.mode & 0o7777n),
        size: Number(st.size),
        ino: st.ino,
        ctimeNs: st.ctimeNs,
        mtimeNs: st.mtimeNs,
      });
      // A nested subvolume appears in a snapshot as an empty directory; nothing below is followed.
      if (type === 'directory') await visit(path);
    }
  };
  await visit('');
  return entries;
}

/** Reads a regular file without following a symlink (the snapshot is immutable; O_NOFOLLOW is belt and braces). */
async function readNoFollow(path: string): Promise<Buffer> {
  const handle = await open(path, constants.O_RDONLY | constants.O_NOFOLLOW);
  try {
    return await handle.readFile();
  } finally {
    await handle.close();
  }
}

async function sameBytes(a: string, b: string, size: number): Promise<boolean> {
  if (size <= 16 * 1024 * 1024) return (await readNoFollow(a)).equals(await readNoFollow(b));
  const [ha, hb] = [await open(a, constants.O_RDONLY | constants.O_NOFOLLOW), await open(b, constants.O_RDONLY | constants.O_NOFOLLOW)];
  try {
    const [ba, bb] = [Buffer.alloc(1024 * 1024), Buffer.alloc(1024 * 1024)];
    for (let pos = 0; pos < size;) {
      const [ra, rb] = [await ha.read(ba, 0, ba.length, pos), await hb.read(bb, 0, bb.length, pos)];
      if (ra.bytesRead !== rb.bytesRead || !ba.subarray(0, ra.bytesRead).equals(bb.subarray(0, rb.bytesRead))) return false;
      if (ra.bytesRead === 0) break;
      pos += ra.bytesRead;
    }
    return true;
  } finally {
    await ha.close();
    await hb.close();
  }
}

const isBinary = (b: Buffer): boolean => b.length > DIFF_MAX_TEXT_BYTES || b.subarray(0, 8192).includes(0);

export function openCheckpoints(options: CheckpointsOptions): Checkpoints {
  const { root } = options;
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

  /** The checkpoints, oldest first; with `bytes`, each one's exclusive bytes (an ioctl each, or two btrfs commands), else 0. */
  async function list(workspaceId: string, bytes = true): Promise<CheckpointInfo[]> {
    const ids = await existingIds(workspaceId);
    if (ids.length === 0) return [];
    const [excl, subs] =
      bytes && !helper ? [await exclusiveBytes(), await subvolumeIds(workspaceId)] : [new Map<number, number>(), new Map<string, number>()];
    // All at once: one wait for the lot rather than one per checkpoint.
    const found = await Promise.all(
      ids.map(async (id): Promise<CheckpointInfo | undefined> => {
        const st = await lstatOrUndefined(join(base, workspaceId, id));
        if (!st) return undefined;
        const sub = subs.get(id);
        const exclusiveBytes =
          bytes && helper ? (await helper.exclusive(join(base, workspaceId, id))).bytes : sub === undefined ? 0 : (excl.get(sub) ?? 0);
        return { id, createdMs: st.birthtimeMs || st.ctimeMs, exclusiveBytes };
      }),
    );
    const infos = found.filter((c): c is CheckpointInfo => c !== undefined);
    return infos.sort((a, b) => a.createdMs - b.createdMs || (a.id < b.id ? -1 : 1));
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

  async function recoverWorkspace(workspaceId: string, names: readonly string[], minAgeMs: number): Promise<void> {
    const cutoff = Date.now() - minAgeMs;
    const mine = names
      .map((name) => ({ name, m: LEFTOVER.exec(name) }))
      .filter((x) => x.m && x.m[2] === workspaceId && parseInt(x.m[3]!, 36) <= cutoff);
    if (mine.length === 0) return;
    const live = join(root, workspaceId);
    const drop = async (name: string, why: string): Promise<void> => {
      log('warn', `checkpoints: ${name} left by a killed rewind: ${why}`);
      await options.deleteSubvolume(join(root, name));
    };
    for (const { name } of mine.filter((x) => x.m![1] === 'rew')) await drop(name, 'never completed, dropped (the workspace is as before)');
    for (const { name } of mine.filter((x) => x.m![1] === 'rdy')) {
      if (await lstatOrUndefined(live)) await drop(name, 'the swap had not started, dropped (the workspace is as before)');
      else {
        await rename(join(root, name), live);
        log('warn', `checkpoints: ${name} left by a killed rewind: swapped into place (the workspace is as after)`);
      }
    }
    for (const { name } of mine.filter((x) => x.m![1] === 'old')) {
      if (await lstatOrUndefined(live)) await drop(name, 'the replaced workspace, deleted (the workspace is as after)');
      else {
        await rename(join(root, name), live);
        log('warn', `checkpoints: ${name} left by a killed rewind: renamed back (the workspace is as before)`);
      }
    }
  }

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

  async function diffTrees(from: string, to: string): Promise<DiffResult> {
    const [a, b] = [await listTree(from), await listTree(to)];
    const changes: Change[] = [];
    const paths = [...new Set([...a.keys(), ...b.keys()])].sort();
    for (const path of paths) {
      if (changes.length >= DIFF_MAX_ENTRIES) return { changes, complete: false };
      const [x, y] = [a.get(path), b.get(path)];
      const change = (kind: ChangeKind, type: Change['type'], text = '', binary = false): Change => ({
        path,
        kind,
        type,
        oldMode: x?.mode ?? 0,
        newMode: y?.mode ?? 0,
        unifiedDiff: text,
        binary,
      });
      const content = async (which: 'a' | 'b', e: Entry): Promise<Buffer | null> =>
        e.type === 'file' ? readNoFollow(join(which === 'a' ? from : to, path)) : null;
      const textDiff = async (): Promise<{ text: string; binary: boolean }> => {
        const [ca, cb] = [x ? await content('a', x) : Buffer.alloc(0), y ? await content('b', y) : Buffer.alloc(0)];
        if (!ca || !cb) return { text: '', binary: false };
        if (isBinary(ca) || isBinary(cb)) return { text: '', binary: true };
        return {
          text: createTwoFilesPatch(
            x ? `a/${path}` : '/dev/null',
            y ? `b/${path}` : '/dev/null',
            ca.toString('utf8'),
            cb.toString('utf8'),
            '',
            '',
            {
              context: 3,
            },
          ),
          binary: false,
        };
      };
      if (!x || !y) {
        const e = (x ?? y)!;
        const t = e.type === 'file' && e.size <= DIFF_MAX_TEXT_BYTES ? await textDiff() : { text: '', binary: e.type === 'file' };
        changes.push(change(x ? 'deleted' : 'added', e.type, t.text, t.binary));
        continue;
      }
      if (x.type !== y.type) {
        changes.push(change('modified', y.type));
        continue;
      }
      if (y.type === 'symlink') {
        if ((await readlink(join(from, path))) !== (await readlink(join(to, path)))) changes.push(change('symlink', 'symlink'));
        continue;
      }
      let contentChanged = false;
      if (y.type === 'file') {
        // A snapshot keeps inode numbers and ctimes; an untouched file has both (ctime moves on every change).
        const untouched = x.ino === y.ino && x.ctimeNs === y.ctimeNs && x.mtimeNs === y.mtimeNs && x.size === y.size;
        contentChanged = !untouched && (x.size !== y.size || !(await sameBytes(join(from, path), join(to, path), x.size)));
      }
      if (contentChanged) {
        const t = x.size <= DIFF_MAX_TEXT_BYTES && y.size <= DIFF_MAX_TEXT_BYTES ? await textDiff() : { text: '', binary: true };
        changes.push(change('modified', y.type, t.text, t.binary));
      } else if (x.mode !== y.mode) changes.push(change('mode', y.type));
    }
    return { changes, complete: true };
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
        await recoverWorkspace(workspaceId, await readdir(root), 0);
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
        // checkpoints) references: under the limit, no checkpoint's own bytes need reading.
        const bytesOver =
          retention.maxBytes > 0 &&
          (!helper ||
            (await helper.qgroup(root, families.get(workspaceId) ?? (await parentQgroup(workspaceId, workspace, quotaBytes)))).referenced >
              retention.maxBytes);
        if (count > retention.maxCount || bytesOver) {
          const all = await list(workspaceId, bytesOver);
          let total = all.reduce((s, c) => s + c.exclusiveBytes, 0);
          for (const [i, c] of all.entries()) {
            const left = all.length - i;
            if (c.id === id || left <= 1) break;
            const overCount = retention.maxCount > 0 && left > retention.maxCount;
            const overBytes = bytesOver && total > retention.maxBytes;
            if (!overCount && !overBytes) break;
            if (await retire(workspaceId, c.id)) removed.push(c.id);
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
        await recoverWorkspace(workspaceId, await readdir(root), 0);
        const checkpoint = await checkpointPath(workspaceId, id);
        const workspace = await workspaceSubvolume(workspaceId);
        const st = await lstat(workspace);
        const qgroup = await parentQgroup(workspaceId, workspace, quotaBytes);
        const tag = `${workspaceId}-${stamp()}`;
        const building = join(root, `.rew-${tag}`);
        const ready = join(root, `.rdy-${tag}`);
        const old = join(root, `.old-${tag}`);
        await snapshot(checkpoint, building, false, qgroup, `rewinding ${workspaceId}`);
        // The snapshot's top keeps the checkpoint's owner and mode; the workspace's are kept.
        if (quotaBytes > 0) {
          if (helper) await helper.limit(building, quotaBytes);
          else await btrfs(['qgroup', 'limit', String(quotaBytes), building], `setting the quota of ${building}`);
        }
        await chmod(building, st.mode & 0o7777);
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
      const family = (await readFile(join(base, workspaceId, '.qgroup'), 'utf8').catch(() => '')).trim();
      if (!/^1\/\d+$/.test(family)) return false;
      await snapshot(source, dest, false, family, `snapshotting ${source}`);
      const file = join(await holder(destWorkspaceId), '.qgroup');
      await writeFile(`${file}.tmp`, family);
      await rename(`${file}.tmp`, file);
      return true;
    },

    async path(workspaceId, id) {
      usable(workspaceId);
      return checkpointPath(workspaceId, id);
    },

    async recover(minAgeMs) {
      if (unavailable) return;
      const names = await readdir(root).catch(() => [] as string[]);
      const ids = new Set(names.map((n) => LEFTOVER.exec(n)?.[2]).filter((x): x is string => x !== undefined));
      for (const workspaceId of ids) await locked(workspaceId, () => recoverWorkspace(workspaceId, names, minAgeMs));
      // Accounting left inconsistent (by hand, or an older runner): recount in the background.
      const show = await run(['btrfs', 'qgroup', 'show', '--raw', root], { timeoutMs: 60_000 });
      if (/inconsistent/i.test(show.stderr + show.stdout)) {
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
