/**
 * Counts what a workspace holds by walking it: entries (inodes: files, directories, symlinks,
 * everything), and, when asked, the bytes they take on disk (st_blocks, each hard-linked inode
 * once). Never follows a symlink. Bounded: it stops after `maxEntries` entries or at
 * `deadline`, and then says the figures are lower bounds (`complete: false`).
 */
import { lstat, opendir } from 'node:fs/promises';
import { join } from 'node:path';

export interface WalkResult {
  /** Entries below the top (the top directory itself included). */
  readonly entries: number;
  /** Bytes allocated (st_blocks × 512), when counted. */
  readonly bytes: number;
  /** False when the walk stopped at its bound (or lost a race with a deletion). */
  readonly complete: boolean;
}

export interface WalkOptions {
  readonly bytes: boolean;
  readonly maxEntries: number;
  /** Date.now() value to stop at. */
  readonly deadline: number;
}

export async function walk(top: string, options: WalkOptions): Promise<WalkResult> {
  let entries = 1;
  let bytes = 0;
  const seen = new Set<bigint>();
  const count = async (path: string): Promise<void> => {
    if (!options.bytes) return;
    const st = await lstat(path, { bigint: true }).catch(() => undefined);
    if (!st) return;
    if (st.nlink > 1n && !st.isDirectory()) {
      if (seen.has(st.ino)) return;
      seen.add(st.ino);
    }
    bytes += Number(st.blocks) * 512;
  };
  await count(top);
  const stack = [top];
  while (stack.length > 0) {
    const dir = stack.pop()!;
    let handle;
    try {
      handle = await opendir(dir);
    } catch {
      continue; // removed meanwhile
    }
    try {
      for await (const entry of handle) {
        entries++;
        const path = join(dir, entry.name);
        await count(path);
        if (entry.isDirectory()) stack.push(path); // d_type: a symlink to a directory is not one
        if (entries >= options.maxEntries || (entries % 1024 === 0 && Date.now() > options.deadline)) {
          return { entries, bytes, complete: false };
        }
      }
    } catch {
      // a directory removed while read: count what was seen
    }
  }
  return { entries, bytes, complete: true };
}
