/**
 * One user turn is one trace: the real conversation service, llm-gateway and tool-runner in
 * one process on the in-memory transport (Postgres real, the model a scripted local Messages
 * API server). The caller's traceparent must be in every job of the turn: the LLM request,
 * the tool job, the tool result event, the LLM result events and the next LLM request.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import pg from 'pg';
import { createClient, type Client } from '@connectrpc/connect';
import { createGrpcTransport } from '@connectrpc/connect-node';
import { ConversationService, StateKind, USER_HEADER } from '@bedrock/contracts';
import { createMemoryTransport, type Transport } from '@bedrock/platform';
import { generateServiceCredentials, serviceTokenInterceptor } from '@bedrock/platform/server';
import { startMessagesApiServer, type MessagesApiServer, type ScriptedResponse } from '@bedrock/offline-model';
import {
  createConversationService,
  readConversationConfig,
  type ConversationServiceInstance,
} from '../../../services/conversation/src/index.ts';
import { createLlmGateway, readLlmGatewayConfig, type LlmGateway } from '../../../services/llm-gateway/src/index.ts';
import { createToolRunner, readToolRunnerConfig, type ToolRunner } from '../../../services/tool-runner/src/index.ts';

const DB = `bedrock_turn_trace_${process.pid}`;
const TRACE_ID = '4bf92f3577b34da6a3ce929d0e0e4736';
const PARENT = `00-${TRACE_ID}-00f067aa0ba902b7-01`;

interface Added {
  readonly queue: string;
  readonly jobId: string;
  readonly traceContext: Record<string, string>;
}

/** The transport with every job added through it recorded (queue, id, trace context). */
function recording(transport: Transport, added: Added[]): Transport {
  const queues = new Proxy(transport.queues, {
    get(target, key) {
      if (key === 'producer') {
        return (queue: string, schema: Parameters<Transport['queues']['producer']>[1]) => {
          const producer = target.producer(queue, schema);
          return {
            queue: producer.queue,
            add: (jobId: string, payload: { traceContext?: Record<string, string> }, options?: { delayMs?: number }) => {
              added.push({ queue, jobId, traceContext: { ...payload.traceContext } });
              return producer.add(jobId, payload as never, options);
            },
            addBulk: (jobs: { jobId: string; payload: { traceContext?: Record<string, string> }; options?: { delayMs?: number } }[]) => {
              for (const job of jobs) added.push({ queue, jobId: job.jobId, traceContext: { ...job.payload.traceContext } });
              return producer.addBulk(jobs as never);
            },
            remove: (jobId: string) => producer.remove(jobId),
          };
        };
      }
      const value = Reflect.get(target, key) as unknown;
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
  return new Proxy(transport, {
    get(target, key) {
      if (key === 'queues') return queues;
      const value = Reflect.get(target, key) as unknown;
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}

let llm: MessagesApiServer;
let conversation: ConversationServiceInstance;
let gateway: LlmGateway;
let runner: ToolRunner;
let memory: Transport;
let client: Client<typeof ConversationService>;
const added: Added[] = [];
const services = generateServiceCredentials(['web-bff', 'llm-gateway']);

beforeAll(async () => {
  const admin = new pg.Client({ connectionString: 'postgres://postgres@127.0.0.1:5432/postgres' });
  await admin.connect();
  await admin.query(`DROP DATABASE IF EXISTS ${DB}`);
  await admin.query(`CREATE DATABASE ${DB}`);
  await admin.end();
  const script: ScriptedResponse[] = [
    { kind: 'message', content: [{ type: 'tool_use', name: 'bash', input: { command: 'echo traced' } }] },
    { kind: 'message', content: [{ type: 'text', text: 'Done.' }] },
  ];
  llm = await startMessagesApiServer({
    fallback: () => script.shift() ?? { kind: 'error', status: 500, errorType: 'api_error', message: 'nothing scripted' },
  });
  memory = createMemoryTransport();
  const transport = recording(memory, added);
  conversation = createConversationService(
    readConversationConfig(
      {},
      {
        log: { level: 'warn' },
        server: { grpcPort: 0, metricsPort: 0, host: '127.0.0.1' },
        transport: { kind: 'memory' },
        database: { url: `postgres://postgres@127.0.0.1:5432/${DB}` },
        conversations: { sandbox: 'unavailable' },
        // A turn's trace, not where it runs: its tool runs in /tmp, a host path.
        workspaces: { hostPaths: 'on' },
      },
    ),
    { transport, servicePeers: services.peers },
  );
  await conversation.start();
  gateway = createLlmGateway(
    readLlmGatewayConfig(
      {},
      {
        log: { level: 'warn' },
        transport: { kind: 'memory' },
        provider: { apiKey: 'test-key', baseUrl: llm.url },
        history: { conversationUrls: [conversation.grpcUrl] },
      },
    ),
    { transport, serveMetrics: false, serviceToken: services.tokens['llm-gateway']! },
  );
  await gateway.start();
  runner = createToolRunner(
    readToolRunnerConfig(
      {},
      { log: { level: 'warn' }, transport: { kind: 'memory' }, server: { host: '127.0.0.1', grpcPort: 0, metricsPort: 0 } },
    ),
    { transport },
  );
  await runner.start();
  // The test calls as web-bff does: with web-bff's service token beside the user header.
  client = createClient(
    ConversationService,
    createGrpcTransport({ baseUrl: conversation.grpcUrl, interceptors: [serviceTokenInterceptor(services.tokens['web-bff']!)] }),
  );
}, 60_000);

afterAll(async () => {
  await runner?.stop();
  await gateway?.stop();
  await conversation?.stop();
  await memory?.close();
  await llm?.close();
}, 60_000);

describe('trace context across the queues', () => {
  it("carries the caller's traceparent through every job of one turn", async () => {
    const headers = { [USER_HEADER]: 'tracer', traceparent: PARENT, tracestate: 'bedrock=test' };
    const { conversation: conv } = await client.createConversation({ cwd: '/tmp' }, { headers });
    await client.sendMessage({ conversationId: conv!.id, text: 'run a tool' }, { headers });
    const deadline = Date.now() + 20_000;
    for (;;) {
      const got = await client.getConversation({ conversationId: conv!.id }, { headers });
      if (got.conversation!.state!.kind === StateKind.IDLE && got.messages.length >= 4) break;
      if (Date.now() > deadline) throw new Error(`turn did not finish: ${StateKind[got.conversation!.state!.kind]}`);
      await new Promise((r) => setTimeout(r, 50));
    }
    // Only this conversation has run so far: everything added is its turn.
    const jobs = [...added];
    const queuesSeen = jobs.map((a) => a.queue);
    // The LLM request, the tool job, the LLM results and the tool result, and the next LLM request.
    expect(queuesSeen.filter((q) => q === 'llm-requests')).toHaveLength(2);
    expect(queuesSeen.filter((q) => q === 'tool-exec')).toHaveLength(1);
    expect(queuesSeen.filter((q) => q === 'conversation-events').length).toBeGreaterThanOrEqual(3);
    for (const job of jobs) expect([job.queue, job.jobId, job.traceContext.traceparent]).toEqual([job.queue, job.jobId, PARENT]);
    expect(jobs.every((j) => j.traceContext.tracestate === 'bedrock=test')).toBe(true);
  });

  it('starts a new trace for a call without traceparent, still one trace for the whole turn', async () => {
    const headers = { [USER_HEADER]: 'tracer' };
    const before = added.length;
    const { conversation: conv } = await client.createConversation({ cwd: '/tmp' }, { headers });
    // The script is used up: this turn's request gets a 500 (retried later), enough to follow its trace.
    await client.sendMessage({ conversationId: conv!.id, text: 'no trace given' }, { headers });
    const first = await (async () => {
      for (let i = 0; i < 200; i++) {
        const job = added.slice(before).find((a) => a.queue === 'llm-requests');
        if (job) return job;
        await new Promise((r) => setTimeout(r, 25));
      }
      throw new Error('no llm request');
    })();
    expect(first.traceContext.traceparent).toMatch(/^00-[\da-f]{32}-[\da-f]{16}-01$/);
    expect(first.traceContext.traceparent).not.toContain(TRACE_ID);
    // Its result event carries the same trace.
    const traceId = first.traceContext.traceparent!.split('-')[1]!;
    for (let i = 0; i < 200 && !added.slice(before).some((a) => a.queue === 'conversation-events'); i++)
      await new Promise((r) => setTimeout(r, 25));
    const result = added.slice(before).find((a) => a.queue === 'conversation-events')!;
    expect(result.traceContext.traceparent!.split('-')[1]).toBe(traceId);
  });
});
