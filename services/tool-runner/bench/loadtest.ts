/**
 * Load generator for one tool-runner, started alone (`make loadtest-tool-runner`):
 *
 *   npx tsx services/tool-runner/bench/loadtest.ts [--path grpc|queue] [--concurrency 8]
 *     [--duration 20] [--requests N] [--mix bash:8,think:2,keyword_search:1,patch:1]
 *     [--mode unrestricted|restricted] [--target http://127.0.0.1:50053]
 *     [--redis-url redis://127.0.0.1:6379] [--redis-prefix bedrock] [--bash-command "echo ok"]
 *     [--token-file FILE]
 *
 * grpc: ExecuteTool calls on the runner's ToolRunnerService, presenting the service token in
 * --token-file (default $BEDROCK_SERVICE_TOKEN_FILE), whose SHA-256 must be listed in the
 * runner's BEDROCK_SERVICE_PEERS_FILE. queue: ToolExecJobs on
 * `tool-exec` (or `tool-exec-restricted`), results read from `conversation-events` under the
 * same Redis prefix as the runner (this consumes that queue: point it at a runner with its
 * own BEDROCK_REDIS_PREFIX, not at a live deployment). Prints throughput, latency
 * percentiles per tool and errors. Bounded: at most 600 s, 256 workers, and only 127.0.0.1.
 */
import { chmodSync, chownSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { create } from '@bufbuild/protobuf';
import { Code, ConnectError, createClient } from '@connectrpc/connect';
import { createGrpcTransport } from '@connectrpc/connect-node';
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
import { readServiceTokenFile, serviceTokenInterceptor } from '@bedrock/platform/server';
import { fmtMs, quantile } from './stats.ts';

const { values: args } = parseArgs({
  options: {
    path: { type: 'string', default: 'grpc' },
    concurrency: { type: 'string', default: '8' },
    duration: { type: 'string', default: '20' },
    requests: { type: 'string', default: '0' },
    mix: { type: 'string', default: 'bash:8,think:2' },
    mode: { type: 'string', default: 'unrestricted' },
    target: { type: 'string', default: 'http://127.0.0.1:50053' },
    'redis-url': { type: 'string', default: process.env.REDIS_URL || 'redis://127.0.0.1:6379' },
    'redis-prefix': { type: 'string', default: process.env.BEDROCK_REDIS_PREFIX || 'bedrock' },
    'bash-command': { type: 'string', default: 'echo ok' },
    'token-file': { type: 'string', default: process.env.BEDROCK_SERVICE_TOKEN_FILE ?? '' },
    help: { type: 'boolean', default: false },
  },
});

function fail(message: string): never {
  console.error(`loadtest: ${message}`);
  process.exit(2);
}

if (args.help) {
  console.log('see the header of services/tool-runner/bench/loadtest.ts, or docs/tool-runner.md');
  process.exit(0);
}
const path = args.path;
if (path !== 'grpc' && path !== 'queue') fail('--path is grpc or queue');
const concurrency = Number(args.concurrency);
const durationS = Number(args.duration);
const maxRequests = Number(args.requests);
if (!Number.isInteger(concurrency) || concurrency < 1 || concurrency > 256) fail('--concurrency is 1..256');
if (!(durationS > 0 && durationS <= 600)) fail('--duration is 1..600 seconds');
if (!Number.isInteger(maxRequests) || maxRequests < 0) fail('--requests is a non-negative integer (0 = no cap)');
const mode =
  args.mode === 'restricted'
    ? Mode.RESTRICTED
    : args.mode === 'unrestricted'
      ? Mode.UNRESTRICTED
      : fail('--mode is restricted or unrestricted');
const LOCAL = new Set(['127.0.0.1', 'localhost', '[::1]']);
for (const u of [args.target, args['redis-url']]) {
  const host = URL.canParse(u as string)
    ? new URL(u as string).hostname
    : fail(`${u} is not a URL: write it like http://127.0.0.1:50053 or redis://127.0.0.1:6379`);
  if (!LOCAL.has(host)) fail(`only local targets are allowed, got ${u}`);
}

const TOOLS = ['bash', 'think', 'keyword_search', 'patch'] as const;
type Tool = (typeof TOOLS)[number];
const weights: Array<[Tool, number]> = (args.mix as string).split(',').map((part) => {
  const [name, weight] = part.split(':');
  if (!TOOLS.includes(name as Tool)) fail(`unknown tool in --mix: ${name}`);
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

const workDir = mkdtempSync(join(tmpdir(), 'bedrock-loadtest-'));
// Tools run as the runner's tool user (65534 by default): the working directory must be theirs.
if (process.getuid?.() === 0) chownSync(workDir, 65534, 65534);
else chmodSync(workDir, 0o777);
writeFileSync(join(workDir, 'sample.txt'), 'alpha\nbeta needle gamma\ndelta\n');
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

type Execute = (job: ToolExecJob) => Promise<ToolCompleteEvent>;

/** Stops with one line (no stack trace) when the runner cannot be used at all. */
function unusable(message: string): never {
  console.error(`loadtest: ${message}`);
  process.exit(1);
}

async function grpcExecutor(): Promise<{ execute: Execute; close(): Promise<void>; describe: string }> {
  const tokenFile = args['token-file'] as string;
  if (!tokenFile) {
    fail(
      "the gRPC path needs a service token: --token-file FILE (or BEDROCK_SERVICE_TOKEN_FILE), a token whose SHA-256 is listed in the runner's BEDROCK_SERVICE_PEERS_FILE",
    );
  }
  let token: string;
  try {
    token = readServiceTokenFile(tokenFile);
  } catch (err) {
    fail((err as Error).message.replace('BEDROCK_SERVICE_TOKEN_FILE=', '--token-file '));
  }
  const client = createClient(
    ToolRunnerService,
    createGrpcTransport({ baseUrl: args.target as string, interceptors: [serviceTokenInterceptor(token)] }),
  );
  let capabilities: RunnerCapabilities | undefined;
  try {
    ({ capabilities } = await client.getCapabilities({}, { timeoutMs: 5000 }));
  } catch (err) {
    const e = ConnectError.from(err);
    if (e.code === Code.Unauthenticated) {
      unusable(
        `the runner at ${args.target} refused the service token in ${tokenFile}: list its SHA-256 in the runner's BEDROCK_SERVICE_PEERS_FILE (npx bedrock token hash "$(cat ${tokenFile})") and restart it`,
      );
    }
    if (e.code === Code.Unavailable || e.code === Code.DeadlineExceeded) {
      unusable(
        `no tool-runner answers at ${args.target} (${e.rawMessage}): start one, e.g. BEDROCK_SERVICE_PEERS_FILE=... npx tsx services/tool-runner/src/main.ts`,
      );
    }
    unusable(`GetCapabilities on ${args.target} failed: ${Code[e.code]}: ${e.rawMessage}`);
  }
  return {
    describe: `gRPC ${args.target} (runner ${capabilities?.runnerId}, sandbox ${capabilities?.sandboxAvailable ? `Landlock ABI ${capabilities.landlockAbi}` : 'unavailable'})`,
    async execute(job) {
      for await (const msg of client.executeTool({ job }, { timeoutMs: 120_000 })) {
        if (msg.kind.case === 'result') return msg.kind.value;
      }
      throw new Error('stream ended without a result');
    },
    async close() {},
  };
}

async function queueExecutor(): Promise<{ execute: Execute; close(): Promise<void>; describe: string }> {
  const transport = createRedisTransport({
    redisUrl: args['redis-url'] as string,
    prefix: args['redis-prefix'] as string,
    onError: () => {},
  });
  const runners = await transport.runners.list();
  if (runners.length === 0)
    fail(`no tool-runner registered under Redis prefix "${args['redis-prefix']}": start one with the same BEDROCK_REDIS_PREFIX`);
  const queue = mode === Mode.RESTRICTED ? QUEUE_TOOL_EXEC_RESTRICTED : QUEUE_TOOL_EXEC;
  const producer = transport.queues.producer(queue, ToolExecJobSchema);
  const waiting = new Map<string, (r: ToolCompleteEvent) => void>();
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
    describe: `queue ${queue} on ${args['redis-url']} prefix "${args['redis-prefix']}" (${runners.length} runner(s) registered)`,
    async execute(job) {
      const result = new Promise<ToolCompleteEvent>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error('no result within 120 s')), 120_000);
        waiting.set(job.toolUseId, (r) => {
          clearTimeout(timer);
          waiting.delete(job.toolUseId);
          resolve(r);
        });
      });
      await producer.add(toolExecJobId(job.conversationId, job.toolUseId), job);
      return result;
    },
    async close() {
      await consumer.close(0);
      await transport.close();
    },
  };
}

const executor = path === 'grpc' ? await grpcExecutor() : await queueExecutor();
console.log(`load test: ${executor.describe}`);
console.log(
  `  ${concurrency} workers, ${durationS} s${maxRequests ? `, at most ${maxRequests} requests` : ''}, mix ${args.mix}, mode ${args.mode}`,
);

const latencies = new Map<Tool, number[]>();
let transportErrors = 0;
let toolErrors = 0;
let completed = 0;
const errorSamples = new Set<string>();
const started = performance.now();
const deadline = started + durationS * 1000;

async function worker(): Promise<void> {
  while (performance.now() < deadline && (maxRequests === 0 || seq < maxRequests)) {
    const tool = pickTool();
    const job = makeJob(tool);
    const t0 = performance.now();
    try {
      const result = await executor.execute(job);
      const ms = performance.now() - t0;
      (latencies.get(tool) ?? latencies.set(tool, []).get(tool))?.push(ms);
      completed++;
      if (result.isError) {
        toolErrors++;
        if (errorSamples.size < 3) errorSamples.add(`${tool}: ${result.content.slice(0, 120)}`);
      }
    } catch (err) {
      transportErrors++;
      if (errorSamples.size < 3) errorSamples.add(`${tool}: ${(err as Error).message.slice(0, 120)}`);
    }
  }
}

await Promise.all(Array.from({ length: concurrency }, () => worker()));
const elapsedS = (performance.now() - started) / 1000;
await executor.close();
rmSync(workDir, { recursive: true, force: true });

const all = [...latencies.values()].flat();
console.log(`\ncompleted ${completed} in ${elapsedS.toFixed(1)} s: ${(completed / elapsedS).toFixed(1)} tools/s`);
console.log(`errors: ${transportErrors} transport, ${toolErrors} tool results with is_error`);
for (const sample of errorSamples) console.log(`  e.g. ${sample}`);
const row = (name: string, v: number[]) =>
  `  ${name.padEnd(15)} n=${String(v.length).padEnd(7)} p50 ${fmtMs(quantile(v, 0.5)).padEnd(10)} p90 ${fmtMs(quantile(v, 0.9)).padEnd(10)} p99 ${fmtMs(quantile(v, 0.99)).padEnd(10)} max ${fmtMs(quantile(v, 1))}`;
console.log('latency (request to result):');
for (const [tool, v] of latencies) console.log(row(tool, v));
console.log(row('all', all));
process.exit(transportErrors > 0 && completed === 0 ? 1 : 0);
