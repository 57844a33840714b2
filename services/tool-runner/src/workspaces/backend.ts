/**
 * The storage mechanisms behind workspaces, one interface: `btrfs` (a subvolume per workspace,
 * with a qgroup byte limit, snapshots for copies) and `none` (plain directories, no quota).
 */
import { mkdir, rmdir } from 'node:fs/promises';
import { basename, dirname } from 'node:path';
import { Code, ConnectError } from '@connectrpc/connect';
import { lastLines, run } from './run.ts';

export interface Owner {
  readonly uid: number;
  readonly gid: number;
}

export interface StorageBackend {
  readonly mechanism: 'btrfs' | 'none';
  /** One line for people: what is enforced, or why nothing is. */
  readonly description: string;
  /** Makes `path` a new empty directory (a subvolume on btrfs), owned by root, 0700. */
  createEmpty(path: string): Promise<void>;
  /** Makes `path` an O(1) copy of `source` (a snapshot) and answers true, or answers false when it cannot (the caller copies). */
  snapshot(source: string, path: string): Promise<boolean>;
  /** Limits the bytes the workspace at `path` may take (metadata included). */
  setQuota(path: string, bytes: number): Promise<void>;
  /** Removes the workspace at `path`, owned by `owner`. */
  remove(path: string, owner: Owner): Promise<void>;
  /** Bytes the workspace takes, or undefined when the caller must count them file by file. */
  usedBytes(path: string): Promise<number | undefined>;
  /** Stops background work (qgroup clean-up). */
  close(): void;
}

/**
 * Removes a plain directory tree without ever walking it as root: its owner empties it (so a
 * symlink swapped in by a tool still running there can only lead to what that user may delete
 * anyway), making its own read-only directories writable first, then root removes the emptied
 * directory itself (its parent, the root, is not writable by the owner).
 *
 * The owner's commands start in the root (entered as root: the working directory is set before
 * the user switch) and name the directory relative to it, so the owner needs no search
 * permission on the directories above the root: the embedded product's data directory, which
 * holds the root, is 0700.
 */
export async function removeTree(path: string, owner: Owner): Promise<void> {
  const asOwner = { uid: owner.uid, gid: owner.gid, timeoutMs: 10 * 60_000, cwd: dirname(path) };
  const name = basename(path);
  // --one-file-system: nothing mounted below is touched; chmod -R never follows symlinks.
  await run(['chmod', '-R', 'u+rwX', '--', name], asOwner);
  const rm = await run(['rm', '-rf', '--one-file-system', '--', name], asOwner);
  try {
    await rmdir(path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return;
    throw new ConnectError(
      `cannot remove ${path}: ${(err as Error).message}${rm.code !== 0 ? `; as its owner: ${lastLines(rm.stderr, 3)}` : ''}`,
      Code.FailedPrecondition,
    );
  }
}

/** Plain directories: nothing is limited. */
export function plainBackend(description: string): StorageBackend {
  return {
    mechanism: 'none',
    description,
    async createEmpty(path) {
      await mkdir(path, { mode: 0o700 });
    },
    snapshot: () => Promise.resolve(false),
    setQuota: () => Promise.resolve(),
    remove: removeTree,
    usedBytes: () => Promise.resolve(undefined),
    close() {},
  };
}
