/**
 * `make bench BENCH=cache`: prompt-cache figures of one long conversation (thinking HIGH, a bash
 * call and its ~8 KB result per turn, one compaction, then a continuation-summary request), every
 * request built and streamed by the gateway's real request path against the strict fake, the
 * history grown from what the gateway returned. Prints the cache-read share of input tokens,
 * silent thinking/effort changes, compactions and refused requests; asserts nothing. docs/testing.md.
 */
import { create } from '@bufbuild/protobuf';
import Anthropic from '@anthropic-ai/sdk';
import {
  ContentBlockSchema,
  LlmMessageSchema,
  LlmRequestJobSchema,
  LlmRequestPurpose,
  Role,
  ThinkingLevel,
  type ContentBlock,
  type LlmMessage,
  type Usage,
} from '@bedrock/contracts';
import { createModelRegistry } from '@bedrock/contracts/models';
import { startMessagesApiServer, type ScriptedResponse } from '@bedrock/offline-model';
import { runLlmRequest } from '../services/llm-gateway/src/run-llm-request.ts';
import { DEFAULT_IMAGE_LIMITS } from '../services/llm-gateway/src/images.ts';
import { CONTINUATION_PROMPT } from '../services/conversation/src/core/constants.ts';

/** Turns of the conversation (BENCH_TURNS, default 50); each turn is thinking + a bash call, its result, thinking + an answer. */
const TURNS = Number(process.env.BENCH_TURNS ?? 50);
const MODEL = 'bedrock-offline';
const SYSTEM = `You are Bedrock, a careful software engineering agent.\n${'Follow the repository conventions. '.repeat(60)}`;

const server = await startMessagesApiServer();
const client = new Anthropic({ apiKey: 'local', baseURL: server.url, maxRetries: 0, logLevel: 'off' });
/** A 100 000-token window, so that the provider compacts once, at its 80 000-token trigger. */
const options = {
  registry: createModelRegistry({ [MODEL]: { contextWindow: 100_000 } }),
  defaultModel: MODEL,
  defaultMaxTokens: 16_000,
  imageLimits: DEFAULT_IMAGE_LIMITS,
  requestTimeoutMs: 30_000,
  idleTimeoutMs: 30_000,
};

/** The conversation, grown from what the gateway returned (a compaction block kept verbatim). */
const history: LlmMessage[] = [];
const text = (t: string): ContentBlock => create(ContentBlockSchema, { block: { case: 'text', value: { text: t } } });
const push = (role: Role, content: ContentBlock[]) => history.push(create(LlmMessageSchema, { role, content }));

let read = 0;
let total = 0;
let compactions = 0;
let requests = 0;
let failed = 0;
let continuationShare = NaN;

/**
 * One request through the gateway's real request path (`runLlmRequest`: build-request, the SDK,
 * the stream accumulator) against the fake (its prompt cache and compaction); counts its usage.
 */
async function ask(scripted: ScriptedResponse, purpose = LlmRequestPurpose.TURN): Promise<ContentBlock[]> {
  server.enqueue(scripted);
  requests++;
  const job = create(LlmRequestJobSchema, {
    requestId: `req-${requests}`,
    conversationId: 'bench',
    model: MODEL,
    systemPrompt: SYSTEM,
    toolNames: ['bash', 'patch', 'think'],
    thinking: ThinkingLevel.HIGH,
    purpose,
  });
  const outcome = await runLlmRequest({ ...job, messages: [...history] }, { client, options });
  if (outcome.case !== 'llmResponse') {
    failed++;
    console.log(`request ${requests} failed: ${outcome.value.message}`);
    return [];
  }
  const u = outcome.value.usage as Usage;
  const all = Number(u.inputTokens + u.cacheReadInputTokens + u.cacheCreationInputTokens);
  read += Number(u.cacheReadInputTokens);
  total += all;
  if (purpose === LlmRequestPurpose.CONTINUATION) continuationShare = Number(u.cacheReadInputTokens) / all;
  compactions += outcome.value.content.filter((b) => b.block.case === 'compaction').length;
  return outcome.value.content;
}

const output = (turn: number) => `$ cat src/module-${turn}.ts\n${`export const value${turn} = compute(${turn}); // line\n`.repeat(150)}`;

for (let turn = 1; turn <= TURNS; turn++) {
  push(Role.USER, [text(`Turn ${turn}: look at src/module-${turn}.ts and tell me what it exports.`)]);
  const call = await ask({
    kind: 'message',
    content: [
      { type: 'thinking', thinking: `I should read module ${turn} first.` },
      { type: 'tool_use', id: `toolu_${turn}`, name: 'bash', input: { command: `cat src/module-${turn}.ts` } },
    ],
  });
  push(Role.ASSISTANT, call);
  push(Role.USER, [
    create(ContentBlockSchema, { block: { case: 'toolResult', value: { toolUseId: `toolu_${turn}`, content: output(turn) } } }),
  ]);
  const answer = await ask({
    kind: 'message',
    content: [
      { type: 'thinking', thinking: `Module ${turn} exports one constant.` },
      { type: 'text', text: `src/module-${turn}.ts exports value${turn}, computed from ${turn}.` },
    ],
  });
  push(Role.ASSISTANT, answer);
}

// The continuation summary, as the conversation service asks for it: its prompt as a new user turn.
push(Role.USER, [text(CONTINUATION_PROMPT)]);
await ask({ kind: 'message', content: [{ type: 'text', text: 'Summary: 50 modules read.' }] }, LlmRequestPurpose.CONTINUATION);

let silentChanges = 0;
const bodies = server.requests.flatMap((r) => (r.body ? [r.body] : []));
for (let i = 1; i < bodies.length; i++) {
  const key = (b: (typeof bodies)[number]) => JSON.stringify([b.thinking ?? null, b.output_config?.effort ?? null]);
  if (key(bodies[i]!) !== key(bodies[i - 1]!)) silentChanges++;
}

const pct = (x: number) => `${(100 * x).toFixed(1)}%`;
console.log(`requests: ${requests} (${TURNS} turns × 2 + 1 continuation summary), failed: ${failed}`);
console.log(`cache-read share of input tokens: ${pct(read / total)} (${read} of ${total}; goal ≥ 85%)`);
console.log(`continuation-summary request: ${pct(continuationShare)} of its input read from the cache`);
console.log(`silent changes of thinking or effort between requests: ${silentChanges} (goal 0)`);
console.log(`compactions: ${compactions}`);
console.log(
  `requests the fake refused: ${server.violations.length}${server.violations.length ? ` (${server.violations[0]!.message})` : ''} (goal 0)`,
);
await server.close();
