/**
 * A pids cgroup per run, so that `pids.max` bounds the process count of one tool's whole
 * tree. RLIMIT_NPROC alone cannot: the kernel does not enforce it for uid 0, and for other
 * users it counts every process of the user, not of the tool. The cgroup also lists every
 * process of the tool, including ones that left its process group with setsid, so that
 * nothing survives the tool.
 *
 * Best effort: used when a writable pids hierarchy exists (cgroup v1 `pids`, or a cgroup v2
 * directory delegated to this process with `pids` in its subtree_control); otherwise the
 * runner falls back to RLIMIT_NPROC and process-group kills.
 */
import { mkdirSync, readFileSync, rmdirSync, existsSync, writeFileSync } from 'node:fs';
import { mkdir, readFile, rmdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';

export interface PidsCgroups {
  /** The directory this runner creates its per-run cgroups in. */
  readonly base: string;
  /**
   * Creates a cgroup allowing at most `maxPids` tasks; resolves to its directory. Async on
   * purpose, like destroy: cgroup mkdir and rmdir may wait for RCU grace periods, which must
   * not block the event loop.
   */
  create(name: string, maxPids: number): Promise<string>;
  /** Sets `pids.max` of `dir` now (a cgroup file write does not wait; synchronous). */
  setLimit(dir: string, maxPids: number): void;
  /** Kills every process still in `dir`, waits for it to empty, removes it. */
  destroy(dir: string): Promise<void>;
  /**
   * The end of a run, off its critical path: SIGKILLs every process still in `dir` now (one
   * synchronous pass: `cgroup.kill`, or each pid of `cgroup.procs`), then `destroy`s it in the
   * background (until empty, then rmdir). `close` waits for those removals.
   */
  release(dir: string): void;
  /** Waits for the background removals, then removes the base directory (once every run is done). */
  close(): Promise<void>;
}

function writable(dir: string): boolean {
  const probe = join(dir, `.bedrock-probe-${process.pid}`);
  try {
    mkdirSync(probe);
    rmdirSync(probe);
    return true;
  } catch {
    return false;
  }
}

/** Finds a pids hierarchy this process may create cgroups in, or null. */
export function findPidsCgroupRoot(): string | null {
  const v1 = '/sys/fs/cgroup/pids';
  if (existsSync(join(v1, 'pids.max')) || existsSync(join(v1, 'cgroup.procs'))) {
    if (writable(v1)) return v1;
  }
  try {
    const line = readFileSync('/proc/self/cgroup', 'utf8')
      .split('\n')
      .find((l) => l.startsWith('0::'));
    if (line) {
      const own = join('/sys/fs/cgroup', line.slice(3));
      const controllers = readFileSync(join(own, 'cgroup.subtree_control'), 'utf8');
      if (controllers.split(/\s+/).includes('pids') && writable(own)) return own;
    }
  } catch {
    // no cgroup v2, or not delegated
  }
  return null;
}

async function procsOf(dir: string): Promise<number[]> {
  try {
    return (await readFile(join(dir, 'cgroup.procs'), 'utf8')).split('\n').filter(Boolean).map(Number);
  } catch {
    return [];
  }
}

/** One synchronous kill pass over `dir`: cgroup.kill where the kernel has it (v2), each listed pid. */
function killNow(dir: string): void {
  try {
    writeFileSync(join(dir, 'cgroup.kill'), '1');
  } catch {
    // cgroup v1, or gone: signal each process
  }
  let pids: number[] = [];
  try {
    pids = readFileSync(join(dir, 'cgroup.procs'), 'utf8').split('\n').filter(Boolean).map(Number);
  } catch {
    return;
  }
  for (const pid of pids) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
}

/** Sets up `<root>/bedrock-<runnerId>` for this runner's per-run cgroups. */
export function createPidsCgroups(root: string, runnerId: string): PidsCgroups {
  const base = join(root, `bedrock-${runnerId}`);
  mkdirSync(base, { recursive: true });
  const removals = new Set<Promise<void>>();
  const destroy = async (dir: string): Promise<void> => {
    // Kill until empty: a process forking while we read the list shows up next round.
    for (let round = 0; round < 200; round++) {
      const pids = await procsOf(dir);
      if (pids.length === 0) {
        try {
          await rmdir(dir);
          return;
        } catch (err) {
          // EBUSY while the last tasks are being torn down; ENOENT if already gone.
          if ((err as NodeJS.ErrnoException).code === 'ENOENT') return;
        }
      }
      if (existsSync(join(dir, 'cgroup.kill'))) {
        try {
          await writeFile(join(dir, 'cgroup.kill'), '1');
        } catch {
          // fall back to signalling each process
        }
      }
      for (const pid of pids) {
        try {
          process.kill(pid, 'SIGKILL');
        } catch {
          // already gone
        }
      }
      await new Promise((resolve) => setTimeout(resolve, round < 20 ? 5 : 50));
    }
  };
  return {
    base,
    async create(name, maxPids) {
      const dir = join(base, name);
      await mkdir(dir);
      await writeFile(join(dir, 'pids.max'), String(maxPids));
      return dir;
    },
    setLimit(dir, maxPids) {
      writeFileSync(join(dir, 'pids.max'), String(maxPids));
    },
    destroy,
    release(dir) {
      killNow(dir);
      const removal = destroy(dir).finally(() => removals.delete(removal));
      removals.add(removal);
    },
    async close() {
      while (removals.size > 0) await Promise.all([...removals]);
      try {
        rmdirSync(base);
      } catch {
        // still in use or gone
      }
    },
  };
}
