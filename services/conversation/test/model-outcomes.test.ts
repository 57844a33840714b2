/**
 * What the real model does beyond a plain answer, end to end through the service (Postgres, Redis,
 * the queues; the test plays the gateway): thinking and server-tool blocks kept verbatim and sent
 * back in order, a text cut continued from a user turn, a paused turn resumed as it is, a cut tool
 * call asked again at the model's output limit and then told, a refusal left out of later requests,
 * usage with thinking and server-tool counts, and states and messages stored before these existed.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createModelRegistry } from '@bedrock/contracts/models';
import { ErrorKind, MessageType, Role, StateKind, StopReason, type ContentBlock } from '@bedrock/contracts';
import { MAX_TOKENS_NOTICE, SYSTEM_NOTICE_PREFIX, cutToolNotice, refusalMessage } from '../src/core/index.ts';
import {
  chainProblems,
  citedText,
  redactedThinking,
  serverTool,
  text,
  textOf,
  thinking,
  toolUse,
  usage,
  type LlmJob,
} from './support/blocks.ts';
import { startHarness, type Harness } from './support/harness.ts';

let h: Harness;
beforeAll(async () => {
  h = await startHarness({ label: 'outcomes' });
});
afterAll(async () => {
  await h?.close();
});

/** The test model is not in the registry: it gets the smallest known limits. */
const LIMIT = createModelRegistry(null).lookup('test-model').maxOutputTokens;
/** BEDROCK_MAX_OUTPUT_TOKENS (16384 by default), capped by the model's limit. */
const DEFAULT_MAX = Math.min(16_384, LIMIT);

function describeBlock(b: ContentBlock): string {
  switch (b.block.case) {
    case 'text':
      return b.block.value.citationsJson ? `text:${b.block.value.text} cites ${b.block.value.citationsJson}` : `text:${b.block.value.text}`;
    case 'thinking':
      return `thinking:${b.block.value.thinking}|${b.block.value.signature}`;
    case 'redactedThinking':
      return `redacted:${b.block.value.data}`;
    case 'serverTool':
      return `${b.block.value.blockType}:${b.block.value.blockJson}`;
    case 'toolUse':
      return `use:${b.block.value.id}`;
    case 'toolResult':
      return `result:${b.block.value.toolUseId}`;
    default:
      return b.block.case ?? 'none';
  }
}

/** Each turn as [role, block, block, ...]. */
function turns(job: LlmJob): string[][] {
  return job.messages.map((m) => [m.role === Role.USER ? 'user' : 'assistant', ...m.content.map(describeBlock)]);
}

async function started(prompt: string) {
  const id = await h.createConversation();
  await h.client().sendMessage({ conversationId: id, text: prompt });
  return { id, job: await h.llmJob(id) };
}

// Verbatim provider JSON, with a key order and spacing JSONB would not keep if it parsed it.
const SEARCH_USE = '{"type": "server_tool_use", "id": "srvtoolu_01", "name": "web_search", "input": {"query": "bedrock release"}}';
const SEARCH_RESULT =
  '{"type":"web_search_tool_result","tool_use_id":"srvtoolu_01","content":[{"url":"https://example.com/r","type":"web_search_result","title":"Release","encrypted_content":"RW5j"}]}';
const CITATIONS = [
  { type: 'web_search_result_location', url: 'https://example.com/r', title: 'Release', encrypted_index: 'Zm9v', cited_text: 'v2 ships' },
];

describe('thinking and server-tool blocks', () => {
  it('keeps thinking (also with its text omitted) and redacted thinking first in the tool turn, verbatim, across the tool loop', async () => {
    const { id, job } = await started('list the files');
    await h.respond(job, {
      stopReason: StopReason.TOOL_USE,
      content: [
        thinking('', 'sig-omitted-1'),
        redactedThinking('cmVkYWN0ZWQ='),
        text('Listing.'),
        toolUse('t1', 'bash', { command: 'ls' }),
      ],
    });
    await h.complete(await h.toolJob(id, 't1'), { content: 'a b' });
    const second = await h.llmJob(id, 1);
    expect(turns(second)).toEqual([
      ['user', 'text:list the files'],
      ['assistant', 'thinking:|sig-omitted-1', 'redacted:cmVkYWN0ZWQ=', 'text:Listing.', 'use:t1'],
      ['user', 'result:t1'],
    ]);
    // Stored and shown with the message, in order.
    const agent = (await h.get(id)).messages.find((m) => m.type === MessageType.AGENT)!;
    expect(agent.content.map(describeBlock)).toEqual(['thinking:|sig-omitted-1', 'redacted:cmVkYWN0ZWQ=', 'text:Listing.', 'use:t1']);
    expect(agent.stopReason).toBe(StopReason.TOOL_USE);
  });

  it('resumes a paused turn by sending it back as it is (server-tool blocks byte for byte), then merges the rest into one assistant turn', async () => {
    const { id, job } = await started('what shipped?');
    await h.respond(job, {
      stopReason: StopReason.PAUSE_TURN,
      content: [
        thinking('Search first.', 'sig-p'),
        serverTool('server_tool_use', SEARCH_USE),
        serverTool('web_search_tool_result', SEARCH_RESULT),
      ],
      usage: usage(100, 30, 0, 0, { thinking: 10, searches: 1 }),
    });
    const resumed = await h.llmJob(id, 1);
    expect(turns(resumed)).toEqual([
      ['user', 'text:what shipped?'],
      ['assistant', 'thinking:Search first.|sig-p', `server_tool_use:${SEARCH_USE}`, `web_search_tool_result:${SEARCH_RESULT}`],
    ]);
    expect(chainProblems(resumed)).toEqual([]);
    await h.respond(resumed, { content: [citedText('v2 shipped.', CITATIONS)], usage: usage(200, 20, 0, 0, { searches: 1 }) });
    await h.waitState(id, StateKind.IDLE);

    const got = await h.get(id);
    expect(got.messages.map((m) => [MessageType[m.type], StopReason[m.stopReason]])).toEqual([
      ['USER', 'UNSPECIFIED'],
      ['AGENT', 'PAUSE_TURN'],
      ['AGENT', 'END_TURN'],
    ]);
    expect(got.messages[2]!.content.map(describeBlock)).toEqual([`text:v2 shipped. cites ${JSON.stringify(CITATIONS)}`]);
    // Usage counts thinking tokens and the searches, per message and in total.
    expect(got.messages[1]!.usage).toMatchObject({ thinkingTokens: 10n, webSearchRequests: 1n });
    expect(got.conversation!.totalUsage).toMatchObject({
      inputTokens: 300n,
      outputTokens: 50n,
      thinkingTokens: 10n,
      webSearchRequests: 2n,
      webFetchRequests: 0n,
    });

    await h.client().sendMessage({ conversationId: id, text: 'thanks' });
    const next = await h.llmJob(id, 2);
    expect(turns(next)).toEqual([
      ['user', 'text:what shipped?'],
      [
        'assistant',
        'thinking:Search first.|sig-p',
        `server_tool_use:${SEARCH_USE}`,
        `web_search_tool_result:${SEARCH_RESULT}`,
        `text:v2 shipped. cites ${JSON.stringify(CITATIONS)}`,
      ],
      ['user', 'text:thanks'],
    ]);
  });
});

describe('cuts by the output limit', () => {
  it('keeps a cut text and continues from a user turn holding the notice (no prefill)', async () => {
    const { id, job } = await started('write an essay');
    expect(job.maxTokens).toBe(DEFAULT_MAX);
    await h.respond(job, {
      stopReason: StopReason.MAX_TOKENS,
      maxTokens: DEFAULT_MAX,
      content: [thinking('Plan.', 'sig-c'), text('The first half ')],
    });
    const next = await h.llmJob(id, 1);
    expect(turns(next)).toEqual([
      ['user', 'text:write an essay'],
      ['assistant', 'thinking:Plan.|sig-c', 'text:The first half '],
      ['user', `text:${SYSTEM_NOTICE_PREFIX}${MAX_TOKENS_NOTICE}`],
    ]);
    expect(next.maxTokens).toBe(DEFAULT_MAX);
    await h.respond(next, { content: [text('and the second half.')] });
    await h.waitState(id, StateKind.IDLE);
    const got = await h.get(id);
    // The user sees the cut: the message says why it ended, and the notice follows it.
    expect(got.messages.map((m) => [MessageType[m.type], StopReason[m.stopReason]])).toEqual([
      ['USER', 'UNSPECIFIED'],
      ['AGENT', 'MAX_TOKENS'],
      ['SYSTEM', 'UNSPECIFIED'],
      ['AGENT', 'END_TURN'],
    ]);
  });

  it("asks again at the model's output limit when a tool call was cut, then (cut again) tells the model, naming the call", async () => {
    expect(LIMIT).toBeGreaterThan(DEFAULT_MAX);
    const { id, job } = await started('write big.txt');
    await h.respond(job, {
      stopReason: StopReason.MAX_TOKENS,
      maxTokens: DEFAULT_MAX,
      cutToolNames: ['patch'],
      content: [text('Writing it.')],
    });
    const raised = await h.llmJob(id, 1);
    expect(raised.maxTokens).toBe(LIMIT);
    // Nothing of the cut response was kept: the same history is asked again.
    expect(turns(raised)).toEqual(turns(job));
    expect((await h.get(id)).messages.map((m) => MessageType[m.type])).toEqual(['USER']);

    await h.respond(raised, {
      stopReason: StopReason.MAX_TOKENS,
      maxTokens: LIMIT,
      cutToolNames: ['patch'],
      content: [text('Writing it again.')],
    });
    const told = await h.llmJob(id, 2);
    const notice = cutToolNotice(['patch'], LIMIT);
    expect(notice).toMatch(new RegExp(`^Your call to patch was cut off .* ${LIMIT} tokens`));
    expect(turns(told)).toEqual([
      ['user', 'text:write big.txt'],
      ['assistant', 'text:Writing it again.'],
      ['user', `text:${SYSTEM_NOTICE_PREFIX}${notice}`],
    ]);
    expect(told.maxTokens).toBe(LIMIT);
    expect(chainProblems(told)).toEqual([]);
  });

  it('runs the complete calls of a response whose other call was cut at the limit; the notice follows their results', async () => {
    const { id, job } = await started('two writes');
    await h.respond(job, {
      stopReason: StopReason.MAX_TOKENS,
      maxTokens: LIMIT,
      cutToolNames: ['patch'],
      content: [toolUse('k1', 'bash', { command: 'mkdir out' })],
    });
    await h.complete(await h.toolJob(id, 'k1'), { content: 'made' });
    const next = await h.llmJob(id, 1);
    expect(turns(next)).toEqual([
      ['user', 'text:two writes'],
      ['assistant', 'use:k1'],
      ['user', 'result:k1', `text:${SYSTEM_NOTICE_PREFIX}${cutToolNotice(['patch'], LIMIT)}`],
    ]);
    expect(next.maxTokens).toBe(DEFAULT_MAX);
  });
});

describe('refusals', () => {
  it('stores the refusal with its explanation, tells the user, goes idle, and leaves the refused turn out of the next request', async () => {
    const id = await h.createConversation();
    const c = h.client();
    await c.sendMessage({ conversationId: id, text: 'hello' });
    await h.respond(await h.llmJob(id), { content: [text('Hi.')] });
    await h.waitState(id, StateKind.IDLE);

    await c.sendMessage({ conversationId: id, text: 'the forbidden request' });
    await h.respond(await h.llmJob(id, 1), {
      stopReason: StopReason.REFUSAL,
      stopExplanation: 'This request would cause harm',
      content: [thinking('No.', 'sig-r'), text('I can')],
    });
    await h.waitState(id, StateKind.IDLE);
    const got = await h.get(id);
    expect(got.conversation!.state!.kind).toBe(StateKind.IDLE);
    const [refused, error] = got.messages.slice(-2);
    expect([MessageType[refused!.type], StopReason[refused!.stopReason], refused!.stopExplanation]).toEqual([
      'AGENT',
      'REFUSAL',
      'This request would cause harm',
    ]);
    expect(refused!.content.map(describeBlock)).toEqual(['thinking:No.|sig-r', 'text:I can']);
    expect(MessageType[error!.type]).toBe('ERROR');
    expect(textOf(error!.content)).toBe(
      'The model declined to answer: This request would cause harm. Rephrase your request or send a new message.',
    );
    expect(textOf(error!.content)).toBe(refusalMessage('This request would cause harm'));

    // It takes a new message; the refused turn is not sent again.
    await c.sendMessage({ conversationId: id, text: 'something else' });
    const next = await h.llmJob(id, 2);
    expect(turns(next)).toEqual([
      ['user', 'text:hello'],
      ['assistant', 'text:Hi.'],
      ['user', 'text:something else'],
    ]);
    expect(JSON.stringify(next.messages)).not.toContain('forbidden');
  });

  it('fails a sub-agent that is refused with error kind REFUSED, and its parent hears so', async () => {
    const id = await h.createConversation();
    await h.client().sendMessage({ conversationId: id, text: 'delegate' });
    await h.respond(await h.llmJob(id), {
      stopReason: StopReason.TOOL_USE,
      content: [toolUse('sp', 'spawn_agents', { tasks: [{ task: 'do it' }] })],
    });
    const child = `${id}--sp--0`;
    await h.respond(await h.llmJob(child), { stopReason: StopReason.REFUSAL, content: [] });
    await h.waitState(child, StateKind.FAILED);
    const state = (await h.get(child)).conversation!.state!;
    expect([state.errorKind, state.errorMessage]).toEqual([ErrorKind.REFUSED, refusalMessage('')]);
    const resumed = await h.llmJob(id, 1);
    expect(JSON.stringify(resumed.messages)).toContain('FAILED (refused)');
  });
});

describe('stored before these existed', () => {
  it('loads a state and messages without the new fields: usage counts 0, a retry of an old request gets the default max_tokens', async () => {
    const id = await h.createConversation();
    const requestId = `${id}/llm/1`;
    // As an older version stored them: usage without thinking or server-tool counts, a phase
    // without maxTokens, messages without a stop reason.
    const oldUsage = { inputTokens: 10, outputTokens: 5, cacheReadInputTokens: 0, cacheCreationInputTokens: 0 };
    const state = {
      phase: { kind: 'llm_requesting', requestId, attempt: 1, retry: null, autoContinuations: 0 },
      mode: 'restricted',
      seq: 5,
      llmRequests: 1,
      lastUsage: oldUsage,
      totalUsage: oldUsage,
      contextWarned: false,
    };
    await h.pool.query(`UPDATE conversations SET state = $2, state_kind = 'llm_requesting', version = 5, message_seq = 3 WHERE id = $1`, [
      id,
      JSON.stringify(state),
    ]);
    await h.pool.query(
      `INSERT INTO messages (id, conversation_id, sequence, message_type, actor_kind, content, usage_data) VALUES
         ($1, $2, 1, 'user', 'human', '[{"type":"text","text":"old question"}]', NULL),
         ($3, $2, 2, 'agent', 'llm_agent', '[{"type":"text","text":"old answer"}]', $4),
         ($5, $2, 3, 'user', 'human', '[{"type":"text","text":"follow-up"}]', NULL)`,
      [`${id}/m/1`, id, `${id}/m/2`, JSON.stringify(oldUsage), `${id}/m/3`],
    );
    const before = await h.get(id);
    expect(before.messages.map((m) => [MessageType[m.type], StopReason[m.stopReason], m.stopExplanation])).toEqual([
      ['USER', 'UNSPECIFIED', ''],
      ['AGENT', 'UNSPECIFIED', ''],
      ['USER', 'UNSPECIFIED', ''],
    ]);
    expect(before.messages[1]!.usage).toMatchObject({ inputTokens: 10n, thinkingTokens: 0n, webSearchRequests: 0n });
    expect(before.conversation!.totalUsage).toMatchObject({ inputTokens: 10n, thinkingTokens: 0n, webFetchRequests: 0n });

    // The old request fails and is retried: the retry asks for the default.
    await h.send(id, `e/${requestId}`, {
      case: 'llmError',
      value: { requestId, kind: ErrorKind.SERVER, retryable: true, message: 'Overloaded' },
    });
    const retry = await h.llmJob(id);
    expect([retry.attempt, retry.maxTokens]).toEqual([2, DEFAULT_MAX]);
    expect(turns(retry)).toEqual([
      ['user', 'text:old question'],
      ['assistant', 'text:old answer'],
      ['user', 'text:follow-up'],
    ]);
    await h.respond(retry, { content: [text('new answer')], usage: usage(20, 5, 0, 0, { thinking: 3 }) });
    await h.waitState(id, StateKind.IDLE);
    expect((await h.get(id)).conversation!.totalUsage).toMatchObject({
      inputTokens: 30n,
      outputTokens: 10n,
      thinkingTokens: 3n,
      webSearchRequests: 0n,
    });
  });
});

it('sent only valid histories to the model', () => {
  expect(h.chainProblems()).toEqual([]);
});
