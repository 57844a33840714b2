/**
 * The tool-runner's configuration, read from the environment (docs/tool-runner.md lists every
 * variable with its default). `readToolRunnerConfig()` fails fast naming every bad variable.
 */
import { hostname, tmpdir } from 'node:os';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { isAbsolute, join } from 'node:path';
import { bool, commonEnv, int, oneOf, optional, port, readEnv, setting, str, url } from '@bedrock/platform/server';
import type { EnvParser, LogLevel } from '@bedrock/platform/server';
import { DEFAULT_RESTRICTED_LIMITS, DEFAULT_UNRESTRICTED_LIMITS } from './sandbox/limits.ts';
import type { ResourceLimits } from './sandbox/limits.ts';

/** The helper built by `npm run build -w services/tool-runner`. */
export const DEFAULT_HELPER_PATH = fileURLToPath(new URL('../bin/bedrock-sandbox', import.meta.url));

export interface ToolRunnerConfig {
  /** Unique per process; appears in results and the runner registry. Default `<hostname>-<random>`. */
  readonly runnerId: string;
  /** `redis` (distributed) or `memory` (in-process, for embedding and tests). Default `redis`. */
  readonly transport: 'redis' | 'memory';
  /** Default `redis://127.0.0.1:6379`. */
  readonly redisUrl: string;
  /** Consume the queues (false: gRPC only). Default true. */
  readonly consumeQueues: boolean;
  /** Interface of the gRPC server. Default `0.0.0.0`. */
  readonly grpcHost: string;
  /** Port of the ToolRunnerService; 0 picks a free port. Default 50053. */
  readonly grpcPort: number;
  /** Port of /metrics, /healthz, /readyz; 0 picks a free port. Default 9464. */
  readonly metricsPort: number;
  /** Jobs run at once per queue. Default 8. */
  readonly concurrency: number;
  /** Path of the bedrock-sandbox helper. */
  readonly helperPath: string;
  /** Give every run a private scratch (TMPDIR, HOME), gone when it ends. Default true. */
  readonly scratch: boolean;
  /** Where each run's private scratch (TMPDIR, HOME) lives: a tmpfs mounted there per run when the runner may mount, else a directory per run under it. Default `<os temp dir>/bedrock-scratch-<runner uid>`. */
  readonly scratchRoot: string;
  /** The user tools run as: a uid (never 0), or `owner` = the working directory's owner unless that is root. Default 65534. */
  readonly toolUid: number | 'owner';
  /** The group tools run as (with `owner`: the working directory's group). Default 65534. */
  readonly toolGid: number;
  /** Unrestricted mode may write `workspace` (the working directory, scratch, home) or the whole `host` the tool user can write. Default workspace. */
  readonly unrestrictedWrite: 'workspace' | 'host';
  /** TCP ports tools may never connect to (the system's own endpoints), besides Redis's and this runner's own ports. */
  readonly toolDenyPorts: readonly number[];
  /** Paths covered by an empty read-only tmpfs in every tool's private mount namespace (database sockets, data directories). */
  readonly toolHidePaths: readonly string[];
  /** `auto` (find a writable pids hierarchy), `off`, or a directory to create per-run pids cgroups in. */
  readonly pidsCgroup: string;
  /** Sandbox helpers kept started ahead of their runs, each in its own fresh pids cgroup (with a pids cgroup only). Default 2. */
  readonly warmHelpers: number;
  readonly restrictedLimits: ResourceLimits;
  readonly unrestrictedLimits: ResourceLimits;
  /** Bytes of command output kept from the start and from the end. Default 50 000 each. */
  readonly outputHeadBytes: number;
  readonly outputTailBytes: number;
  /** Live output is flushed to the notification stream at most this often, ms. Default 250. */
  readonly outputFlushMs: number;
  /** Live output streamed per tool call at most, bytes (the result keeps head and tail anyway). Default 1 MB. */
  readonly outputStreamMaxBytes: number;
  /** Capabilities are re-reported this often, ms; the registry forgets a runner after 3 missed reports. Default 10 000. */
  readonly reportIntervalMs: number;
  /** How long running tools may finish after SIGTERM before they are killed, ms. Default 10 000. */
  readonly shutdownGraceMs: number;
  readonly logLevel: LogLevel;
  /** File of `service:sha256hex` lines: who may call the ToolRunnerService (unset: nobody). */
  readonly servicePeersFile: string | undefined;
}

/** A uid ≥ 1, or `owner`. */
function toolUid(): EnvParser<number | 'owner'> {
  const uid = int({ min: 1, max: 2 ** 32 - 2 });
  return { expected: 'a uid ≥ 1, or owner', parse: (raw) => (raw === 'owner' ? 'owner' : uid.parse(raw)) };
}

/** Comma-separated ports 1..65535. */
function portList(): EnvParser<readonly number[]> {
  const one = int({ min: 1, max: 65535 });
  return {
    expected: 'comma-separated ports 1..65535',
    parse: (raw) => raw.split(',').map((p) => one.parse(p.trim())),
    format: (v) => v.join(','),
  };
}

/** Comma-separated absolute paths. */
function pathList(): EnvParser<readonly string[]> {
  return {
    expected: 'comma-separated absolute paths',
    parse: (raw) =>
      raw.split(',').map((p) => {
        if (!isAbsolute(p.trim())) throw new Error(`${p} is not absolute`);
        return p.trim();
      }),
    format: (v) => v.join(','),
  };
}

const spec = {
  logLevel: commonEnv.logLevel,
  shutdownGraceMs: commonEnv.shutdownGraceMs,
  metricsPort: commonEnv.metricsPort,
  servicePeersFile: commonEnv.servicePeersFile,
  runnerId: setting({
    name: 'BEDROCK_RUNNER_ID',
    parse: optional(str()),
    default: undefined,
    doc: 'Runner id in results and the runner registry; default `<hostname>-<random>`.',
  }),
  transport: setting({
    name: 'BEDROCK_TRANSPORT',
    parse: oneOf(['redis', 'memory'] as const),
    default: 'redis',
    doc: 'Queues and streams: Redis (distributed) or in-process.',
  }),
  redisUrl: setting({
    name: 'REDIS_URL',
    parse: url({ protocols: ['redis', 'rediss'] }),
    default: new URL('redis://127.0.0.1:6379'),
    doc: 'Redis for queues, notification streams, cancel channel and runner registry.',
  }),
  consumeQueues: setting({
    name: 'BEDROCK_RUNNER_CONSUME',
    parse: bool(),
    default: true,
    doc: 'Consume the tool-exec queues; false serves only the gRPC ToolRunnerService.',
  }),
  grpcHost: setting({ name: 'BEDROCK_HOST', parse: str(), default: '0.0.0.0', doc: 'Interface the gRPC server binds to.' }),
  grpcPort: setting({
    name: 'BEDROCK_GRPC_PORT',
    parse: port(),
    default: 50053,
    doc: 'Port of the ToolRunnerService and grpc.health.v1 (0 = any free port).',
  }),
  concurrency: setting({
    name: 'BEDROCK_RUNNER_CONCURRENCY',
    parse: int({ min: 1, max: 256 }),
    default: 8,
    doc: 'Tool jobs run at once, per queue.',
  }),
  helperPath: setting({
    name: 'BEDROCK_SANDBOX_HELPER',
    parse: str(),
    default: DEFAULT_HELPER_PATH,
    doc: 'Path of the bedrock-sandbox helper executable.',
  }),
  scratch: setting({
    name: 'BEDROCK_SANDBOX_SCRATCH',
    parse: bool(),
    default: true,
    doc: 'Give every command a private writable scratch (TMPDIR and HOME), gone when it ends.',
  }),
  scratchRoot: setting({
    name: 'BEDROCK_SANDBOX_SCRATCH_ROOT',
    parse: str(),
    default: join(tmpdir(), `bedrock-scratch-${process.getuid?.() ?? 0}`),
    doc: "Where each run's private scratch (TMPDIR and HOME) lives: a tmpfs mounted per run in a private mount namespace when the runner may mount (root), else a directory per run under it. Created 0711 at start; must not contain working directories.",
  }),
  toolUid: setting({
    name: 'BEDROCK_TOOL_UID',
    parse: toolUid(),
    default: 65534 as number | 'owner',
    doc: "The user tools run as (never 0, never the runner's own): a uid, or `owner` = the working directory's owner unless that is root (single-user machines). Needs a runner with CAP_SETUID/CAP_SETGID; otherwise tools run as the runner's uid and the runner says so at start.",
  }),
  toolGid: setting({
    name: 'BEDROCK_TOOL_GID',
    parse: int({ min: 1, max: 2 ** 32 - 2 }),
    default: 65534,
    doc: 'The group tools run as (no supplementary groups).',
  }),
  unrestrictedWrite: setting({
    name: 'BEDROCK_UNRESTRICTED_WRITE',
    parse: oneOf(['workspace', 'host'] as const),
    default: 'workspace',
    doc: 'What Unrestricted tools may write: `workspace` = the working directory, their scratch and home (Landlock); `host` = anything the tool user may write (single-user machines).',
  }),
  toolDenyPorts: setting({
    name: 'BEDROCK_TOOL_DENY_PORTS',
    parse: portList(),
    default: [5432, 6379, 50051, 50052, 50053] as readonly number[],
    doc: "TCP ports tools may never connect to, on any address (Landlock ABI 4+): the system's own Postgres, Redis and internal gRPC ports. The port of REDIS_URL and the runner's own gRPC and metrics ports are always added.",
  }),
  toolHidePaths: setting({
    name: 'BEDROCK_TOOL_HIDE_PATHS',
    parse: pathList(),
    default: ['/run/postgresql', '/var/run/postgresql', '/run/redis', '/var/run/redis'] as readonly string[],
    doc: 'Comma-separated paths hidden from tools under an empty read-only tmpfs (local database sockets), when the runner may mount.',
  }),
  pidsCgroup: setting({
    name: 'BEDROCK_PIDS_CGROUP',
    parse: str(),
    default: 'auto',
    doc: '`auto`, `off`, or a pids cgroup directory to create per-run cgroups in (bounds the process count even for root).',
  }),
  warmHelpers: setting({
    name: 'BEDROCK_SANDBOX_WARM_HELPERS',
    parse: int({ min: 0, max: 64 }),
    default: 2,
    doc: "Sandbox helpers kept started ahead of their runs, each already in its own fresh pids cgroup, so that joining the cgroup (about 10 ms) is off the runs' critical path; a run finding none starts its own (0 = always).",
  }),
  restrictedMemory: setting({
    name: 'BEDROCK_RESTRICTED_MEMORY_BYTES',
    parse: int({ min: 64 * 1024 ** 2 }),
    default: DEFAULT_RESTRICTED_LIMITS.memoryBytes,
    doc: 'Restricted: address-space limit per process, bytes.',
  }),
  restrictedCpu: setting({
    name: 'BEDROCK_RESTRICTED_CPU_SECONDS',
    parse: int({ min: 1 }),
    default: DEFAULT_RESTRICTED_LIMITS.cpuSeconds,
    doc: 'Restricted: CPU time per process, seconds.',
  }),
  restrictedProcesses: setting({
    name: 'BEDROCK_RESTRICTED_PROCESSES',
    parse: int({ min: 8 }),
    default: DEFAULT_RESTRICTED_LIMITS.processes,
    doc: 'Restricted: processes per tool call.',
  }),
  restrictedFileSize: setting({
    name: 'BEDROCK_RESTRICTED_FILE_SIZE_BYTES',
    parse: int({ min: 1 }),
    default: DEFAULT_RESTRICTED_LIMITS.fileSizeBytes,
    doc: 'Restricted: largest file written (scratch only), bytes.',
  }),
  restrictedOpenFiles: setting({
    name: 'BEDROCK_RESTRICTED_OPEN_FILES',
    parse: int({ min: 16 }),
    default: DEFAULT_RESTRICTED_LIMITS.openFiles,
    doc: 'Restricted: open files per process.',
  }),
  unrestrictedMemory: setting({
    name: 'BEDROCK_UNRESTRICTED_MEMORY_BYTES',
    parse: int({ min: 64 * 1024 ** 2 }),
    default: DEFAULT_UNRESTRICTED_LIMITS.memoryBytes,
    doc: 'Unrestricted: address-space limit per process, bytes.',
  }),
  unrestrictedCpu: setting({
    name: 'BEDROCK_UNRESTRICTED_CPU_SECONDS',
    parse: int({ min: 1 }),
    default: DEFAULT_UNRESTRICTED_LIMITS.cpuSeconds,
    doc: 'Unrestricted: CPU time per process, seconds.',
  }),
  unrestrictedProcesses: setting({
    name: 'BEDROCK_UNRESTRICTED_PROCESSES',
    parse: int({ min: 8 }),
    default: DEFAULT_UNRESTRICTED_LIMITS.processes,
    doc: 'Unrestricted: processes per tool call.',
  }),
  unrestrictedFileSize: setting({
    name: 'BEDROCK_UNRESTRICTED_FILE_SIZE_BYTES',
    parse: int({ min: 1 }),
    default: DEFAULT_UNRESTRICTED_LIMITS.fileSizeBytes,
    doc: 'Unrestricted: largest file written, bytes.',
  }),
  unrestrictedOpenFiles: setting({
    name: 'BEDROCK_UNRESTRICTED_OPEN_FILES',
    parse: int({ min: 16 }),
    default: DEFAULT_UNRESTRICTED_LIMITS.openFiles,
    doc: 'Unrestricted: open files per process.',
  }),
  outputHeadBytes: setting({
    name: 'BEDROCK_OUTPUT_HEAD_BYTES',
    parse: int({ min: 0 }),
    default: 50_000,
    doc: 'Bytes of command output kept from the start.',
  }),
  outputTailBytes: setting({
    name: 'BEDROCK_OUTPUT_TAIL_BYTES',
    parse: int({ min: 0 }),
    default: 50_000,
    doc: 'Bytes of command output kept from the end.',
  }),
  outputFlushMs: setting({
    name: 'BEDROCK_OUTPUT_FLUSH_MS',
    parse: int({ min: 10 }),
    default: 250,
    doc: 'Live output goes to the notification stream at most this often, ms.',
  }),
  outputStreamMaxBytes: setting({
    name: 'BEDROCK_OUTPUT_STREAM_MAX_BYTES',
    parse: int({ min: 0 }),
    default: 1_000_000,
    doc: 'Live output streamed per tool call at most, bytes.',
  }),
  reportIntervalMs: setting({
    name: 'BEDROCK_RUNNER_REPORT_INTERVAL_MS',
    parse: int({ min: 100 }),
    default: 10_000,
    doc: 'Capabilities re-report period, ms (forgotten after 3 missed).',
  }),
};

export function readToolRunnerConfig(env: Record<string, string | undefined> = process.env): ToolRunnerConfig {
  const v = readEnv(spec, env);
  return {
    runnerId: v.runnerId ?? `${hostname()}-${randomBytes(3).toString('hex')}`,
    transport: v.transport,
    redisUrl: v.redisUrl.href,
    consumeQueues: v.consumeQueues,
    grpcHost: v.grpcHost,
    grpcPort: v.grpcPort,
    metricsPort: v.metricsPort,
    concurrency: v.concurrency,
    helperPath: v.helperPath,
    scratch: v.scratch,
    scratchRoot: v.scratchRoot,
    toolUid: v.toolUid,
    toolGid: v.toolGid,
    unrestrictedWrite: v.unrestrictedWrite,
    toolDenyPorts: v.toolDenyPorts,
    toolHidePaths: v.toolHidePaths,
    pidsCgroup: v.pidsCgroup,
    warmHelpers: v.warmHelpers,
    restrictedLimits: {
      memoryBytes: v.restrictedMemory,
      cpuSeconds: v.restrictedCpu,
      processes: v.restrictedProcesses,
      fileSizeBytes: v.restrictedFileSize,
      openFiles: v.restrictedOpenFiles,
    },
    unrestrictedLimits: {
      memoryBytes: v.unrestrictedMemory,
      cpuSeconds: v.unrestrictedCpu,
      processes: v.unrestrictedProcesses,
      fileSizeBytes: v.unrestrictedFileSize,
      openFiles: v.unrestrictedOpenFiles,
    },
    outputHeadBytes: v.outputHeadBytes,
    outputTailBytes: v.outputTailBytes,
    outputFlushMs: v.outputFlushMs,
    outputStreamMaxBytes: v.outputStreamMaxBytes,
    reportIntervalMs: v.reportIntervalMs,
    shutdownGraceMs: v.shutdownGraceMs,
    logLevel: v.logLevel,
    servicePeersFile: v.servicePeersFile,
  };
}

/** The spec, for docs (envMarkdownTable). */
export const toolRunnerEnv = spec;

/** Every field at its default, with overrides (tests, embedding). */
export function defaultToolRunnerConfig(overrides: Partial<ToolRunnerConfig> = {}): ToolRunnerConfig {
  return { ...readToolRunnerConfig({}), ...overrides };
}
