/**
 * One embedded Bedrock per data directory: PGlite's files are one process's, and a second process
 * opening them (a second `npm start`, even on other ports) would corrupt the database. The lock is
 * proper-lockfile's (a directory made atomically, its mtime kept fresh while this process lives,
 * so a lock left by a killed process goes stale and is taken over).
 */
import { join } from 'node:path';
import lockfile from 'proper-lockfile';

export class DataDirInUseError extends Error {
  readonly code = 'BEDROCK_DATA_DIR_IN_USE';
}

/** Locks `dataDir` for this process; the answer unlocks it. Throws DataDirInUseError when another process holds it. */
export async function lockDataDir(dataDir: string, onLost: (err: Error) => void): Promise<() => Promise<void>> {
  try {
    return await lockfile.lock(dataDir, {
      lockfilePath: join(dataDir, 'running.lock'),
      // A holder that stopped refreshing for 10 s is gone (refreshed every 5 s).
      stale: 10_000,
      update: 5_000,
      realpath: false,
      onCompromised: onLost,
    });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ELOCKED')
      throw new DataDirInUseError(
        `another Bedrock is running with its data in ${dataDir} (it holds ${join(dataDir, 'running.lock')}); stop it first, or give this one a directory of its own: BEDROCK_DATA_DIR=/path npm start`,
      );
    throw err;
  }
}
