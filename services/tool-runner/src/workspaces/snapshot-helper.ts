/**
 * The snapshot helper (`bin/bedrock-snapshot --serve`, sandbox/bedrock-snapshot.c), kept running by
 * the storage: a checkpoint is one line to it and one ioctl in it, instead of a `btrfs subvolume
 * snapshot` process (btrfs-progs' start-up) per checkpoint, and retention reads each checkpoint's
 * exclusive bytes from the quota tree by ioctl instead of two more btrfs commands
 * (docs/workspaces.md, "Cost").
 */
import { spawn } from 'node:child_process';
import type { ChildProcessWithoutNullStreams } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { Code, ConnectError } from '@connectrpc/connect';
import { DEFAULT_HELPER_PATH } from '../config.ts';

/** Where the build puts it: beside the sandbox helper (the image copies both to /app). */
export const DEFAULT_SNAPSHOT_HELPER_PATH = join(dirname(DEFAULT_HELPER_PATH), 'bedrock-snapshot');

/** The snapshot helper beside `sandboxHelper` (default: the build's), or undefined when it is not there. */
export function snapshotHelperBeside(sandboxHelper = DEFAULT_HELPER_PATH): string | undefined {
  const path = join(dirname(sandboxHelper), 'bedrock-snapshot');
  return existsSync(path) ? path : undefined;
}

export interface SnapshotHelper {
  /** A snapshot of the subvolume `source` at `dest` (absolute paths), read-only or not, inside `qgroup` (`1/N`) if given. */
  snapshot(source: string, dest: string, options: { readonly readonly: boolean; readonly qgroup?: string }): Promise<void>;
  /** The subvolume id of `path` and its level-0 qgroup's exclusive bytes (0 when it has no qgroup). */
  exclusive(path: string): Promise<{ subvolume: number; bytes: number }>;
  /** Deletes the subvolume at `path` (one ioctl; the kernel frees its blocks in the background). */
  destroy(path: string): Promise<void>;
  /** The subvolume id of `path` and when the subvolume was made (a snapshot's root directory keeps its source's birth time). */
  info(path: string): Promise<{ subvolume: number; createdMs: number }>;
  /**
   * Limits the referenced bytes of the subvolume at `path` (its level-0 qgroup), as `btrfs qgroup
   * limit BYTES 0/ID ROOT` does: through the parent directory, so that it works while the
   * subvolume's family is at its quota.
   */
  limit(path: string, bytes: number): Promise<void>;
  /** Qgroup `qgroup` (`1/N`) of the filesystem at `path`: its referenced and exclusive bytes (0 and 0 when it does not exist). */
  qgroup(path: string, qgroup: string): Promise<{ referenced: number; exclusive: number }>;
  close(): void;
}

const SAFE = /^\/[^\t\n]*$/;

/**
 * Requests are answered in order; one at a time is in the kernel. The helper is started on first
 * use and again after it dies (an answer in flight then fails); it exits when its stdin closes, so
 * with the runner.
 */
export function openSnapshotHelper(path: string): SnapshotHelper {
  let child: ChildProcessWithoutNullStreams | undefined;
  let waiting: { resolve: (line: string) => void; reject: (err: Error) => void }[] = [];

  function started(): ChildProcessWithoutNullStreams {
    if (child && child.exitCode === null && child.signalCode === null && !child.killed) return child;
    const proc = spawn(path, ['--serve'], { stdio: ['pipe', 'pipe', 'pipe'], env: { LC_ALL: 'C' } });
    let stderr = '';
    proc.stderr.on('data', (d: Buffer) => (stderr = (stderr + d.toString()).slice(-2000)));
    createInterface({ input: proc.stdout }).on('line', (line) => waiting.shift()?.resolve(line));
    const fail = (why: string) => {
      if (child === proc) child = undefined;
      const pending = waiting;
      waiting = [];
      for (const w of pending)
        w.reject(new ConnectError(`the snapshot helper ${path} ${why}${stderr ? `: ${stderr.trim()}` : ''}`, Code.Internal));
    };
    proc.on('error', (err) => fail(`could not run (${err.message})`));
    proc.on('exit', (code, signal) => fail(`exited (${signal ?? code})`));
    proc.stdin.on('error', () => undefined);
    child = proc;
    return proc;
  }

  function ask(fields: readonly string[]): Promise<string> {
    const proc = started();
    return new Promise<string>((resolve, reject) => {
      waiting.push({ resolve, reject });
      proc.stdin.write(`${fields.join('\t')}\n`);
    }).then((line) => {
      if (line.startsWith('ok')) return line.slice(3);
      const what =
        fields[0] === 'snap'
          ? `snapshotting ${fields[3]} to ${fields[4]}`
          : fields[0] === 'destroy'
            ? `deleting ${fields[1]}`
            : fields[0] === 'limit'
              ? `limiting ${fields[1]}`
              : fields[0] === 'info'
                ? `reading the subvolume ${fields[1]}`
                : `reading the bytes of ${fields[fields[0] === 'qgroup' ? 2 : 1]}`;
      throw new ConnectError(`${what}: ${line.replace(/^err /, '')}`, line.startsWith('err EEXIST') ? Code.AlreadyExists : Code.Internal);
    });
  }

  const checkPath = (p: string): string => {
    if (!SAFE.test(p)) throw new ConnectError(`not an absolute path without tabs and newlines: ${JSON.stringify(p)}`, Code.Internal);
    return p;
  };

  return {
    async snapshot(source, dest, options) {
      await ask(['snap', options.readonly ? '1' : '0', options.qgroup ?? '-', checkPath(source), checkPath(dest)]);
    },
    async exclusive(p) {
      const [subvolume, bytes] = (await ask(['excl', checkPath(p)])).split(' ').map(Number);
      return { subvolume: subvolume!, bytes: bytes! };
    },
    async destroy(p) {
      await ask(['destroy', checkPath(p)]);
    },
    async info(p) {
      const [subvolume, seconds, nanos] = (await ask(['info', checkPath(p)])).split(' ').map(Number);
      return { subvolume: subvolume!, createdMs: seconds! * 1000 + Math.floor(nanos! / 1e6) };
    },
    async limit(p, bytes) {
      await ask(['limit', checkPath(p), String(Math.floor(bytes))]);
    },
    async qgroup(p, qgroup) {
      const [referenced, exclusive] = (await ask(['qgroup', checkPath(p), qgroup])).split(' ').map(Number);
      return { referenced: referenced!, exclusive: exclusive! };
    },
    close() {
      child?.stdin.end();
      child = undefined;
    },
  };
}
