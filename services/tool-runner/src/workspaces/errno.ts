/** File-system errors as the storage meets them: an error's errno code, and an lstat that answers undefined for a missing path. */
import { lstat } from 'node:fs/promises';
import type { Stats } from 'node:fs';

export function errno(err: unknown): string | undefined {
  return (err as NodeJS.ErrnoException | undefined)?.code;
}

export async function lstatOrUndefined(path: string): Promise<Stats | undefined> {
  try {
    return await lstat(path, { bigint: false });
  } catch (err) {
    if (errno(err) === 'ENOENT') return undefined;
    throw err;
  }
}
