/**
 * One user turn is one exported trace: the embedded product (Postgres real, the model a scripted local
 * Messages API server) with OTEL_EXPORTER_OTLP_ENDPOINT pointing at an OTLP/HTTP receiver in this test.
 * The turn asks for a bash tool, then answers; the spans received must form one tree, from web-bff's
 * SendMessage through invoke_agent, the queue hops, `chat <model>` and `execute_tool bash` to the next
 * model call.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { createClient } from '@connectrpc/connect';
import { createConnectTransport } from '@connectrpc/connect-node';
import { ConversationService, StateKind } from '@bedrock/contracts';
import { startMessagesApiServer, type MessagesApiServer, type ScriptedResponse } from '@bedrock/offline-model';
import { startOtlpReceiver, type OtlpReceiver, type ReceivedSpan } from '@bedrock/testkit/otlp-receiver';
import { startEmbedded, type RunningEmbedded } from '../src/index.ts';

const DB = `bedrock_tracing_${process.pid}`;

let receiver: OtlpReceiver | undefined;
let llm: MessagesApiServer;
let bedrock: RunningEmbedded;
let dataDir: string;
let workspace: string;
let stopped = false;

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
  receiver = await startOtlpReceiver();
  const endpoint = receiver.url;
  dataDir = mkdtempSync(join(tmpdir(), 'bedrock-trace-data-'));
  workspace = mkdtempSync(join(tmpdir(), 'bedrock-trace-ws-'));
  bedrock = await startEmbedded({
    env: {
      ...process.env,
      BEDROCK_DATA_DIR: dataDir,
      BEDROCK_PORT: '0',
      BEDROCK_GRPC_PORT: '0',
      DATABASE_URL: `postgres://postgres@127.0.0.1:5432/${DB}`,
      ANTHROPIC_API_KEY: 'test-key',
      ANTHROPIC_BASE_URL: llm.url,
      LOG_LEVEL: 'warn',
      OTEL_EXPORTER_OTLP_ENDPOINT: endpoint,
      OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: '',
      OTEL_SDK_DISABLED: '',
      OTEL_TRACES_EXPORTER: '',
    },
  });
}, 120_000);

afterAll(async () => {
  if (!stopped) await bedrock?.stop();
  await llm?.close();
  await receiver?.close();
  for (const dir of [dataDir, workspace]) if (dir) rmSync(dir, { recursive: true, force: true });
}, 60_000);

describe('tracing on OpenTelemetry', () => {
  it('exports one trace per user turn: RPCs, invoke_agent, queue hops, chat and execute_tool, correctly parented', async () => {
    const client = createClient(
      ConversationService,
      createConnectTransport({
        baseUrl: bedrock.httpUrl,
        httpVersion: '1.1',
        interceptors: [
          (next) => (req) => {
            req.header.set('authorization', `Bearer ${bedrock.token}`);
            return next(req);
          },
        ],
      }),
    );
    const { conversation } = await client.createConversation({ cwd: workspace });
    const id = conversation!.id;
    await client.sendMessage({ conversationId: id, text: 'run a tool' });
    const deadline = Date.now() + 60_000;
    for (;;) {
      const got = await client.getConversation({ conversationId: id });
      if (got.conversation!.state!.kind === StateKind.IDLE && got.messages.length >= 4) break;
      if (Date.now() > deadline) throw new Error(`turn did not finish: ${StateKind[got.conversation!.state!.kind]}`);
      await new Promise((r) => setTimeout(r, 50));
    }
    // Stopping flushes every span still buffered (the exporter's batch).
    stopped = true;
    await bedrock.stop();

    const spans = receiver!.spans;
    const agent = spans.find((s) => s.name === 'invoke_agent' && s.attributes['gen_ai.agent.id'] === id);
    expect(agent).toBeDefined();
    const trace = spans.filter((s) => s.traceId === agent!.traceId);
    const byId = new Map(trace.map((s) => [s.spanId, s]));
    const parentOf = (s: ReceivedSpan) => byId.get(s.parentSpanId);
    const children = (p: ReceivedSpan, name: string) => trace.filter((s) => s.parentSpanId === p.spanId && s.name === name);
    const one = (p: ReceivedSpan, name: string) => {
      const found = children(p, name);
      if (found.length === 0)
        throw new Error(
          `no span "${name}" under "${p.name}"; its children: ${trace
            .filter((s) => s.parentSpanId === p.spanId)
            .map((s) => s.name)
            .join(', ')}`,
        );
      return found[0]!;
    };
    /** The `process <queue>` span under a `send <queue>` span under `p` (a relay may re-send a job: that send has no process child). */
    const hop = (p: ReceivedSpan, queue: RegExp): { send: ReceivedSpan; processed: ReceivedSpan } => {
      for (const send of trace.filter((s) => s.parentSpanId === p.spanId && s.name.startsWith('send ') && queue.test(s.name.slice(5)))) {
        const processed = trace.find((s) => s.parentSpanId === send.spanId && s.name === `process ${send.name.slice(5)}`);
        if (processed) return { send, processed };
      }
      throw new Error(
        `no queue hop ${queue} under "${p.name}"; its children: ${trace
          .filter((s) => s.parentSpanId === p.spanId)
          .map((s) => s.name)
          .join(', ')}`,
      );
    };

    // web-bff's server span is the root; the conversation service's server span its child.
    const inner = parentOf(agent!)!;
    expect([inner.name, inner.kind, inner.attributes['rpc.system'], inner.attributes['rpc.method']]).toEqual([
      'bedrock.v1.ConversationService/SendMessage',
      2,
      'connect_rpc',
      'SendMessage',
    ]);
    const outer = parentOf(inner)!;
    expect([outer.name, outer.kind, outer.parentSpanId]).toEqual(['bedrock.v1.ConversationService/SendMessage', 2, '']);
    expect(agent!.attributes).toMatchObject({ 'gen_ai.operation.name': 'invoke_agent' });
    // One process, one SDK: service.name is the embedded mode's.
    expect([...new Set(trace.map((s) => s.service))]).toEqual(['bedrock']);

    // invoke_agent → send llm-requests → process llm-requests → chat <model>.
    const { send: sendLlm, processed: processLlm } = hop(agent!, /^llm-requests$/);
    expect([
      sendLlm.kind,
      sendLlm.attributes['messaging.destination.name'],
      sendLlm.attributes['messaging.operation.type'],
      sendLlm.attributes['messaging.system'],
    ]).toEqual([4, 'llm-requests', 'send', 'memory']);
    expect(processLlm.kind).toBe(5);
    const chat = trace.find((s) => s.parentSpanId === processLlm.spanId && s.name.startsWith('chat '))!;
    expect(chat).toBeDefined();
    const model = chat.attributes['gen_ai.request.model'];
    expect(chat.name).toBe(`chat ${String(model)}`);
    expect(chat.attributes).toMatchObject({
      'gen_ai.operation.name': 'chat',
      'gen_ai.system': 'anthropic',
      'gen_ai.response.finish_reasons': ['tool_use'],
    });
    expect(chat.attributes['gen_ai.response.model']).toEqual(expect.any(String));
    expect(chat.attributes['gen_ai.usage.input_tokens']).toEqual(expect.any(Number));
    expect(chat.attributes['gen_ai.usage.output_tokens']).toEqual(expect.any(Number));
    // The gateway reads the history from the conversation service in this process (no RPC),
    // inside the chat span.
    const read = one(chat, 'read history');
    expect([read.kind, read.attributes['gen_ai.conversation.id']]).toEqual([1, id]); // OTLP's SPAN_KIND_INTERNAL
    expect(trace.some((s) => s.name.includes('ConversationHistoryService'))).toBe(false);

    // The result → the conversation's consumer → the tool job (`tool-exec` or `tool-exec-restricted`) → execute_tool bash.
    const processResult = hop(processLlm, /^conversation-events$/).processed;
    const processTool = hop(processResult, /^tool-exec/).processed;
    const tool = one(processTool, 'execute_tool bash');
    expect(tool.attributes).toMatchObject({
      'gen_ai.operation.name': 'execute_tool',
      'gen_ai.tool.name': 'bash',
      'gen_ai.tool.call.id': expect.any(String),
    });

    // The tool result → the conversation's consumer → the next model call, still the same trace.
    const processToolResult = hop(processTool, /^conversation-events$/).processed;
    const secondChat = trace.find(
      (s) => s.name.startsWith('chat ') && s.parentSpanId === hop(processToolResult, /^llm-requests$/).processed.spanId,
    );
    expect(secondChat?.attributes['gen_ai.response.finish_reasons']).toEqual(['end_turn']);
  }, 120_000);
});
