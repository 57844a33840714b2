/** Resource limits applied by the helper with setrlimit (and the pids cgroup when there is one). */
export interface ResourceLimits {
  /** RLIMIT_AS per process, bytes (address space, so it is generous: runtimes reserve more than they use). */
  readonly memoryBytes: number;
  /** RLIMIT_CPU per process, seconds of CPU time (SIGXCPU, then SIGKILL 5 s later). */
  readonly cpuSeconds: number;
  /** Processes in the tool's tree (pids.max; RLIMIT_NPROC too, which the kernel skips for root). */
  readonly processes: number;
  /** RLIMIT_FSIZE, bytes: the largest file a command may write. */
  readonly fileSizeBytes: number;
  /** RLIMIT_NOFILE: open files per process. */
  readonly openFiles: number;
}

const GiB = 1024 ** 3;
const MiB = 1024 ** 2;

/** Restricted: read-only exploration; only the scratch directory is writable. */
export const DEFAULT_RESTRICTED_LIMITS: ResourceLimits = {
  memoryBytes: 4 * GiB,
  cpuSeconds: 1800,
  processes: 256,
  fileSizeBytes: 256 * MiB,
  openFiles: 1024,
};

/** Unrestricted: builds and test suites; still bounded so one tool cannot take the node down. */
export const DEFAULT_UNRESTRICTED_LIMITS: ResourceLimits = {
  memoryBytes: 16 * GiB,
  cpuSeconds: 1800,
  processes: 2048,
  fileSizeBytes: 8 * GiB,
  openFiles: 8192,
};

/** The helper's command-line options for `limits`. */
export function limitArgs(limits: ResourceLimits): string[] {
  return [
    '--mem',
    String(limits.memoryBytes),
    '--cpu',
    String(limits.cpuSeconds),
    '--nproc',
    String(limits.processes),
    '--fsize',
    String(limits.fileSizeBytes),
    '--nofile',
    String(limits.openFiles),
  ];
}
