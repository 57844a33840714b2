/**
 * A cgroup per run, bounding one tool's whole tree by the kernel: `pids` (the process count),
 * `memory` (everything the run charges, its scratch tmpfs pages included, no swap) and `cpu` (a
 * share of the machine's CPUs). It also lists every process of the tool, setsid escapees included,
 * so nothing survives the tool. Best effort per controller, on cgroup v2 or the v1 hierarchies
 * (`CgroupRoots`); what the machine lacks falls back to rlimits and group kills.
 */
import { mkdirSync, readFileSync, readdirSync, rmdirSync, existsSync, writeFileSync } from 'node:fs';
import { basename, join } from 'node:path';

/** What a run's cgroup bounds (unset: not bounded there). */
export interface RunCgroupLimits {
  /**
   * Tasks in the cgroup (pids.max). RLIMIT_NPROC alone cannot bound them: the kernel does not
   * enforce it for uid 0, and for other users it counts every process of the user.
   */
  readonly processes: number;
  /** Bytes of memory, tmpfs pages included, no swap (memory.max + memory.swap.max 0; v1 limit_in_bytes + memsw). */
  readonly memory?: number;
  /** CPUs' worth of time (cpu.max; v1 cfs_quota_us over cfs_period_us). */
  readonly cpus?: number;
}

/** The controllers this runner's cgroups bound. */
export interface CgroupBounds {
  readonly version: 'v1' | 'v2';
  readonly pids: boolean;
  readonly memory: boolean;
  /** Swap is bounded too (v2 memory.swap.max, v1 memory.memsw.*): tmpfs pages cannot escape to swap. */
  readonly swap: boolean;
  readonly cpu: boolean;
}

/**
 * A run's cgroup is one directory per hierarchy, all with the same name; `dir` below is the first
 * one (the pids hierarchy's on v1), which names the run's cgroup.
 */
export interface PidsCgroups {
  /** The directory this runner creates its per-run cgroups in (the first hierarchy's). */
  readonly base: string;
  /** Every base directory, one per hierarchy (one on v2). */
  readonly bases: readonly string[];
  readonly bounds: CgroupBounds;
  /**
   * Creates a cgroup with these limits (a number: pids.max only); resolves to its directory. The
   * mkdirs are synchronous: cgroupfs is in memory and does not wait for an RCU grace period here
   * (moving a process in does, and the helper does that, not this process). Measured on cgroup v1
   * with pids, memory and cpu, mkdir + rmdir in all three cost ~0.2–0.3 ms of CPU per run
   * synchronously against ~0.5–0.7 ms through `fs.promises` (a thread-pool round trip each).
   */
  create(name: string, limits: number | RunCgroupLimits): Promise<string>;
  /** Sets `pids.max` of `dir` now (a cgroup file write does not wait; synchronous). */
  setLimit(dir: string, maxPids: number): void;
  /** Sets every limit of `dir` now (synchronous). */
  setLimits(dir: string, limits: RunCgroupLimits): void;
  /** The run's directory in every hierarchy (each one `--cgroup` for the helper). */
  dirs(dir: string): string[];
  /** How many processes the kernel's OOM killer killed in `dir` because of its memory limit (0 when unknown). */
  oomKills(dir: string): number;
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

/**
 * Where the cgroups go: a v2 directory (delegated to this process, the controllers enabled in its
 * subtree), or one directory per v1 controller (`pids`, `memory`, `cpu`, each mounted on its own),
 * a run joining each.
 */
export interface CgroupRoots {
  readonly version: 'v1' | 'v2';
  /** v2: the one directory; v1: by controller. */
  readonly roots: Partial<Record<'unified' | 'pids' | 'memory' | 'cpu', string>>;
}

/** This process's own cgroup in each hierarchy, from /proc/self/cgroup ("N:controllers:/path"). */
function ownCgroups(): Map<string, string> {
  const own = new Map<string, string>();
  try {
    for (const line of readFileSync('/proc/self/cgroup', 'utf8').split('\n')) {
      const m = /^\d+:([^:]*):(.*)$/.exec(line);
      if (!m) continue;
      const controllers = m[1] === '' ? ['unified'] : (m[1] as string).split(',');
      for (const c of controllers) own.set(c, m[2] as string);
    }
  } catch {
    // no /proc
  }
  return own;
}

/** Mount points of the cgroup hierarchies, from /proc/self/mountinfo: controller → [mount point, root in the hierarchy]. */
function cgroupMounts(): Map<string, [string, string]> {
  const mounts = new Map<string, [string, string]>();
  try {
    for (const line of readFileSync('/proc/self/mountinfo', 'utf8').split('\n')) {
      const [left, right] = line.split(' - ');
      if (!left || !right) continue;
      const fields = left.split(' ');
      const [fstype, , superOptions] = right.split(' ');
      const root = fields[3] as string;
      const point = (fields[4] as string).replace(/\\040/g, ' ');
      if (fstype === 'cgroup2') {
        if (!mounts.has('unified')) mounts.set('unified', [point, root]);
      } else if (fstype === 'cgroup') {
        for (const opt of (superOptions ?? '').split(',')) if (!mounts.has(opt)) mounts.set(opt, [point, root]);
      }
    }
  } catch {
    // no mountinfo
  }
  return mounts;
}

function ownDir(mount: [string, string], path: string): string {
  const [point, root] = mount;
  const inside = root !== '/' && path.startsWith(root) ? path.slice(root.length) : path;
  return join(point, inside);
}

/**
 * Finds the hierarchies this process may create cgroups in, or null. cgroup v1 (`pids`,
 * `memory`, `cpu` each on its own mount, as on hybrid hosts): under this process's own cgroup
 * in each, so that the limits the host set above it still apply. cgroup v2: this process's own
 * cgroup when it is delegated (writable, the controllers in `cgroup.subtree_control`).
 */
export function findCgroupRoots(): CgroupRoots | null {
  const own = ownCgroups();
  const mounts = cgroupMounts();
  const v1: Partial<Record<'pids' | 'memory' | 'cpu', string>> = {};
  for (const controller of ['pids', 'memory', 'cpu'] as const) {
    const mount = mounts.get(controller);
    if (!mount) continue;
    const dir = ownDir(mount, own.get(controller) ?? '/');
    if (existsSync(join(dir, 'cgroup.procs')) && writable(dir)) v1[controller] = dir;
  }
  if (v1.pids) return { version: 'v1', roots: v1 };
  const unified = mounts.get('unified');
  const path = own.get('unified');
  if (unified && path !== undefined) {
    const dir = ownDir(unified, path);
    try {
      const controllers = readFileSync(join(dir, 'cgroup.subtree_control'), 'utf8').split(/\s+/);
      if (controllers.includes('pids') && writable(dir)) return { version: 'v2', roots: { unified: dir } };
    } catch {
      // no cgroup v2 here, or not delegated
    }
  }
  return null;
}

/** Finds a pids hierarchy this process may create cgroups in, or null (the first directory of findCgroupRoots). */
export function findPidsCgroupRoot(): string | null {
  const roots = findCgroupRoots();
  return roots ? ((roots.roots.unified ?? roots.roots.pids) as string) : null;
}

/**
 * The processes in `dirs`. Read synchronously: a cgroup file is generated in memory by the kernel,
 * and `fs.promises.readFile` (open, fstat, read, close: four thread-pool round trips) cost ~190 µs
 * of CPU per file here against ~10 µs for readFileSync, ~0.6 ms per run over three v1 hierarchies.
 */
function procsOf(dirs: readonly string[]): number[] {
  const all = new Set<number>();
  for (const dir of dirs) {
    try {
      for (const p of readFileSync(join(dir, 'cgroup.procs'), 'utf8').split('\n').filter(Boolean)) all.add(Number(p));
    } catch {
      // gone
    }
  }
  return [...all];
}

/**
 * One synchronous kill pass over `dir`: cgroup.kill where the kernel has it (`groupKill`: v2 since
 * Linux 5.14; not tried elsewhere, as a failed write costs a thrown error per hierarchy), each listed pid.
 */
function killNow(dir: string, groupKill: boolean): void {
  if (groupKill) {
    try {
      writeFileSync(join(dir, 'cgroup.kill'), '1');
    } catch {
      // gone: signal each process
    }
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

function tryWrite(path: string, value: string): boolean {
  try {
    writeFileSync(path, value);
    return true;
  } catch {
    return false;
  }
}

/** A counter of a flat-keyed cgroup file ("key value" lines), 0 when absent. */
function counter(path: string, key: string): number {
  try {
    const line = readFileSync(path, 'utf8')
      .split('\n')
      .find((l) => l.startsWith(`${key} `));
    return line ? Number(line.slice(key.length + 1)) : 0;
  } catch {
    return 0;
  }
}

const CPU_PERIOD_US = 100_000;

/** The per-run cgroups this module's callers make: `run-`, `warm-` or `mcp-`, then the making process's pid and a sequence number. */
const RUN_CGROUP = /^(?:run|warm|mcp)-(\d+)-\d+$/;

/** Whether a process with this pid exists (EPERM: it does, and is not ours to signal). */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * Sets up `bedrock-<runnerId>` in each hierarchy for this runner's per-run cgroups. `root` is a
 * directory (a pids-only hierarchy, as BEDROCK_PIDS_CGROUP=<dir> gives) or what findCgroupRoots found.
 */
export function createPidsCgroups(root: string | CgroupRoots, runnerId: string): PidsCgroups {
  const roots: CgroupRoots =
    typeof root === 'string' ? { version: existsSync(join(root, 'cgroup.controllers')) ? 'v2' : 'v1', roots: {} } : root;
  const name = `bedrock-${runnerId}`;
  // Hierarchy directories by controller: v2 has one for all.
  const byController: Partial<Record<'pids' | 'memory' | 'cpu', string>> = {};
  if (typeof root === 'string') {
    byController.pids = join(root, name);
    if (roots.version === 'v2') {
      byController.memory = byController.pids;
      byController.cpu = byController.pids;
    }
  } else if (root.version === 'v2') {
    const base = join(root.roots.unified as string, name);
    byController.pids = byController.memory = byController.cpu = base;
  } else {
    for (const c of ['pids', 'memory', 'cpu'] as const) if (root.roots[c]) byController[c] = join(root.roots[c] as string, name);
  }
  const bases = [...new Set(Object.values(byController))];
  const primary = byController.pids as string;
  const made: string[] = [];
  for (const b of bases) {
    try {
      mkdirSync(b, { recursive: true });
      made.push(b);
    } catch (err) {
      if (b === primary) throw err;
      for (const c of ['memory', 'cpu'] as const) if (byController[c] === b) delete byController[c];
    }
  }
  if (roots.version === 'v2') {
    // Runs under the base need the controllers enabled in its subtree (each on its own: one may be missing).
    for (const c of ['pids', 'memory', 'cpu']) tryWrite(join(primary, 'cgroup.subtree_control'), `+${c}`);
  }
  const probeDir = (c: 'pids' | 'memory' | 'cpu', file: string): boolean => {
    const b = byController[c];
    if (!b) return false;
    // The base's own files show what its children will have (v1: every cgroup has the files; v2: the subtree control).
    if (roots.version === 'v2') {
      try {
        return readFileSync(join(b, 'cgroup.subtree_control'), 'utf8').split(/\s+/).includes(c);
      } catch {
        return false;
      }
    }
    return existsSync(join(b, file));
  };
  const memory = probeDir('memory', 'memory.limit_in_bytes');
  const bounds: CgroupBounds = {
    version: roots.version,
    pids: true,
    memory,
    swap: memory && (roots.version === 'v2' ? true : existsSync(join(byController.memory as string, 'memory.memsw.limit_in_bytes'))),
    cpu: probeDir('cpu', 'cpu.cfs_quota_us'),
  };
  /** The kernel's group kill (cgroup.kill, in every non-root v2 cgroup since Linux 5.14). */
  const groupKill = existsSync(join(primary, 'cgroup.kill'));
  if (!bounds.memory) delete byController.memory;
  if (!bounds.cpu) delete byController.cpu;
  const activeBases = [...new Set(Object.values(byController))];
  const dirsOf = (dir: string): string[] => activeBases.map((b) => join(b, basename(dir)));
  const inHierarchy = (c: 'pids' | 'memory' | 'cpu', dir: string): string | undefined =>
    byController[c] ? join(byController[c] as string, basename(dir)) : undefined;

  const setLimits = (dir: string, limits: RunCgroupLimits): void => {
    writeFileSync(join(inHierarchy('pids', dir) as string, 'pids.max'), String(limits.processes));
    const mem = inHierarchy('memory', dir);
    if (mem && limits.memory !== undefined) {
      if (roots.version === 'v2') {
        writeFileSync(join(mem, 'memory.max'), String(limits.memory));
        tryWrite(join(mem, 'memory.swap.max'), '0');
      } else {
        // memsw (memory + swap) must stay ≥ the memory limit: lowered after the limit (a fresh
        // cgroup's, unlimited, is always lowered: two writes), raised before it.
        const memsw = join(mem, 'memory.memsw.limit_in_bytes');
        const limit = join(mem, 'memory.limit_in_bytes');
        if (tryWrite(limit, String(limits.memory))) {
          if (bounds.swap) writeFileSync(memsw, String(limits.memory));
        } else {
          if (bounds.swap) writeFileSync(memsw, String(limits.memory));
          writeFileSync(limit, String(limits.memory));
        }
      }
    }
    const cpu = inHierarchy('cpu', dir);
    if (cpu && limits.cpus !== undefined && limits.cpus > 0) {
      const quota = Math.max(1000, Math.round(limits.cpus * CPU_PERIOD_US));
      if (roots.version === 'v2') writeFileSync(join(cpu, 'cpu.max'), `${quota} ${CPU_PERIOD_US}`);
      else {
        // The kernel's default period (100 ms) is CPU_PERIOD_US: only the quota is written.
        writeFileSync(join(cpu, 'cpu.cfs_quota_us'), String(quota));
      }
    }
  };

  const removals = new Set<Promise<void>>();
  const destroy = async (dir: string): Promise<void> => {
    const all = dirsOf(dir);
    // Kill until empty: a process forking while we read the list shows up next round.
    for (let round = 0; round < 200; round++) {
      const pids = procsOf(all);
      if (pids.length === 0) {
        let left = 0;
        for (const d of all) {
          try {
            rmdirSync(d); // synchronous, as create's mkdir: see create
          } catch (err) {
            // EBUSY while the last tasks are being torn down; ENOENT if already gone.
            if ((err as NodeJS.ErrnoException).code !== 'ENOENT') left++;
          }
        }
        if (left === 0) return;
      }
      for (const d of all) {
        if (groupKill) {
          try {
            writeFileSync(join(d, 'cgroup.kill'), '1');
          } catch {
            // fall back to signalling each process
          }
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
  // What an earlier process of this runner left when it died (a SIGKILL runs no clean-up): the
  // per-run cgroups of a pid that no longer exists are emptied (a tool that outlived its runner
  // can report to no one) and removed in the background, as a run's own are; `close` waits for
  // them. A live pid's are left alone (another process with this runner id, as embedded
  // instances side by side share theirs), and so is a dead one's whose pid was taken again.
  let names: string[] = [];
  try {
    names = readdirSync(primary);
  } catch {
    // an unreadable base: nothing to sweep
  }
  for (const name of names) {
    const owner = RUN_CGROUP.exec(name)?.[1];
    if (owner === undefined || Number(owner) === process.pid || alive(Number(owner))) continue;
    const removal: Promise<void> = destroy(join(primary, name))
      .catch(() => undefined)
      .finally(() => removals.delete(removal));
    removals.add(removal);
  }
  return {
    base: primary,
    bases: made,
    bounds,
    async create(runName, limits) {
      const dir = join(primary, runName);
      for (const d of dirsOf(dir)) mkdirSync(d);
      setLimits(dir, typeof limits === 'number' ? { processes: limits } : limits);
      return dir;
    },
    setLimit(dir, maxPids) {
      writeFileSync(join(dir, 'pids.max'), String(maxPids));
    },
    setLimits,
    dirs: dirsOf,
    oomKills(dir) {
      const mem = inHierarchy('memory', dir);
      if (!mem) return 0;
      if (roots.version === 'v2') return counter(join(mem, 'memory.events'), 'oom_kill');
      const kills = counter(join(mem, 'memory.oom_control'), 'oom_kill');
      if (kills > 0) return kills;
      // Kernels before 4.13 have no oom_kill count: a hit limit is the best sign there.
      return 0;
    },
    destroy,
    release(dir) {
      for (const d of dirsOf(dir)) killNow(d, groupKill);
      // Begun on the next turn of the loop (its rmdirs are synchronous), after the result is out.
      const removal = new Promise<void>((resolve) => setImmediate(resolve))
        .then(() => destroy(dir))
        .finally(() => removals.delete(removal));
      removals.add(removal);
    },
    async close() {
      while (removals.size > 0) await Promise.all([...removals]);
      for (const b of made) {
        try {
          rmdirSync(b);
        } catch {
          // still in use or gone
        }
      }
    },
  };
}
