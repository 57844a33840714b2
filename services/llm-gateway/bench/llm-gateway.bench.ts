/**
 * `make bench BENCH=llm-gateway`: figures for one gateway replica against the local Messages API
 * server, in-process and Redis transports (docs/llm-gateway.md, "Benchmark"): the time the gateway
 * adds to a delta, cancel → upstream closed and → aborted result queued (median, p99), and
 * requests per second. No assertions; everything talks over loopback; loops are bounded in count
 * and time.
 */
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { cpus, loadavg } from 'node:os';
import { fileURLToPath } from 'node:url';
import { create } from '@bufbuild/protobuf';
import {
  CancelSignalSchema,
  ConversationEventJobSchema,
  ConversationEventSchema,
  LlmRequestJobSchema,
  QUEUE_CONVERSATION_EVENTS,
  QUEUE_LLM_REQUESTS,
  type ConversationEventJob,
  type LlmRequestJob,
} from '@bedrock/contracts';
import { createMemoryTransport, createRedisTransport, type Transport } from '@bedrock/platform';
import { createLogger } from '@bedrock/platform/server';
import { startMessagesApiServer, type ScriptedResponse } from '@bedrock/offline-model';
import { readLlmGatewayConfig } from '../src/config.ts';
import { createLlmGateway, type LlmGatewayDeps } from '../src/create-llm-gateway.ts';
import { resultEventId } from '../src/llm-worker.ts';
import { makeJob, testHistory } from '../test/helpers.ts';

const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const silent = createLogger({ service: 'llm-gateway-bench', level: 'silent' });

function quantile(values: number[], q: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? NaN;
}
const fmt = (ms: number) => `${ms.toFixed(2)} ms`;
const summary = (values: number[]) =>
  `median ${fmt(quantile(values, 0.5))}, p99 ${fmt(quantile(values, 0.99))}, max ${fmt(Math.max(...values))} (n=${values.length})`;

interface Rig {
  transport: Transport;
  submit(job: LlmRequestJob): Promise<void>;
  result(requestId: string): Promise<ConversationEventJob>;
  stop(): Promise<void>;
}

async function rig(makeTransport: () => Transport, env: Record<string, string>, hooks: LlmGatewayDeps = {}): Promise<Rig> {
  const transport = makeTransport();
  const gateway = createLlmGateway(
    readLlmGatewayConfig(env, { transport: { kind: 'memory' }, server: { metricsPort: 0, host: '127.0.0.1' } }),
    { transport, logger: silent, serveMetrics: false, history: testHistory, ...hooks },
  );
  await gateway.start();
  const waiters = new Map<string, (job: ConversationEventJob) => void>();
  const early = new Map<string, ConversationEventJob>();
  const consumer = transport.queues.consume(
    QUEUE_CONVERSATION_EVENTS,
    ConversationEventJobSchema,
    async (job) => {
      const waiter = waiters.get(job.id);
      if (waiter) waiter(job.data);
      else early.set(job.id, job.data);
    },
    { concurrency: 64 },
  );
  const producer = transport.queues.producer(QUEUE_LLM_REQUESTS, LlmRequestJobSchema);
  return {
    transport,
    async submit(job) {
      await transport.streams.appendDurable(
        create(ConversationEventSchema, {
          conversationId: job.conversationId,
          sequence: job.notifySequence,
          kind: { case: 'heartbeat', value: {} },
        }),
      );
      await producer.add(job.requestId, job);
    },
    result(requestId) {
      const id = resultEventId(requestId);
      const have = early.get(id);
      if (have) return Promise.resolve(have);
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`no result for ${requestId} in 30 s`)), 30_000);
        waiters.set(id, (job) => {
          clearTimeout(timer);
          resolve(job);
        });
      });
    },
    async stop() {
      await gateway.stop();
      await consumer.close(1000);
      await transport.close();
    },
  };
}

const transports: Array<[string, () => Transport]> = [
  ['in-process', () => createMemoryTransport()],
  ['redis', () => createRedisTransport({ redisUrl: REDIS_URL, prefix: `bedrock-bench-${randomUUID().slice(0, 8)}` })],
];

/**
 * Time the gateway adds between a delta leaving the upstream (the local Messages API server writes
 * the SSE event) and that delta being in the conversation's notification stream (the transport's
 * append resolved): median and p99.
 */
async function deltaLatency(name: string, makeTransport: () => Transport): Promise<void> {
  const writtenAt = new Map<string, number>();
  const latencies: number[] = [];
  const server = await startMessagesApiServer({
    onEventWritten: (_id, event, at) => {
      const data = event.data as { type?: string; delta?: { type?: string; text?: string } };
      if (data.type === 'content_block_delta' && data.delta?.type === 'text_delta' && data.delta.text) writtenAt.set(data.delta.text, at);
    },
  });
  const r = await rig(
    makeTransport,
    { ANTHROPIC_API_KEY: 'sk-bench', ANTHROPIC_BASE_URL: server.url },
    {
      onDeltaAppended: (_requestId, _block, text) => {
        const now = performance.now();
        // Deltas merged while an append was in flight: count each token from its own write.
        for (const token of text.match(/.{9}/g) ?? []) {
          const at = writtenAt.get(token);
          if (at !== undefined) latencies.push(now - at);
        }
      },
    },
  );
  try {
    for (let j = 0; j < 25; j++) {
      const tokens = Array.from({ length: 80 }, (_, i) => `j${String(j).padStart(2, '0')}t${String(i).padStart(4, '0')} `);
      server.enqueue({ kind: 'message', content: [{ type: 'text', text: tokens.join('') }], chunkChars: 9, eventDelayMs: 2 });
      const job = makeJob();
      await r.submit(job);
      await r.result(job.requestId);
    }
  } finally {
    await r.stop();
    await server.close();
  }
  console.log(`upstream delta → notification stream (${name}): ${summary(latencies)}`);
}

/**
 * Cancel: from publishing the cancel signal to the upstream seeing its connection closed, and to
 * the aborted result being on `conversation-events`: median and p99.
 */
async function cancelLatency(name: string, makeTransport: () => Transport): Promise<void> {
  const firstEvent = new Map<string, () => void>();
  const server = await startMessagesApiServer();
  const r = await rig(
    makeTransport,
    { ANTHROPIC_API_KEY: 'sk-bench', ANTHROPIC_BASE_URL: server.url },
    { onFirstEvent: (id) => firstEvent.get(id)?.() },
  );
  const toUpstreamClose: number[] = [];
  const toResult: number[] = [];
  try {
    for (let i = 0; i < 40; i++) {
      const slow: ScriptedResponse = {
        kind: 'message',
        content: [{ type: 'text', text: 'z'.repeat(4000) }],
        chunkChars: 4,
        eventDelayMs: 5,
      };
      server.enqueue(slow);
      const job = makeJob();
      const started = new Promise<void>((resolve) => firstEvent.set(job.requestId, resolve));
      await r.submit(job);
      await started;
      await new Promise((resolve) => setTimeout(resolve, 20));
      const abortsBefore = server.clientAborts.length;
      const sentAt = performance.now();
      await r.transport.cancels.publish(
        create(CancelSignalSchema, { conversationId: job.conversationId, target: { case: 'llmRequestId', value: job.requestId } }),
      );
      const result = await r.result(job.requestId);
      toResult.push(performance.now() - sentAt);
      const deadline = Date.now() + 2_000;
      while (server.clientAborts.length === abortsBefore && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 1));
      const abort = server.clientAborts.at(-1);
      if (abort && server.clientAborts.length > abortsBefore) toUpstreamClose.push(abort.hr - sentAt);
      if (result.event.case !== 'llmError' || !result.event.value.aborted) throw new Error('cancel did not produce an aborted result');
    }
  } finally {
    await r.stop();
    await server.close();
  }
  console.log(`cancel → upstream connection closed (${name}): ${summary(toUpstreamClose)}`);
  console.log(`cancel → aborted result on conversation-events (${name}): ${summary(toResult)}`);
}

/**
 * Requests per second one replica sustains against the local server at `url` (run in its own
 * process, offline model, no artificial delays).
 */
async function throughput(name: string, makeTransport: () => Transport, url: string, message: string, concurrency: number): Promise<void> {
  const r = await rig(makeTransport, {
    ANTHROPIC_API_KEY: 'sk-bench',
    ANTHROPIC_BASE_URL: url,
    BEDROCK_LLM_CONCURRENCY: String(concurrency),
  });
  try {
    // Warm-up, then a bounded run: at most 3000 requests or 20 s.
    const warm = Array.from({ length: 50 }, () => makeJob({ model: 'bedrock-offline', user: message }));
    await Promise.all(warm.map((j) => r.submit(j)));
    await Promise.all(warm.map((j) => r.result(j.requestId)));
    const started = performance.now();
    const cpuBefore = process.cpuUsage();
    let done = 0;
    const total = 3000;
    const batch = 200;
    for (let sent = 0; sent < total && performance.now() - started < 20_000; sent += batch) {
      const jobs = Array.from({ length: batch }, () => makeJob({ model: 'bedrock-offline', user: message }));
      await Promise.all(jobs.map((j) => r.submit(j)));
      await Promise.all(jobs.map((j) => r.result(j.requestId)));
      done += batch;
    }
    const seconds = (performance.now() - started) / 1000;
    const cpu = process.cpuUsage(cpuBefore);
    // CPU time per request does not depend on how busy the machine is, unlike requests/s.
    const cpuMs = (cpu.user + cpu.system) / 1000 / done;
    console.log(
      `throughput (${name}, concurrency ${concurrency}, reply "${message.slice(0, 12)}"): ${(done / seconds).toFixed(0)} requests/s (${done} in ${seconds.toFixed(1)} s); ` +
        `CPU ${cpuMs.toFixed(2)} ms per request in this process (gateway + test harness${name === 'in-process' ? ' + transport' : ''}), i.e. at most ~${(1000 / cpuMs).toFixed(0)} requests/s per core`,
    );
  } finally {
    await r.stop();
  }
}

async function startServerProcess(): Promise<{ url: string; stop: () => Promise<void> }> {
  const script = fileURLToPath(new URL('../../../packages/offline-model/src/bin/messages-api-server.ts', import.meta.url));
  const child = spawn(process.execPath, ['--import', 'tsx', script], {
    env: { ...process.env, MESSAGES_API_PORT: '0', OFFLINE_EVENT_DELAY: '0ms' },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const [chunk] = (await once(child.stdout, 'data')) as [Buffer];
  const url = chunk.toString().split('\n')[0]!.trim();
  return {
    url,
    stop: async () => {
      child.kill('SIGTERM');
      await once(child, 'exit');
    },
  };
}

console.log(
  `llm-gateway benchmark (one replica; local Messages API server over loopback; load average ${loadavg()[0]!.toFixed(1)} on ${cpus().length} cores)`,
);
for (const [name, make] of transports) await deltaLatency(name, make);
for (const [name, make] of transports) await cancelLatency(name, make);
const upstream = await startServerProcess();
try {
  for (const [name, make] of transports) {
    // "/usage 5": a one-line streamed reply; the help text: ~60 deltas per reply.
    await throughput(name, make, upstream.url, '/usage 5', 32);
    await throughput(name, make, upstream.url, 'hello', 32);
  }
} finally {
  await upstream.stop();
}
process.exit(0);
