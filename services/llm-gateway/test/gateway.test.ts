/**
 * The gateway as a service: jobs in on `llm-requests`, deltas out on the notification stream,
 * results out on `conversation-events`, cancels over the cancel bus. Runs on the in-process
 * transport and on real Redis, against the local Messages API server through the real SDK.
 */
import { describe, it, expect, beforeAll, afterAll } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import { create } from '@bufbuild/protobuf';
import {
  CancelSignalSchema,
  ConversationEventJobSchema,
  ConversationEventSchema,
  ErrorKind,
  LlmRequestJobSchema,
  QUEUE_CONVERSATION_EVENTS,
  QUEUE_LLM_REQUESTS,
  StopReason,
  ThinkingLevel,
  TokenDeltaKind,
  llmResultEventId,
  type ConversationEventJob,
  type LlmRequestJob,
} from '@bedrock/contracts';
import { createMemoryTransport, createRedisTransport, STREAM_START, type Transport } from '@bedrock/platform';
import { createLogger } from '@bedrock/platform/server';
import { startMessagesApiServer, type MessagesApiServer } from '@bedrock/offline-model';
import { readLlmGatewayConfig } from '../src/config.ts';
import { createLlmGateway, type LlmGateway } from '../src/create-llm-gateway.ts';
import { resultEventId } from '../src/llm-worker.ts';
import { makeJob, testHistory } from './helpers.ts';

const silent = createLogger({ service: 'llm-gateway-test', level: 'silent' });

interface Harness {
  transport: Transport;
  gateway: LlmGateway;
  results: Map<string, ConversationEventJob>;
  submit(job: LlmRequestJob): Promise<void>;
  result(requestId: string, timeoutMs?: number): Promise<ConversationEventJob>;
  deltas(conversationId: string): Promise<string[]>;
  /** Token deltas with their kind, as "THINKING:text" / "TEXT:text". */
  kindedDeltas(conversationId: string): Promise<string[]>;
  close(): Promise<void>;
}

async function harness(
  transport: Transport,
  env: Record<string, string>,
  hooks: Parameters<typeof createLlmGateway>[1] = {},
): Promise<Harness> {
  const gateway = createLlmGateway(
    readLlmGatewayConfig(env, { transport: { kind: 'memory' }, server: { metricsPort: 0, host: '127.0.0.1' } }),
    {
      transport,
      logger: silent,
      history: testHistory,
      ...hooks,
    },
  );
  await gateway.start();
  const results = new Map<string, ConversationEventJob>();
  const waiters = new Map<string, () => void>();
  const consumer = transport.queues.consume(QUEUE_CONVERSATION_EVENTS, ConversationEventJobSchema, async (job) => {
    results.set(job.id, job.data);
    waiters.get(job.id)?.();
  });
  const producer = transport.queues.producer(QUEUE_LLM_REQUESTS, LlmRequestJobSchema);
  return {
    transport,
    gateway,
    results,
    async submit(job) {
      // The durable event the deltas follow, as the conversation service appends it.
      await transport.streams.appendDurable(
        create(ConversationEventSchema, {
          conversationId: job.conversationId,
          sequence: job.notifySequence,
          kind: { case: 'heartbeat', value: {} },
        }),
      );
      await producer.add(job.requestId, job);
    },
    result(requestId, timeoutMs = 10_000) {
      const id = resultEventId(requestId);
      const have = results.get(id);
      if (have) return Promise.resolve(have);
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`no result for ${requestId}`)), timeoutMs);
        waiters.set(id, () => {
          clearTimeout(timer);
          resolve(results.get(id)!);
        });
      });
    },
    async deltas(conversationId) {
      const events = await transport.streams.read(conversationId, STREAM_START, { limit: 10_000 });
      return events.flatMap((e) => (e.kind.case === 'tokenDelta' ? [e.kind.value.text] : []));
    },
    async kindedDeltas(conversationId) {
      const events = await transport.streams.read(conversationId, STREAM_START, { limit: 10_000 });
      return events.flatMap((e) => (e.kind.case === 'tokenDelta' ? [`${TokenDeltaKind[e.kind.value.kind]}:${e.kind.value.text}`] : []));
    },
    async close() {
      await gateway.stop();
      await consumer.close(1000);
      await transport.close();
    },
  };
}

function suite(name: string, makeTransport: () => Transport) {
  describe(`llm gateway service (${name} transport)`, () => {
    let server: MessagesApiServer;
    let h: Harness;
    let firstEventAt = new Map<string, number>();
    beforeAll(async () => {
      server = await startMessagesApiServer();
      firstEventAt = new Map();
      h = await harness(
        makeTransport(),
        { ANTHROPIC_API_KEY: 'sk-test', ANTHROPIC_BASE_URL: server.url, BEDROCK_LLM_CONCURRENCY: '4' },
        {
          onFirstEvent: (id) => firstEventAt.set(id, performance.now()),
        },
      );
    });
    afterAll(async () => {
      await h.close();
      await server.close();
    });

    it('streams deltas to the notification stream and the result to conversation-events', async () => {
      const text = 'Streaming through the gateway, token by token. '.repeat(10);
      server.enqueue({
        kind: 'message',
        chunkChars: 7,
        content: [
          { type: 'text', text },
          { type: 'tool_use', id: 'toolu_q', name: 'bash', input: { command: 'ls' } },
        ],
        usage: { input_tokens: 100, output_tokens: 50, cache_read_input_tokens: 70, cache_creation_input_tokens: 30 },
      });
      const job = makeJob({ traceContext: { traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01' } });
      await h.submit(job);
      const result = await h.result(job.requestId);
      expect(result.eventId).toBe(llmResultEventId(job.requestId));
      expect(result.conversationId).toBe(job.conversationId);
      expect(result.traceContext.traceparent).toMatch(/^00-0af7/);
      expect(result.event.case).toBe('llmResponse');
      if (result.event.case !== 'llmResponse') return;
      expect(result.event.value.stopReason).toBe(StopReason.TOOL_USE);
      expect(result.event.value.usage).toMatchObject({
        inputTokens: 100n,
        outputTokens: 50n,
        cacheReadInputTokens: 70n,
        cacheCreationInputTokens: 30n,
      });
      expect((await h.deltas(job.conversationId)).join('')).toBe(text);
    });

    it('streams thinking as THINKING deltas apart from the answer, and returns the thinking block and the max_tokens sent', async () => {
      const thought = 'First I consider the question, then I answer it. '.repeat(3);
      server.enqueue({
        kind: 'message',
        chunkChars: 9,
        content: [
          { type: 'thinking', thinking: thought },
          { type: 'text', text: 'The answer is 42.' },
        ],
      });
      const job = makeJob({ model: 'claude-opus-5', thinking: ThinkingLevel.MAX });
      await h.submit(job);
      const result = await h.result(job.requestId);
      if (result.event.case !== 'llmResponse') throw new Error(`expected a response, got ${result.event.case}`);
      const r = result.event.value;
      expect(r.content.map((b) => b.block.case)).toEqual(['thinking', 'text']);
      expect(r.content[0]!.block.value).toMatchObject({ thinking: thought });
      // The gateway's default (32 000) under the model's limit.
      expect(r.maxTokens).toBe(32_000);
      expect(server.requests.at(-1)!.body).toMatchObject({
        thinking: { type: 'adaptive', display: 'summarized' },
        output_config: { effort: 'max' },
      });
      const deltas = await h.kindedDeltas(job.conversationId);
      const joined = (kind: string) =>
        deltas
          .filter((d) => d.startsWith(`${kind}:`))
          .map((d) => d.slice(kind.length + 1))
          .join('');
      expect(joined('THINKING')).toBe(thought);
      expect(joined('TEXT')).toBe('The answer is 42.');
      // Every thinking delta comes before the answer's: merged appends never mix the two.
      expect(deltas.findLastIndex((d) => d.startsWith('THINKING:'))).toBeLessThan(deltas.findIndex((d) => d.startsWith('TEXT:')));
    });

    it('reports classified errors as llmError events', async () => {
      server.enqueue({ kind: 'error', status: 429, errorType: 'rate_limit_error', message: 'slow down', retryAfter: '3' });
      const job = makeJob();
      await h.submit(job);
      const result = await h.result(job.requestId);
      expect(result.event).toMatchObject({
        case: 'llmError',
        value: { kind: ErrorKind.RATE_LIMIT, retryable: true, retryAfterMs: 3000n, httpStatus: 429 },
      });
    });

    it('aborts the provider stream promptly after the cancel message and reports no partial content', async () => {
      server.enqueue({ kind: 'message', content: [{ type: 'text', text: 'y'.repeat(2000) }], chunkChars: 2, eventDelayMs: 10 });
      const job = makeJob();
      await h.submit(job);
      // Wait until the provider is streaming.
      const deadline = Date.now() + 5_000;
      while (!firstEventAt.has(job.requestId) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 5));
      await new Promise((r) => setTimeout(r, 30));
      const sentAt = Date.now();
      await h.transport.cancels.publish(
        create(CancelSignalSchema, { conversationId: job.conversationId, target: { case: 'llmRequestId', value: job.requestId } }),
      );
      const result = await h.result(job.requestId);
      expect(result.event).toMatchObject({ case: 'llmError', value: { kind: ErrorKind.CANCELLED, aborted: true, retryable: false } });
      if (result.event.case !== 'llmError') return;
      const providerRequestId = result.event.value.providerRequestId;
      expect(providerRequestId).toMatch(/^req_/);
      const until = Date.now() + 1_000;
      let abort: { at: number } | undefined;
      while (!(abort = server.clientAborts.find((a) => a.requestId === providerRequestId)) && Date.now() < until)
        await new Promise((r) => setTimeout(r, 5));
      expect(abort).toBeDefined();
      // A generous bound: under Jest the first cancel of a process also pays module loading and
      // transformation. The precise figure (median and p99, in a plain process) is in
      // bench/llm-gateway.bench.ts.
      expect(abort!.at - sentAt).toBeLessThan(250);
    });

    it('answers a cancel that arrived before its job without calling the provider', async () => {
      const job = makeJob();
      const before = server.requests.length;
      await h.transport.cancels.publish(
        create(CancelSignalSchema, { conversationId: job.conversationId, target: { case: 'llmRequestId', value: job.requestId } }),
      );
      await new Promise((r) => setTimeout(r, 20));
      await h.submit(job);
      const result = await h.result(job.requestId);
      expect(result.event).toMatchObject({ case: 'llmError', value: { aborted: true } });
      expect(server.requests.length).toBe(before);
    });

    it('runs requests concurrently up to the configured limit', async () => {
      const jobs = Array.from({ length: 4 }, () => makeJob());
      for (const _ of jobs) server.enqueue({ kind: 'message', content: [{ type: 'text', text: 'slow' }], delayMs: 300 });
      const started = Date.now();
      await Promise.all(jobs.map((j) => h.submit(j)));
      await Promise.all(jobs.map((j) => h.result(j.requestId)));
      expect(Date.now() - started).toBeLessThan(900);
    });
  });
}

suite('memory', () => createMemoryTransport());
suite('redis', () =>
  createRedisTransport({ redisUrl: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', prefix: `bedrock-test-${randomUUID().slice(0, 8)}` }),
);

describe('llm gateway without an API key', () => {
  it('answers with the offline demo model through the same SDK path', async () => {
    const h = await harness(createMemoryTransport(), { BEDROCK_OFFLINE_EVENT_DELAY: '0ms' });
    try {
      expect(h.gateway.offline).toBe(true);
      const job = makeJob({ model: '', user: '$ echo hello\n$ ls' });
      await h.submit(job);
      const result = await h.result(job.requestId);
      expect(result.event.case).toBe('llmResponse');
      if (result.event.case !== 'llmResponse') return;
      expect(result.event.value.model).toBe('bedrock-offline');
      const calls = result.event.value.content.flatMap((b) => (b.block.case === 'toolUse' ? [b.block.value] : []));
      expect(calls.map((c) => [c.name, JSON.parse(c.inputJson)])).toEqual([
        ['bash', { command: 'echo hello' }],
        ['bash', { command: 'ls' }],
      ]);
      expect((await h.deltas(job.conversationId)).join('')).toBe('Running 2 command(s).');
      const help = makeJob({ user: 'hi' });
      await h.submit(help);
      const r2 = await h.result(help.requestId);
      expect(
        r2.event.case === 'llmResponse' && r2.event.value.content.map((b) => (b.block.case === 'text' ? b.block.value.text : '')).join(''),
      ).toContain('offline demo model');
    } finally {
      await h.close();
    }
  });
});

describe('llm gateway limits', () => {
  it('streams at most BEDROCK_LLM_CONCURRENCY requests at once per replica', async () => {
    const server = await startMessagesApiServer();
    const h = await harness(createMemoryTransport(), {
      ANTHROPIC_API_KEY: 'k',
      ANTHROPIC_BASE_URL: server.url,
      BEDROCK_LLM_CONCURRENCY: '2',
    });
    try {
      const jobs = Array.from({ length: 4 }, () => makeJob());
      for (const _ of jobs) server.enqueue({ kind: 'message', content: [{ type: 'text', text: 'x' }], delayMs: 200 });
      const before = server.requests.length;
      await Promise.all(jobs.map((j) => h.submit(j)));
      await Promise.all(jobs.map((j) => h.result(j.requestId)));
      const starts = server.requests.slice(before).map((r) => r.receivedAt);
      // Two at once: the third starts only after one of the first two finished (200 ms).
      expect(starts[2]! - starts[0]!).toBeGreaterThanOrEqual(180);
      expect(starts[1]! - starts[0]!).toBeLessThan(150);
    } finally {
      await h.close();
      await server.close();
    }
  });

  it('starts at most BEDROCK_LLM_RATE_LIMIT_MAX requests per window, queue-wide', async () => {
    const server = await startMessagesApiServer();
    const h = await harness(createMemoryTransport(), {
      ANTHROPIC_API_KEY: 'k',
      ANTHROPIC_BASE_URL: server.url,
      BEDROCK_LLM_CONCURRENCY: '8',
      BEDROCK_LLM_RATE_LIMIT_MAX: '2',
      BEDROCK_LLM_RATE_LIMIT_WINDOW: '400ms',
    });
    try {
      const jobs = Array.from({ length: 4 }, () => makeJob());
      for (const _ of jobs) server.enqueue({ kind: 'message', content: [{ type: 'text', text: 'x' }] });
      const before = server.requests.length;
      await Promise.all(jobs.map((j) => h.submit(j)));
      await Promise.all(jobs.map((j) => h.result(j.requestId)));
      const starts = server.requests.slice(before).map((r) => r.receivedAt);
      expect(starts).toHaveLength(4);
      expect(starts[2]! - starts[0]!).toBeGreaterThanOrEqual(300);
    } finally {
      await h.close();
      await server.close();
    }
  });
});
