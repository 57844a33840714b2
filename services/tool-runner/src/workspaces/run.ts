/**
 * Runs a fixed argv (never through a shell) and collects its result; never throws for a
 * non-zero exit, only returns it. The storage's only way to call btrfs, mkfs.btrfs, mount, cp
 * and rm.
 */
import { execFile } from 'node:child_process';

export interface RunResult {
  /** Exit status; -1 when it could not start or was killed. */
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
  /** The command could not be started (ENOENT: not installed). */
  readonly missing?: boolean;
}

export interface RunOptions {
  readonly timeoutMs?: number;
  /** Run as this user and group (supplementary groups dropped); needs root. */
  readonly uid?: number;
  readonly gid?: number;
  readonly cwd?: string;
  readonly signal?: AbortSignal;
}

const ENV = { PATH: '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin', LC_ALL: 'C' };

export function run(argv: readonly string[], options: RunOptions = {}): Promise<RunResult> {
  const [file, ...args] = argv;
  return new Promise((resolve) => {
    execFile(
      file!,
      args,
      {
        env: ENV,
        timeout: options.timeoutMs ?? 60_000,
        killSignal: 'SIGKILL',
        maxBuffer: 16 * 1024 * 1024,
        ...(options.uid !== undefined ? { uid: options.uid } : {}),
        ...(options.gid !== undefined ? { gid: options.gid } : {}),
        ...(options.cwd ? { cwd: options.cwd } : {}),
        ...(options.signal ? { signal: options.signal } : {}),
      },
      (err, stdout, stderr) => {
        if (!err) return resolve({ code: 0, stdout, stderr });
        const e = err as NodeJS.ErrnoException & { code?: number | string };
        if (e.code === 'ENOENT') return resolve({ code: -1, stdout, stderr: `${file}: not installed`, missing: true });
        resolve({ code: typeof e.code === 'number' ? e.code : -1, stdout, stderr: stderr || e.message });
      },
    );
  });
}

/** The last `n` non-empty lines of `text`, for error messages. */
export function lastLines(text: string, n = 5): string {
  return text
    .split('\n')
    .map((l) => l.trimEnd())
    .filter((l) => l !== '')
    .slice(-n)
    .join('\n');
}
