/**
 * The tool-runner's settings: one schema, nested per concern, read from the environment and
 * typed overrides from code (`readToolRunnerConfig`, which fails fast naming every bad
 * variable). docs/tool-runner.md holds the table generated from it (test/docs.test.ts).
 * Durations are milliseconds and sizes bytes in code; the environment writes them with their
 * unit (`250ms`, `30m`, `4GiB`).
 */
import { hostname, tmpdir } from 'node:os';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { join } from 'node:path';
import {
  toolUidRangeSetting,
  bool,
  duration,
  filePath,
  int,
  list,
  loadConfig,
  logLevelSetting,
  oneOf,
  optionalSetting,
  path,
  port,
  secretKey,
  section,
  serverSection,
  servicePeersFileSetting,
  setting,
  size,
  str,
  transportSection,
  z,
} from '@bedrock/platform/config';
import type { ConfigOverrides, SettingType } from '@bedrock/platform/config';

/** The helper built by `npm run build -w services/tool-runner`. */
export const DEFAULT_HELPER_PATH = fileURLToPath(new URL('../bin/bedrock-sandbox', import.meta.url));

/** Per runner uid, so that runners of different users never share one. */
const DEFAULT_SCRATCH_ROOT = join(tmpdir(), `bedrock-scratch-${process.getuid?.() ?? 0}`);

/** A machine-specific default shown in the docs as `shown` (the generated table is the same on every machine). */
function withShownDefault<T>(type: SettingType<T>, actual: T, shown: string): SettingType<T> {
  return { ...type, format: (value) => (value === actual ? shown : type.format ? type.format(value) : String(value)) };
}

/** A uid ≥ 1, or `owner`. */
const toolUid: SettingType<number | 'owner'> = {
  expected: 'a uid ≥ 1, or owner',
  schema: oneOf(['owner'] as const).schema.or(int({ min: 1, max: 2 ** 32 - 2 }).schema),
};

/** A positive number of CPUs, fractions allowed (`0.5`, `2`). */
const cpus: SettingType<number> = {
  expected: 'a number of CPUs > 0, such as 0.5 or 2',
  schema: z
    .unknown()
    .transform((value, ctx) => {
      if (typeof value !== 'string') return value;
      if (!/^\d+(\.\d+)?$/.test(value.trim())) {
        ctx.addIssue({ code: 'custom', message: 'not a number' });
        return z.NEVER;
      }
      return Number(value);
    })
    .pipe(z.number().min(0.01, 'at least 0.01').max(4096)) as unknown as z.ZodType<number, unknown>,
};

/** The system directories a workspace run sees (its view) and may read. */
export const DEFAULT_VIEW_PATHS = ['/usr', '/bin', '/sbin', '/lib', '/lib32', '/lib64', '/libx32', '/etc', '/opt'];

const GiB = 1024 ** 3;
const MiB = 1024 ** 2;

export type { UidRange } from '@bedrock/platform/config';

/** The setrlimit limits of one mode (and the pids cgroup's limit), see sandbox/limits.ts. */
function limitsSection(
  mode: 'RESTRICTED' | 'UNRESTRICTED',
  defaults: { memory: number; cpuTime: number; processes: number; fileSize: number; openFiles: number; cpus: number },
  fileSizeNote: string,
) {
  const label = mode === 'RESTRICTED' ? 'Restricted' : 'Unrestricted';
  return section({
    /** Memory of one tool call (memory cgroup: memory.max, tmpfs pages included, no swap), bytes; without a memory cgroup, RLIMIT_AS per process. */
    memory: setting(`BEDROCK_${mode}_MEMORY`, size({ min: 64 * MiB }), {
      default: defaults.memory,
      doc: `${label}: memory per tool call, its scratch's pages included (memory cgroup: memory.max, no swap); where the runner has no memory cgroup, the address-space limit per process (RLIMIT_AS).`,
    }),
    /** CPUs' worth of time one tool call may use at once (cpu cgroup: cpu.max). */
    cpus: setting(`BEDROCK_${mode}_CPUS`, cpus, {
      default: defaults.cpus,
      doc: `${label}: CPUs one tool call may use at once (cpu cgroup: cpu.max, or cfs_quota_us on cgroup v1).`,
    }),
    /** CPU time per process (RLIMIT_CPU), ms; the helper gets whole seconds, rounded up. */
    cpuTime: setting(`BEDROCK_${mode}_CPU_TIME`, duration({ min: 1000 }), {
      default: defaults.cpuTime,
      doc: `${label}: CPU time per process (whole seconds, rounded up).`,
    }),
    /** Processes in one tool call's tree. */
    processes: setting(`BEDROCK_${mode}_PROCESSES`, int({ min: 8 }), {
      default: defaults.processes,
      doc: `${label}: processes per tool call.`,
    }),
    /** Largest file written (RLIMIT_FSIZE), bytes. */
    fileSize: setting(`BEDROCK_${mode}_FILE_SIZE`, size({ min: 1 }), {
      default: defaults.fileSize,
      doc: `${label}: largest file written${fileSizeNote}.`,
    }),
    /** Open files per process (RLIMIT_NOFILE). */
    openFiles: setting(`BEDROCK_${mode}_OPEN_FILES`, int({ min: 16 }), {
      default: defaults.openFiles,
      doc: `${label}: open files per process.`,
    }),
  });
}

export const toolRunnerConfigSchema = section({
  log: section({ level: logLevelSetting }),
  server: serverSection({
    grpcPort: setting('BEDROCK_GRPC_PORT', port(), {
      default: 50053,
      doc: 'Port of the ToolRunnerService and grpc.health.v1 (0 = any free port).',
    }),
    servicePeersFile: servicePeersFileSetting,
  }),
  transport: transportSection,
  runner: section({
    /** Unique per process; in results, the run ledger and the runner registry. Unset: `<hostname>-<random>`. */
    id: optionalSetting('BEDROCK_RUNNER_ID', str(), {
      doc: 'Runner id in results, the run ledger and the runner registry; unique per process. Unset: `<hostname>-<random>`, new at each start.',
    }),
    consume: setting('BEDROCK_RUNNER_CONSUME', bool(), {
      default: true,
      doc: 'Consume the tool-exec queues; false serves only the gRPC ToolRunnerService.',
    }),
    concurrency: setting('BEDROCK_RUNNER_CONCURRENCY', int({ min: 1, max: 256 }), {
      default: 8,
      doc: 'Tool jobs run at once, per queue.',
    }),
    /** Capabilities are re-reported this often, ms; the registry forgets a runner after 3 missed reports. */
    reportInterval: setting('BEDROCK_RUNNER_REPORT_INTERVAL', duration({ min: 100 }), {
      default: 10_000,
      doc: 'Capabilities are re-reported this often; the registry forgets a runner after 3 missed reports.',
    }),
  }),
  sandbox: section({
    helper: setting(
      'BEDROCK_SANDBOX_HELPER',
      withShownDefault(filePath(), DEFAULT_HELPER_PATH, 'services/tool-runner/bin/bedrock-sandbox'),
      {
        default: DEFAULT_HELPER_PATH,
        doc: 'Path of the bedrock-sandbox helper executable (built by `npm run build -w services/tool-runner`).',
      },
    ),
    scratch: setting('BEDROCK_SANDBOX_SCRATCH', bool(), {
      default: true,
      doc: 'Give every command a private writable scratch (TMPDIR and HOME), gone when it ends.',
    }),
    scratchRoot: setting(
      'BEDROCK_SANDBOX_SCRATCH_ROOT',
      withShownDefault(path(), DEFAULT_SCRATCH_ROOT, '<os temp dir>/bedrock-scratch-<runner uid>'),
      {
        default: DEFAULT_SCRATCH_ROOT,
        doc: "Where each run's scratch lives: a tmpfs mounted there per run in a private mount namespace (runner with CAP_SYS_ADMIN), else a `bedrock-run-*` directory per run under it. Created 0711 at start; must not contain working directories.",
      },
    ),
    toolUid: setting('BEDROCK_TOOL_UID', toolUid, {
      default: 65534,
      doc: "The user tools run as (never 0, never the runner's own); `owner` = the working directory's owner unless that is root (single-user machines; see security.md). Needs CAP_SETUID/CAP_SETGID, else tools run as the runner's uid and it says so at start.",
    }),
    toolGid: setting('BEDROCK_TOOL_GID', int({ min: 1, max: 2 ** 32 - 2 }), {
      default: 65534,
      doc: 'The group tools run as (no supplementary groups).',
    }),
    viewPaths: setting('BEDROCK_VIEW_PATHS', list(path()), {
      default: DEFAULT_VIEW_PATHS,
      doc: "System directories a workspace tool sees (read-only, those that exist) and may read, besides its workspace, scratch, /dev and /proc: its view's root when the runner may mount, Landlock's read rules always.",
    }),
    scratchSize: setting('BEDROCK_SCRATCH_SIZE', size({ min: 1 * MiB }), {
      default: 256 * MiB,
      doc: "Size of each run's scratch tmpfs (TMPDIR and HOME); a write past it fails with ENOSPC. Its pages count against the run's memory too.",
    }),
    scratchInodes: setting('BEDROCK_SCRATCH_INODES', int({ min: 64 }), {
      default: 65_536,
      doc: "Files and directories each run's scratch tmpfs may hold (nr_inodes).",
    }),
    unrestrictedWrite: setting('BEDROCK_UNRESTRICTED_WRITE', oneOf(['workspace', 'host'] as const), {
      default: 'workspace',
      doc: 'What Unrestricted tools may write: the working directory, their scratch and home (Landlock), or anything the tool user may write (`host`, single-user machines).',
    }),
    denyPorts: setting(
      'BEDROCK_TOOL_DENY_PORTS',
      { ...list(int({ min: 1, max: 65535 })), expected: 'ports 1..65535, comma-separated' },
      {
        default: [5432, 6379, 50051, 50052, 50053],
        doc: "TCP ports tools may never connect to, on any address (Landlock ABI 4+): the system's own Postgres, Redis and internal gRPC ports. The port of REDIS_URL and the runner's own gRPC and metrics ports are always added.",
      },
    ),
    hidePaths: setting('BEDROCK_TOOL_HIDE_PATHS', list(path()), {
      default: ['/run/postgresql', '/var/run/postgresql', '/run/redis', '/var/run/redis'],
      doc: 'Paths hidden from tools under an empty read-only tmpfs (local database sockets), when the runner may mount.',
    }),
    pidsCgroup: setting('BEDROCK_PIDS_CGROUP', str('`auto`, `off` or a directory'), {
      default: 'auto',
      doc: "Where per-run cgroups are created: `auto` finds writable hierarchies under the runner's own cgroup (cgroup v2 with pids, memory and cpu delegated, or the v1 `pids`, `memory` and `cpu` hierarchies) and bounds each run's processes, memory and CPU; a directory: a pids hierarchy only.",
    }),
    warmHelpers: setting('BEDROCK_SANDBOX_WARM_HELPERS', int({ min: 0, max: 64 }), {
      default: 2,
      doc: "Sandbox helpers kept started ahead of their runs, each already in its own fresh pids cgroup, so that joining the cgroup (about 10 ms) is off the runs' critical path; a run finding none starts its own (0 = always).",
    }),
    spawner: setting('BEDROCK_SANDBOX_SPAWNER', oneOf(['process', 'inline'] as const), {
      default: 'process',
      doc: "Who starts the waiting sandbox helpers: `process`, a small spawner process the runner starts once (16 MiB heap), which hands their pipes back, so that no fork blocks the runner's event loop (restarted when it dies; Node only: under Deno the runner always starts them itself); `inline`, the runner itself (each fork blocks it about 3 ms).",
    }),
  }),
  workspaces: section({
    /** Where workspaces live (ROOT/<workspace id>); every runner of a deployment mounts the same one. */
    root: setting('BEDROCK_WORKSPACE_ROOT', path(), {
      default: '/var/lib/bedrock/workspaces',
      doc: "Where the workspaces' directories live (ROOT/ws-…), shared by every runner of a deployment: on btrfs with quotas each is a subvolume with a disk quota, elsewhere a plain directory without one (docs/workspaces.md). Created 0711 at start.",
    }),
    /** A btrfs image file loop-mounted on the root at start (created when absent). */
    image: optionalSetting('BEDROCK_WORKSPACE_IMAGE', path(), {
      doc: 'A file holding a btrfs filesystem that the runner creates (mkfs.btrfs, sparse) when absent and loop-mounts on BEDROCK_WORKSPACE_ROOT at start, with quotas on: per-workspace quotas on a host whose root is not btrfs. Needs root.',
    }),
    /** Size of a new image (sparse: the file takes only what is written). */
    imageSize: setting('BEDROCK_WORKSPACE_IMAGE_SIZE', size({ min: 256 * MiB }), {
      default: 20 * GiB,
      doc: 'Size of the image BEDROCK_WORKSPACE_IMAGE creates (a sparse file: disk is used as workspaces fill); an existing image is used as it is.',
    }),
    /** The uids (and gids) a workspace may be given, and its tools run as. */
    toolUids: toolUidRangeSetting,
    /** A git clone into a new workspace is killed after this long. */
    cloneTimeout: setting('BEDROCK_WORKSPACE_CLONE_TIMEOUT', duration({ min: 1000 }), {
      default: 10 * 60_000,
      doc: 'A git clone into a new workspace is killed after this long (the half workspace is removed).',
    }),
  }),
  limits: section({
    /** Restricted: read-only exploration; only the scratch is writable. */
    restricted: limitsSection(
      'RESTRICTED',
      { memory: 4 * GiB, cpuTime: 30 * 60_000, processes: 256, fileSize: 256 * MiB, openFiles: 1024, cpus: 1 },
      ' (scratch only)',
    ),
    /** Unrestricted: builds and test suites; still bounded so that one tool cannot take the node down. */
    unrestricted: limitsSection(
      'UNRESTRICTED',
      { memory: 16 * GiB, cpuTime: 30 * 60_000, processes: 2048, fileSize: 8 * GiB, openFiles: 8192, cpus: 2 },
      '',
    ),
  }),
  /** Remote MCP servers (docs/mcp.md). */
  mcp: section({
    tokenKey: optionalSetting('BEDROCK_MCP_TOKEN_KEY', secretKey(), {
      doc: "Key (32 bytes: base64, or an absolute path of a file holding them) that opens the users' OAuth access tokens the conversation service sends with remote MCP calls; the same key as the conversation service's. Unset: remote servers that need a login cannot be used on this runner.",
    }),
  }),
  output: section({
    /** Bytes of command output kept from the start. */
    head: setting('BEDROCK_OUTPUT_HEAD', size(), { default: 50_000, doc: 'Command output kept from the start.' }),
    /** Bytes of command output kept from the end. */
    tail: setting('BEDROCK_OUTPUT_TAIL', size(), { default: 50_000, doc: 'Command output kept from the end.' }),
    /** Live output goes to the notification stream at most this often, ms. */
    flushInterval: setting('BEDROCK_OUTPUT_FLUSH_INTERVAL', duration({ min: 10 }), {
      default: 250,
      doc: 'Live output goes to the notification stream at most this often (the first append at once).',
    }),
    /** Live output streamed per tool call at most (counted in characters). */
    streamMax: setting('BEDROCK_OUTPUT_STREAM_MAX', size(), {
      default: 1_000_000,
      doc: 'Live output streamed per tool call at most, counted in characters (the result keeps head and tail anyway).',
    }),
  }),
});

type LoadedConfig = z.output<typeof toolRunnerConfigSchema>;

/** The runner's settings; `runner.id` always set (generated when BEDROCK_RUNNER_ID is unset). */
export type ToolRunnerConfig = LoadedConfig & { readonly runner: { readonly id: string } };
/** What code may set over the environment (tests, the embedded mode). */
export type ToolRunnerConfigOverrides = ConfigOverrides<LoadedConfig>;
export type SandboxConfig = ToolRunnerConfig['sandbox'];
export type LimitsConfig = ToolRunnerConfig['limits'];
export type WorkspacesConfig = ToolRunnerConfig['workspaces'];

/**
 * Reads the settings from `env`, then applies `overrides` (typed, from code: tests, the embedded
 * mode); with `env = {}` every unset setting has its default.
 * @throws ConfigError naming every missing or invalid variable.
 */
export function readToolRunnerConfig(
  env: Record<string, string | undefined> = process.env,
  overrides: ToolRunnerConfigOverrides = {},
): ToolRunnerConfig {
  const config = loadConfig(toolRunnerConfigSchema, env, overrides);
  return { ...config, runner: { ...config.runner, id: config.runner.id ?? `${hostname()}-${randomBytes(3).toString('hex')}` } };
}
