/**
 * Drives a gateway running alone, with no conversation service (docs/llm-gateway.md, "Running
 * it"): enqueues one LlmRequestJob on `llm-requests` in Redis, prints its token deltas from the
 * notification stream as they arrive (thinking on stderr, the answer on stdout), then the result
 * from `conversation-events`, which it consumes itself: do not run it against a deployment whose
 * conversation service is running. The command line is below.
 */
import { randomUUID } from 'node:crypto';
import { parseArgs } from 'node:util';
import { create, toJsonString } from '@bufbuild/protobuf';
import { Code, ConnectError } from '@connectrpc/connect';
import {
  CancelSignalSchema,
  ConversationHistoryService,
  ConversationEventJobSchema,
  ConversationEventSchema,
  LlmRequestJobSchema,
  LlmRequestPurpose,
  QUEUE_CONVERSATION_EVENTS,
  QUEUE_LLM_REQUESTS,
  Role,
  ServerTool,
  ThinkingLevel,
  TokenDeltaKind,
  toolSetFor,
} from '@bedrock/contracts';
import { createTransport, STREAM_START, type StreamPosition } from '@bedrock/platform';
import { loadConfig, transportSection } from '@bedrock/platform/config';
import { serveService, createLogger, startGrpcServer } from '@bedrock/platform/server';

/**
 * The command line:
 *
 *   npx tsx services/llm-gateway/src/cli/send-request.ts [--model M] [--thinking off|low|medium|high|xhigh|max]
 *     [--web-search] [--web-fetch] [--cancel-after MS] [--timeout-ms MS] [--history-port PORT] "message"
 */
const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    model: { type: 'string', default: '' },
    thinking: { type: 'string', default: 'off' },
    'web-search': { type: 'boolean', default: false },
    'web-fetch': { type: 'boolean', default: false },
    'cancel-after': { type: 'string' },
    'timeout-ms': { type: 'string', default: '120000' },
    'history-port': { type: 'string', default: '50051' },
  },
});
const THINKING: Record<string, ThinkingLevel> = {
  off: ThinkingLevel.OFF,
  low: ThinkingLevel.LOW,
  medium: ThinkingLevel.MEDIUM,
  high: ThinkingLevel.HIGH,
  xhigh: ThinkingLevel.XHIGH,
  max: ThinkingLevel.MAX,
};
const thinking = THINKING[values.thinking];
if (thinking === undefined) {
  console.error(`--thinking must be one of ${Object.keys(THINKING).join(', ')}.`);
  process.exit(2);
}
const text = positionals.join(' ') || 'hello';
// Environment: REDIS_URL, BEDROCK_REDIS_PREFIX (as the gateway).
const transport = createTransport(loadConfig(transportSection, process.env, { kind: 'redis' }), {
  warn: (fields, message) => console.error(message, fields.err),
});
const conversationId = `cli-${randomUUID()}`;
const requestId = `cli-req-${randomUUID()}`;

// The history of the one request: what the conversation service would answer the gateway. The
// job is a claim check (the gateway fetches its history from the conversation service), so this
// command answers ConversationHistoryService for its own conversation on --history-port (default
// 50051, the gateway's default BEDROCK_CONVERSATION_URL; it accepts any caller and listens on
// 127.0.0.1 only).
const history = [{ role: Role.USER, content: [{ block: { case: 'text' as const, value: { text } } }] }];
const historyServer = await startGrpcServer({
  host: '127.0.0.1',
  port: Number(values['history-port']),
  logger: createLogger({ service: 'send-request', level: 'warn' }),
  routes: (router) =>
    serveService(router, ConversationHistoryService, {
      getLlmHistory(req) {
        if (req.conversationId !== conversationId) throw new ConnectError(`conversation ${req.conversationId} not found`, Code.NotFound);
        return { messages: history };
      },
      // A conversation of this command has no MCP servers: the request offers only the registry's tools.
      getMcpTools() {
        return { tools: [] };
      },
    }),
});

const done = new Promise<string>((resolve) => {
  const consumer = transport.queues.consume(QUEUE_CONVERSATION_EVENTS, ConversationEventJobSchema, async (job) => {
    if (job.data.conversationId !== conversationId) throw new Error('not ours: handed back');
    await consumer.close(0);
    resolve(toJsonString(ConversationEventJobSchema, job.data, { prettySpaces: 2 }));
  });
});

await transport.streams.appendDurable(
  create(ConversationEventSchema, { conversationId, sequence: 1n, kind: { case: 'heartbeat', value: {} } }),
);
await transport.queues.producer(QUEUE_LLM_REQUESTS, LlmRequestJobSchema).add(
  requestId,
  create(LlmRequestJobSchema, {
    requestId,
    conversationId,
    model: values.model,
    systemPrompt: 'You are a coding agent driven from the Bedrock command line.',
    toolNames: [...toolSetFor({ isSubAgent: false, sandboxAvailable: true })],
    historyThrough: 1n,
    thinking,
    serverTools: [...(values['web-search'] ? [ServerTool.WEB_SEARCH] : []), ...(values['web-fetch'] ? [ServerTool.WEB_FETCH] : [])],
    purpose: LlmRequestPurpose.TURN,
    attempt: 1,
    notifySequence: 1n,
  }),
);
if (values['cancel-after']) {
  setTimeout(
    () =>
      void transport.cancels.publish(create(CancelSignalSchema, { conversationId, target: { case: 'llmRequestId', value: requestId } })),
    Number(values['cancel-after']),
  );
}

let position: StreamPosition = STREAM_START;
let finished = false;
const result = done.then((r) => {
  finished = true;
  return r;
});
const deadline = Date.now() + Number(values['timeout-ms']);
while (!finished && Date.now() < deadline) {
  const events = await transport.streams.read(conversationId, position, { blockMs: 200 });
  for (const e of events) {
    position = { sequence: e.sequence, deltaIndex: e.deltaIndex };
    if (e.kind.case !== 'tokenDelta') continue;
    if (e.kind.value.kind === TokenDeltaKind.THINKING)
      process.stderr.write(process.stderr.isTTY ? `\x1b[2m${e.kind.value.text}\x1b[0m` : e.kind.value.text);
    else process.stdout.write(e.kind.value.text);
  }
}
process.stdout.write('\n');
console.log(finished ? await result : 'no result before the timeout');
await transport.close();
await historyServer.close(0);
process.exit(finished ? 0 : 1);
