/**
 * A checkpoint diff: every entry of two immutable trees (read-only snapshots) compared by type,
 * mode, symlink target and content, never following a symlink; text files get a unified diff.
 */
import { lstat, open, readdir, readlink } from 'node:fs/promises';
import { constants } from 'node:fs';
import { join } from 'node:path';
import { createTwoFilesPatch } from 'diff';

/** Text diffs only for files up to this size (each side); larger ones are reported without one. */
export const DIFF_MAX_TEXT_BYTES = 1024 * 1024;
/** At most this many changed entries per diff (the answer says when it stopped). */
export const DIFF_MAX_ENTRIES = 10_000;

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

/** The changes from the tree `from` to the tree `to`, by path; at most DIFF_MAX_ENTRIES. */
export async function diffTrees(from: string, to: string): Promise<DiffResult> {
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
