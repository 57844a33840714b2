/**
 * Load test of tool-runners (`make loadtest-tool-runner`; options: docs/tool-runner.md "Load
 * testing"): starts its own runner unless given --url or --redis-prefix, drives it over gRPC or the
 * queues (loadtest-executors.ts), and prints the figures (loadtest-report.ts).
 */
import { chmodSync, chownSync, existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, release, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { create } from '@bufbuild/protobuf';
import { Redis } from 'ioredis';
import { Mode, ToolExecJobSchema } from '@bedrock/contracts';
import type { ToolCompleteEvent, ToolExecJob } from '@bedrock/contracts';
import { readServiceTokenFile } from '@bedrock/platform/server';
import { RunnerStartError, describeExit, diagnosis, readProcessCpu, readProcessMemory, startOwnRunner } from './loadtest-runner.ts';
import type { OwnRunner, ProcessCpu } from './loadtest-runner.ts';
import { grpcExecutor, queueExecutor, reachRedis, RequestError } from './loadtest-executors.ts';
import type { Executor } from './loadtest-executors.ts';
import { printFigures } from './loadtest-report.ts';
import type { Phase } from './loadtest-report.ts';

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
  console.log('see docs/tool-runner.md ("Load testing")');
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

// ---- start ------------------------------------------------------------------------------------

if (path === 'queue') {
  const prefix = args['redis-prefix'] ?? `bedrock-loadtest-${process.pid}-${Math.random().toString(36).slice(2, 8)}`;
  // Redis first: a runner started here could not take work without it.
  const transport = await reachRedis(args['redis-url'], prefix, unusable);
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
  executor = await queueExecutor(transport, prefix, { mode, redisUrl: args['redis-url'] }, unusable);
} else if (startHere) {
  try {
    ownRunner = await startOwnRunner({ consume: false, redisUrl: args['redis-url'], redisPrefix: '', env: runnerEnv, build: runnerBuild });
  } catch (err) {
    if (err instanceof RunnerStartError) await unusable(err.message);
    throw err;
  }
  executor = await grpcExecutor(ownRunner.grpcUrl, ownRunner.token, 'the token made for it', unusable);
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
  executor = await grpcExecutor(url as string, token, tokenFile, unusable);
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

printFigures({
  phase,
  machine,
  loadAverageAfter,
  measuredPid,
  cpuBefore,
  cpuAfter,
  generatorCpu,
  memory,
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
  reportFile: args.report,
});
process.exit(phase.completed === 0 ? 1 : 0);
