/**
 * Load test of tool-runners (`make loadtest-tool-runner`, docs/tool-runner.md "Load testing"):
 *
 *   npx tsx services/tool-runner/bench/loadtest.ts [--path grpc|queue] [--concurrency 8]
 *     [--warmup 3] [--duration 20] [--requests N] [--mix bash:8,think:2,keyword_search:1,patch:1]
 *     [--mode unrestricted|restricted] [--bash-command "echo ok"] [--report FILE]
 *     [--url http://127.0.0.1:50053 --token-file FILE] [--redis-url redis://127.0.0.1:6379]
 *     [--redis-prefix PREFIX] [--runner-pid PID] [--runner-env NAME=VALUE ...] [--runner-build bundle|source]
 *
 * With no --url (gRPC) or --redis-prefix (queue), it starts its own runner: the real service as a
 * child process (the production bundle, built here, unless --runner-build source), default
 * settings but loopback and ephemeral ports, service credentials of its own (and for the queue
 * path a Redis prefix of its own, deleted afterwards), so that the runner's CPU and peak RSS
 * come from /proc apart from the load generator's. It warms up, runs
 * for the duration, and prints throughput, latency percentiles, errors by kind and the runner's
 * CPU and memory; --report writes the same figures as JSON.
 *
 * grpc: ExecuteTool on the ToolRunnerService, presenting a service token the runner lists as a
 * peer. queue: ToolExecJobs on `tool-exec` (or `tool-exec-restricted`), results read from
 * `conversation-events` as the conversation service reads them (this consumes that queue: use a
 * prefix no deployment uses). Bounded: at most 600 s, 256 workers, and only local targets.
 */
import { chmodSync, chownSync, existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, release, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { create } from '@bufbuild/protobuf';
import { Code, ConnectError, createClient } from '@connectrpc/connect';
import { createGrpcTransport } from '@connectrpc/connect-node';
import { Redis } from 'ioredis';
import {
  ConversationEventJobSchema,
  Mode,
  QUEUE_CONVERSATION_EVENTS,
  QUEUE_TOOL_EXEC,
  QUEUE_TOOL_EXEC_RESTRICTED,
  ToolExecJobSchema,
  ToolRunnerService,
  toolExecJobId,
} from '@bedrock/contracts';
import type { RunnerCapabilities, ToolCompleteEvent, ToolExecJob } from '@bedrock/contracts';
import { createRedisTransport } from '@bedrock/platform';
import type { Transport } from '@bedrock/platform';
import { readServiceTokenFile, serviceTokenInterceptor } from '@bedrock/platform/server';
import { RunnerStartError, describeExit, diagnosis, readProcessCpu, readProcessMemory, startOwnRunner } from './loadtest-runner.ts';
import type { OwnRunner, ProcessCpu } from './loadtest-runner.ts';
import { fmtMs, quantile } from './stats.ts';

/** Wrong usage: one line, exit 2. */
function fail(message: string): never {
  console.error(`loadtest: ${message}`);
  process.exit(2);
}

let parsed;
try {
  parsed = parseArgs({
    options: {
      path: { type: 'string', default: 'grpc' },
      concurrency: { type: 'string', default: '8' },
      warmup: { type: 'string', default: '3' },
      duration: { type: 'string', default: '20' },
      requests: { type: 'string', default: '0' },
      mix: { type: 'string', default: 'bash:8,think:2' },
      mode: { type: 'string', default: 'unrestricted' },
      url: { type: 'string' },
      /** The former name of --url. */
      target: { type: 'string' },
      'token-file': { type: 'string', default: process.env.BEDROCK_SERVICE_TOKEN_FILE ?? '' },
      'redis-url': { type: 'string', default: process.env.REDIS_URL || 'redis://127.0.0.1:6379' },
      'redis-prefix': { type: 'string' },
      'bash-command': { type: 'string', default: 'echo ok' },
      report: { type: 'string' },
      'runner-pid': { type: 'string' },
      'runner-env': { type: 'string', multiple: true, default: [] },
      'runner-build': { type: 'string', default: 'bundle' },
      help: { type: 'boolean', default: false },
    },
  });
} catch (err) {
  fail(`${(err as Error).message.split('\n')[0]} (--help for the options)`);
}
const args = parsed.values;

if (args.help) {
  console.log('see the header of services/tool-runner/bench/loadtest.ts, or docs/tool-runner.md ("Load testing")');
  process.exit(0);
}
const path = args.path;
if (path !== 'grpc' && path !== 'queue') fail('--path is grpc or queue');
const concurrency = Number(args.concurrency);
const warmupS = Number(args.warmup);
const durationS = Number(args.duration);
const maxRequests = Number(args.requests);
if (!Number.isInteger(concurrency) || concurrency < 1 || concurrency > 256) fail('--concurrency is 1..256');
if (!(durationS > 0 && durationS <= 600)) fail('--duration is more than 0 and at most 600 seconds');
if (!(warmupS >= 0 && warmupS <= 120)) fail('--warmup is 0..120 seconds');
if (!Number.isInteger(maxRequests) || maxRequests < 0) fail('--requests is a non-negative integer (0 = no cap)');
const mode =
  args.mode === 'restricted'
    ? Mode.RESTRICTED
    : args.mode === 'unrestricted'
      ? Mode.UNRESTRICTED
      : fail('--mode is restricted or unrestricted');
if (args.url && args.target && args.url !== args.target) fail('--target is the former name of --url: give one');
const url = args.url ?? args.target;
if (url && path === 'queue') fail('--url is for the gRPC path; the queue path reaches runners through --redis-url and --redis-prefix');
if (args['redis-prefix'] !== undefined && path === 'grpc') fail('--redis-prefix is for the queue path');
if (args['redis-prefix'] !== undefined && !/^[A-Za-z0-9._-]+$/.test(args['redis-prefix']))
  fail('--redis-prefix is letters, digits, ".", "_" or "-"');
/** The runner is started here unless the options name one already running. */
const startHere = path === 'grpc' ? url === undefined : args['redis-prefix'] === undefined;
const runnerEnv: Record<string, string> = {};
for (const entry of args['runner-env']) {
  const match = /^([A-Z_][A-Z0-9_]*)=(.*)$/s.exec(entry);
  if (!match) fail(`--runner-env takes NAME=VALUE, got ${entry}`);
  runnerEnv[match[1] as string] = match[2] as string;
}
const runnerBuild = args['runner-build'];
if (runnerBuild !== 'bundle' && runnerBuild !== 'source')
  fail('--runner-build is bundle (what the image runs) or source (src/main.ts through tsx)');
if (!startHere && args['runner-env'].length > 0)
  fail('--runner-env sets the settings of a runner started here: not with --url or --redis-prefix');
let runnerPid: number | undefined;
if (args['runner-pid'] !== undefined) {
  if (startHere) fail('--runner-pid is for a runner not started here (with --url or --redis-prefix)');
  runnerPid = Number(args['runner-pid']);
  if (!Number.isInteger(runnerPid) || runnerPid < 1 || !existsSync(`/proc/${runnerPid}/stat`))
    fail(`no process ${args['runner-pid']} to measure`);
}
const LOCAL = new Set(['127.0.0.1', 'localhost', '[::1]']);
for (const u of [url, args['redis-url']]) {
  if (u === undefined) continue;
  const host = URL.canParse(u)
    ? new URL(u).hostname
    : fail(`${u} is not a URL: write it like http://127.0.0.1:50053 or redis://127.0.0.1:6379`);
  if (!LOCAL.has(host)) fail(`only local targets are allowed, got ${u}`);
}

const TOOLS = ['bash', 'think', 'keyword_search', 'patch'] as const;
type Tool = (typeof TOOLS)[number];
const weights: Array<[Tool, number]> = args.mix.split(',').map((part) => {
  const [name, weight] = part.split(':');
  if (!TOOLS.includes(name as Tool)) fail(`unknown tool in --mix: ${name} (one of ${TOOLS.join(', ')})`);
  const w = Number(weight ?? 1);
  if (!(w > 0)) fail(`bad weight in --mix: ${part}`);
  return [name as Tool, w];
});
if (mode === Mode.RESTRICTED && weights.some(([t]) => t === 'patch'))
  console.warn('note: patch is refused in Restricted mode (counted as tool errors)');
const totalWeight = weights.reduce((s, [, w]) => s + w, 0);
function pickTool(): Tool {
  let r = Math.random() * totalWeight;
  for (const [tool, w] of weights) if ((r -= w) < 0) return tool;
  return weights[0]?.[0] as Tool;
}

// The tools' working directory. They run as the runner's tool user (65534 by default): it must be theirs.
const workDir = mkdtempSync(join(tmpdir(), 'bedrock-loadtest-'));
if (process.getuid?.() === 0) chownSync(workDir, 65534, 65534);
else chmodSync(workDir, 0o777);
writeFileSync(join(workDir, 'sample.txt'), 'alpha\nbeta needle gamma\ndelta\n');

// ---- what is cleaned up however the run ends -------------------------------------------------

let ownRunner: OwnRunner | undefined;
let executor: Executor | undefined;
let ownPrefix: string | undefined;

async function cleanUp(): Promise<void> {
  await executor?.close().catch(() => {});
  await ownRunner?.stop().catch(() => {});
  if (ownPrefix) await deleteRedisKeys(args['redis-url'], ownPrefix).catch(() => {});
  rmSync(workDir, { recursive: true, force: true });
}

/** The target cannot be used (or went away): one line, no stack trace, exit 1. */
async function unusable(message: string): Promise<never> {
  console.error(`loadtest: ${message}`);
  await cleanUp();
  process.exit(1);
}

// Ctrl-C (or npx passing on a SIGTERM): stop sending, wait for the calls in flight, print the
// figures so far and stop the runner started here. A second signal exits at once.
let interrupted = false;
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => {
    if (interrupted) process.exit(130);
    interrupted = true;
    console.error(`loadtest: ${signal === 'SIGINT' ? 'interrupted' : 'terminated'}, stopping`);
  });
}

async function deleteRedisKeys(redisUrl: string, prefix: string): Promise<void> {
  const redis = new Redis(redisUrl, { lazyConnect: true, maxRetriesPerRequest: 1 });
  try {
    await redis.connect();
    let cursor = '0';
    do {
      const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 1000);
      if (keys.length > 0) await redis.del(...keys);
      cursor = next;
    } while (cursor !== '0');
  } finally {
    redis.disconnect();
  }
}

// ---- the jobs ---------------------------------------------------------------------------------

const runId = `lt-${Date.now().toString(36)}`;
let seq = 0;

function makeJob(tool: Tool): ToolExecJob {
  const n = ++seq;
  const input =
    tool === 'bash'
      ? { command: args['bash-command'] }
      : tool === 'think'
        ? { thoughts: `load ${n}` }
        : tool === 'keyword_search'
          ? { query: 'load', search_terms: ['needle'] }
          : { path: `out/file-${n % 64}.txt`, patches: [{ operation: 'overwrite', new_text: `run ${n}\n` }] };
  return create(ToolExecJobSchema, {
    toolUseId: `${runId}-${n}`,
    conversationId: `${runId}-conv-${n % concurrency}`,
    toolName: tool,
    inputJson: JSON.stringify(input),
    cwd: workDir,
    mode,
  });
}

// ---- the two paths ----------------------------------------------------------------------------

interface Executor {
  execute(job: ToolExecJob): Promise<ToolCompleteEvent>;
  close(): Promise<void>;
  readonly describe: string;
  readonly capabilities?: RunnerCapabilities;
}

/** A transport failure of one request, by kind (low cardinality, for the error table). */
class RequestError extends Error {
  constructor(
    readonly kind: string,
    message: string,
  ) {
    super(message);
  }
}

async function grpcExecutor(target: string, token: string, tokenSource: string): Promise<Executor> {
  const client = createClient(ToolRunnerService, createGrpcTransport({ baseUrl: target, interceptors: [serviceTokenInterceptor(token)] }));
  let capabilities: RunnerCapabilities | undefined;
  try {
    ({ capabilities } = await client.getCapabilities({}, { timeoutMs: 5000 }));
  } catch (err) {
    const e = ConnectError.from(err);
    if (e.code === Code.Unauthenticated) {
      return unusable(
        `the runner at ${target} refused the service token in ${tokenSource}: list its SHA-256 in the runner's BEDROCK_SERVICE_PEERS_FILE (npx bedrock token hash "$(cat ${tokenSource})") and restart it`,
      );
    }
    if (e.code === Code.Unavailable || e.code === Code.DeadlineExceeded) {
      return unusable(
        `no tool-runner answers at ${target} (${e.rawMessage}); run without --url to start one here, or start one: BEDROCK_SERVICE_PEERS_FILE=... npx tsx services/tool-runner/src/main.ts`,
      );
    }
    return unusable(`GetCapabilities on ${target} failed: ${Code[e.code]}: ${e.rawMessage}`);
  }
  return {
    capabilities,
    describe: `gRPC ExecuteTool on ${target}`,
    async execute(job) {
      try {
        for await (const msg of client.executeTool({ job }, { timeoutMs: 120_000 })) {
          if (msg.kind.case === 'result') return msg.kind.value;
        }
      } catch (err) {
        const e = ConnectError.from(err);
        throw new RequestError(`grpc ${Code[e.code]}`, e.rawMessage);
      }
      throw new RequestError('grpc stream ended without a result', 'stream ended without a result');
    },
    async close() {},
  };
}

/** Transport whose Redis answers within `ms`, or a one-line exit. */
async function reachRedis(redisUrl: string, prefix: string, ms = 3000): Promise<Transport> {
  const transport = createRedisTransport({ redisUrl, prefix, onError: () => {} });
  // ping fails at once until the connection is ready: ask again until it answers or the time is up.
  const deadline = Date.now() + ms;
  let answered = false;
  while (!answered && Date.now() < deadline) {
    answered = await transport.ping!().then(
      () => true,
      () => false,
    );
    if (!answered) await new Promise((resolve) => setTimeout(resolve, 50));
  }
  if (!answered) {
    void transport.close().catch(() => {});
    return unusable(`Redis does not answer at ${redisUrl} (within ${ms / 1000} s): the queue path needs it`);
  }
  return transport;
}

async function queueExecutor(transport: Transport, prefix: string): Promise<Executor> {
  const runners = await transport.runners.list();
  if (runners.length === 0) {
    await transport.close();
    return unusable(
      `no tool-runner registered under Redis prefix "${prefix}": start one with BEDROCK_REDIS_PREFIX=${prefix}, or leave out --redis-prefix to start one here`,
    );
  }
  const queue = mode === Mode.RESTRICTED ? QUEUE_TOOL_EXEC_RESTRICTED : QUEUE_TOOL_EXEC;
  if (!runners.some((r) => r.queues.includes(queue))) {
    await transport.close();
    return unusable(`no runner under prefix "${prefix}" consumes ${queue}${mode === Mode.RESTRICTED ? ' (no kernel sandbox there)' : ''}`);
  }
  const producer = transport.queues.producer(queue, ToolExecJobSchema);
  const waiting = new Map<string, (r: ToolCompleteEvent) => void>();
  // As the conversation service does: tool results arrive as toolComplete events on conversation-events.
  const consumer = transport.queues.consume(
    QUEUE_CONVERSATION_EVENTS,
    ConversationEventJobSchema,
    async (job) => {
      if (job.data.event.case !== 'toolComplete') return;
      waiting.get(job.data.event.value.toolUseId)?.(job.data.event.value);
    },
    { concurrency: 64 },
  );
  return {
    capabilities: runners.find((r) => r.queues.includes(queue)),
    describe: `queue ${queue} → ${QUEUE_CONVERSATION_EVENTS} on ${args['redis-url']} prefix "${prefix}" (${runners.length} runner(s) registered)`,
    async execute(job) {
      const result = new Promise<ToolCompleteEvent>((resolve, reject) => {
        const timer = setTimeout(() => {
          waiting.delete(job.toolUseId);
          reject(new RequestError('queue: no result within 120 s', 'no result within 120 s'));
        }, 120_000);
        waiting.set(job.toolUseId, (r) => {
          clearTimeout(timer);
          waiting.delete(job.toolUseId);
          resolve(r);
        });
      });
      try {
        await producer.add(toolExecJobId(job.conversationId, job.toolUseId), job);
      } catch (err) {
        waiting.delete(job.toolUseId);
        throw new RequestError('queue: enqueue failed', (err as Error).message);
      }
      return result;
    },
    async close() {
      await consumer.close(0);
      await transport.close();
    },
  };
}

// ---- start ------------------------------------------------------------------------------------

if (path === 'queue') {
  const prefix = args['redis-prefix'] ?? `bedrock-loadtest-${process.pid}-${Math.random().toString(36).slice(2, 8)}`;
  // Redis first: a runner started here could not take work without it.
  const transport = await reachRedis(args['redis-url'], prefix);
  if (startHere) {
    ownPrefix = prefix;
    try {
      ownRunner = await startOwnRunner({
        consume: true,
        redisUrl: args['redis-url'],
        redisPrefix: prefix,
        env: runnerEnv,
        build: runnerBuild,
      });
    } catch (err) {
      await transport.close();
      if (err instanceof RunnerStartError) await unusable(err.message);
      throw err;
    }
  }
  executor = await queueExecutor(transport, prefix);
} else if (startHere) {
  try {
    ownRunner = await startOwnRunner({ consume: false, redisUrl: args['redis-url'], redisPrefix: '', env: runnerEnv, build: runnerBuild });
  } catch (err) {
    if (err instanceof RunnerStartError) await unusable(err.message);
    throw err;
  }
  executor = await grpcExecutor(ownRunner.grpcUrl, ownRunner.token, 'the token made for it');
} else {
  const tokenFile = args['token-file'];
  if (!tokenFile) {
    await cleanUp();
    fail(
      "--url needs a service token: --token-file FILE (or BEDROCK_SERVICE_TOKEN_FILE), a token whose SHA-256 is listed in the runner's BEDROCK_SERVICE_PEERS_FILE (or leave out --url to start a runner here)",
    );
  }
  let token: string;
  try {
    token = readServiceTokenFile(tokenFile);
  } catch (err) {
    await cleanUp();
    fail((err as Error).message.replace('BEDROCK_SERVICE_TOKEN_FILE=', '--token-file '));
  }
  executor = await grpcExecutor(url as string, token, tokenFile);
}

const measuredPid = ownRunner?.pid ?? runnerPid;
const caps = executor.capabilities;
const runnerLine = ownRunner
  ? `runner ${ownRunner.runnerId} started here (${ownRunner.build === 'bundle' ? 'production bundle' : 'source through tsx'}, pid ${ownRunner.pid}, default settings${Object.keys(runnerEnv).length ? ` but ${Object.keys(runnerEnv).join(', ')}` : ''})`
  : `runner ${caps?.runnerId ?? '?'}${runnerPid ? ` (pid ${runnerPid})` : ''}`;
const sandboxLine = caps ? (caps.sandboxAvailable ? `sandbox Landlock ABI ${caps.landlockAbi}` : 'sandbox unavailable') : '';
const machine = {
  cpus: cpus().length,
  cpuModel: cpus()[0]?.model ?? 'unknown',
  kernel: release(),
  node: process.version,
  loadAverage1m: Number(loadavg()[0]?.toFixed(2)),
};
console.log(`load test: ${executor.describe}`);
console.log(`  ${runnerLine}, ${sandboxLine}`);
console.log(
  `  ${concurrency} workers, ${warmupS} s warm-up then ${durationS} s${maxRequests ? ` (at most ${maxRequests} requests)` : ''}, mix ${args.mix}, mode ${args.mode}`,
);
console.log(`  machine: ${machine.cpus} CPUs (${machine.cpuModel}), load average ${machine.loadAverage1m}`);

// ---- the run ----------------------------------------------------------------------------------

interface Phase {
  readonly latencies: Map<Tool, number[]>;
  readonly errors: Map<string, number>;
  readonly samples: Set<string>;
  completed: number;
  transportErrors: number;
  toolErrors: number;
  started: number;
  elapsedS: number;
}

/** Why a completed call counts as an error, or undefined. */
function resultErrorKind(tool: Tool, result: ToolCompleteEvent): string | undefined {
  let display: { timedOut?: boolean; interrupted?: boolean } = {};
  try {
    display = result.displayJson ? (JSON.parse(result.displayJson) as typeof display) : {};
  } catch {
    // not JSON: no detail
  }
  if (result.cancelled) return `tool cancelled: ${tool}`;
  if (display.interrupted) return `tool interrupted: ${tool}`;
  if (display.timedOut) return `tool timed out: ${tool}`;
  return result.isError ? `tool is_error: ${tool}` : undefined;
}

function runnerGone(): string | undefined {
  const exit = ownRunner?.exited();
  return exit ? `the runner started here exited during the run (${describeExit(exit)}): ${diagnosis(ownRunner!.lastLines())}` : undefined;
}

async function runPhase(seconds: number, cap: number): Promise<Phase> {
  const phase: Phase = {
    latencies: new Map(),
    errors: new Map(),
    samples: new Set(),
    completed: 0,
    transportErrors: 0,
    toolErrors: 0,
    started: 0,
    elapsedS: 0,
  };
  const t0 = performance.now();
  const deadline = t0 + seconds * 1000;
  const exec = executor!;
  const worker = async () => {
    while (performance.now() < deadline && (cap === 0 || phase.started < cap) && !interrupted && !runnerGone()) {
      const tool = pickTool();
      const job = makeJob(tool);
      phase.started++;
      const start = performance.now();
      try {
        const result = await exec.execute(job);
        const ms = performance.now() - start;
        (phase.latencies.get(tool) ?? phase.latencies.set(tool, []).get(tool))?.push(ms);
        phase.completed++;
        const kind = resultErrorKind(tool, result);
        if (kind) {
          phase.toolErrors++;
          phase.errors.set(kind, (phase.errors.get(kind) ?? 0) + 1);
          if (phase.samples.size < 3) phase.samples.add(`${tool}: ${result.content.slice(0, 120)}`);
        }
      } catch (err) {
        phase.transportErrors++;
        const kind = err instanceof RequestError ? err.kind : 'other';
        phase.errors.set(kind, (phase.errors.get(kind) ?? 0) + 1);
        if (phase.samples.size < 3) phase.samples.add(`${tool}: ${(err as Error).message.slice(0, 120)}`);
        // A runner that went away: do not spin.
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    }
  };
  await Promise.all(Array.from({ length: concurrency }, () => worker()));
  phase.elapsedS = (performance.now() - t0) / 1000;
  return phase;
}

if (warmupS > 0) await runPhase(warmupS, 0);
if (runnerGone()) await unusable(runnerGone()!);

const cpuBefore: ProcessCpu | undefined = measuredPid ? readProcessCpu(measuredPid) : undefined;
const generatorBefore = process.cpuUsage();
const phase = await runPhase(durationS, maxRequests);
const generatorCpu = process.cpuUsage(generatorBefore);
const gone = runnerGone();
if (gone) await unusable(gone);
const cpuAfter: ProcessCpu | undefined = measuredPid ? readProcessCpu(measuredPid) : undefined;
const memory = measuredPid ? readProcessMemory(measuredPid) : undefined;
const loadAverageAfter = Number(loadavg()[0]?.toFixed(2));
await cleanUp();

// ---- the figures ------------------------------------------------------------------------------

const round = (n: number, digits = 2) => (Number.isFinite(n) ? Number(n.toFixed(digits)) : null);
const stats = (v: readonly number[]) => ({
  n: v.length,
  mean: round(v.reduce((s, x) => s + x, 0) / v.length),
  p50: round(quantile(v, 0.5)),
  p90: round(quantile(v, 0.9)),
  p99: round(quantile(v, 0.99)),
  max: round(quantile(v, 1)),
});
const all = [...phase.latencies.values()].flat();
const elapsedS = phase.elapsedS;
const throughput = phase.completed / elapsedS;
const cpuSeconds = (user: number, system: number) => ({
  userS: round(user),
  systemS: round(system),
  totalS: round(user + system),
  percentOfOneCore: round(((user + system) / elapsedS) * 100, 1),
  msPerRun: phase.completed ? round(((user + system) * 1000) / phase.completed) : null,
});
const runnerCpu = cpuBefore && cpuAfter ? cpuSeconds(cpuAfter.user - cpuBefore.user, cpuAfter.system - cpuBefore.system) : undefined;
const toolsCpu =
  cpuBefore && cpuAfter
    ? cpuSeconds(cpuAfter.childrenUser - cpuBefore.childrenUser, cpuAfter.childrenSystem - cpuBefore.childrenSystem)
    : undefined;
const generator = cpuSeconds(generatorCpu.user / 1e6, generatorCpu.system / 1e6);
const MiB = 1024 * 1024;

console.log(`\nthroughput: ${phase.completed} runs in ${elapsedS.toFixed(1)} s = ${throughput.toFixed(1)} runs/s`);
console.log('latency (request to result):');
const row = (name: string, v: number[]) =>
  `  ${name.padEnd(15)} n=${String(v.length).padEnd(7)} p50 ${fmtMs(quantile(v, 0.5)).padEnd(10)} p90 ${fmtMs(quantile(v, 0.9)).padEnd(10)} p99 ${fmtMs(quantile(v, 0.99)).padEnd(10)} max ${fmtMs(quantile(v, 1))}`;
for (const [tool, v] of phase.latencies) console.log(row(tool, v));
console.log(row('all', all));
const errorTotal = phase.transportErrors + phase.toolErrors;
console.log(
  errorTotal === 0 ? 'errors: none' : `errors: ${errorTotal} (${[...phase.errors].map(([kind, n]) => `${kind} ${n}`).join(', ')})`,
);
for (const sample of phase.samples) console.log(`  e.g. ${sample}`);
if (runnerCpu && toolsCpu && memory) {
  console.log(`runner (pid ${measuredPid}) over the measured ${elapsedS.toFixed(1)} s:`);
  console.log(
    `  CPU: runner process ${runnerCpu.totalS} s (user ${runnerCpu.userS} + system ${runnerCpu.systemS}) = ${runnerCpu.percentOfOneCore}% of one core, ${runnerCpu.msPerRun} ms per run`,
  );
  console.log(
    `       tools it ran, with their sandbox helpers ${toolsCpu.totalS} s = ${toolsCpu.percentOfOneCore}% of one core, ${toolsCpu.msPerRun} ms per run`,
  );
  console.log(`  memory: peak RSS ${(memory.peakRss / MiB).toFixed(1)} MiB (RSS at the end ${(memory.rss / MiB).toFixed(1)} MiB)`);
} else {
  console.log('runner CPU and memory: not measured (the runner was not started here; --runner-pid PID reads them from /proc)');
}
console.log(`load generator: CPU ${generator.totalS} s = ${generator.percentOfOneCore}% of one core (on the same ${machine.cpus} CPUs)`);

if (args.report) {
  const report = {
    timestamp: new Date().toISOString(),
    machine: { ...machine, loadAverage1mAfter: loadAverageAfter },
    settings: {
      path,
      concurrency,
      warmupS,
      durationS,
      requests: maxRequests,
      mix: Object.fromEntries(weights),
      mode: args.mode,
      bashCommand: args['bash-command'],
      runner: ownRunner
        ? { startedHere: true, build: ownRunner.build, pid: ownRunner.pid, settings: ownRunner.settings }
        : { startedHere: false, pid: runnerPid ?? null, url: url ?? null, redisPrefix: args['redis-prefix'] ?? null },
      runnerId: caps?.runnerId ?? null,
      sandbox: caps ? { available: caps.sandboxAvailable, landlockAbi: caps.landlockAbi } : null,
    },
    completed: phase.completed,
    elapsedS: round(elapsedS, 3),
    throughputPerS: round(throughput),
    latencyMs: { all: stats(all), byTool: Object.fromEntries([...phase.latencies].map(([tool, v]) => [tool, stats(v)])) },
    errors: {
      total: errorTotal,
      transport: phase.transportErrors,
      tool: phase.toolErrors,
      byKind: Object.fromEntries(phase.errors),
      samples: [...phase.samples],
    },
    runnerResources:
      runnerCpu && toolsCpu && memory
        ? { pid: measuredPid, cpu: runnerCpu, toolsCpu, peakRssBytes: memory.peakRss, rssEndBytes: memory.rss }
        : null,
    generatorCpu: generator,
  };
  try {
    writeFileSync(args.report, `${JSON.stringify(report, null, 2)}\n`);
  } catch (err) {
    console.error(`loadtest: cannot write the report to ${args.report}: ${(err as Error).message}`);
    process.exit(1);
  }
  console.log(`report: ${args.report}`);
}
process.exit(phase.completed === 0 ? 1 : 0);
