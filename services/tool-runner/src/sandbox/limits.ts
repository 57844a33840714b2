/**
 * Resource limits applied by the helper with setrlimit and by the run's cgroup when there is one
 * (pids, memory, cpu), one set per mode; the defaults and their variables are in config.ts (`limits`).
 */
export interface ResourceLimits {
  /**
   * Memory of the whole run, bytes: the memory cgroup's memory.max (its scratch's tmpfs pages
   * included, no swap); without a memory cgroup, RLIMIT_AS per process (address space).
   */
  readonly memory: number;
  /** CPUs' worth of time the run may use at once (cpu.max); without a cpu cgroup, unbounded. */
  readonly cpus: number;
  /** RLIMIT_CPU per process, ms of CPU time, given to the kernel in whole seconds rounded up (SIGXCPU, then SIGKILL 5 s later). */
  readonly cpuTime: number;
  /** Processes in the tool's tree (pids.max; RLIMIT_NPROC too, which the kernel skips for root). */
  readonly processes: number;
  /** RLIMIT_FSIZE, bytes: the largest file a command may write. */
  readonly fileSize: number;
  /** RLIMIT_NOFILE: open files per process. */
  readonly openFiles: number;
}

/** The helper's command-line options for `limits`. */
export function limitArgs(limits: ResourceLimits): string[] {
  return [
    '--mem',
    String(limits.memory),
    '--cpu',
    String(Math.max(1, Math.ceil(limits.cpuTime / 1000))),
    '--nproc',
    String(limits.processes),
    '--fsize',
    String(limits.fileSize),
    '--nofile',
    String(limits.openFiles),
  ];
}
