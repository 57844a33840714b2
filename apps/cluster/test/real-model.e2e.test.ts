/**
 * End to end against the strict fake of the Messages API (every request checked against the API's
 * rules: docs/testing.md, "The model"). Each case of a real model's stream (thinking across tool turns,
 * redacted thinking, cuts by max_tokens, pause_turn with server tools, a refusal, a response that only
 * pings for longer than the idle timeout) must end in valid requests and a conversation at rest with the
 * user told what happened.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import { MessageType, ServerTool, StateKind, StopReason, ThinkingLevel, TokenDeltaKind, type Message } from '@bedrock/contracts';
import type { ReceivedRequest, ScriptedMessage } from '@bedrock/offline-model';
import { startE2e, type E2e } from './support/e2e.ts';

let e: E2e;

beforeAll(async () => {
  e = await startE2e('realmodel', {
    env: {
      BEDROCK_SERVER_TOOLS: 'web_search,web_fetch',
      // The one shortened setting: the pings case must outlast the idle timeout (default 2 min).
      BEDROCK_LLM_IDLE_TIMEOUT: '2s',
    },
  });
}, 180_000);

afterAll(async () => {
  await e?.close();
}, 60_000);

afterEach(() => {
  // Every request any case sent obeyed the Messages API's rules.
  expect(e.llm.violations).toEqual([]);
});

/** The model the e2e cluster uses by default: a budget-thinking model with a 64 000 output limit. */
const MODEL_OUTPUT_LIMIT = 64_000;

const requestsFor = (marker: string): ReceivedRequest[] =>
  e.llm.requests.filter((r) => JSON.stringify(r.body?.messages?.[0] ?? '').includes(marker));

type Block = Record<string, unknown> & { type: string };
const blocks = (content: unknown): Block[] => (typeof content === 'string' ? [{ type: 'text', text: content }] : (content as Block[]));

async function start(marker: string, settings: { thinking?: ThinkingLevel; serverTools?: ServerTool[] } = {}) {
  const conv = (
    await e.client.createConversation({
      cwd: '/tmp',
      thinking: settings.thinking ?? ThinkingLevel.UNSPECIFIED,
      serverTools: settings.serverTools ?? [],
    })
  ).conversation!;
  const watcher = e.watch(conv.id);
  await e.waitFor('the watch snapshot', () => watcher.events.some((ev) => ev.kind.case === 'snapshot'));
  await e.client.sendMessage({ conversationId: conv.id, text: marker });
  return { id: conv.id, watcher };
}

async function atRest(id: string): Promise<Message[]> {
  await e.waitFor(`${id} to come to rest`, async () => (await e.stateOf(id)) === StateKind.IDLE, 60_000);
  return (await e.client.getConversation({ conversationId: id })).messages;
}

const say = (text: string, extra: Partial<ScriptedMessage> = {}): ScriptedMessage => ({
  kind: 'message',
  content: [{ type: 'text', text }],
  ...extra,
});

describe('thinking', () => {
  it('is on by default, streams as its own delta kind, and goes back first, verbatim with its signature, after a tool turn', async () => {
    const marker = 'think then act';
    e.route(
      marker,
      {
        kind: 'message',
        content: [
          { type: 'thinking', thinking: 'I should look at the directory first.' },
          { type: 'tool_use', name: 'bash', input: { command: 'echo listed' } },
        ],
      },
      {
        kind: 'message',
        content: [
          { type: 'thinking', thinking: 'The listing worked.' },
          { type: 'text', text: 'The directory is listed.' },
        ],
      },
    );
    const { id, watcher } = await start(marker);
    const messages = await atRest(id);

    const [first, second] = requestsFor(marker);
    expect(first!.body!.thinking).toMatchObject({ type: 'enabled' });
    expect(second!.body!.thinking).toMatchObject({ type: 'enabled' });
    const assistant = second!.body!.messages[1]!;
    expect(assistant.role).toBe('assistant');
    const [thinking, toolUse] = blocks(assistant.content);
    expect(thinking).toMatchObject({ type: 'thinking', thinking: 'I should look at the directory first.' });
    expect(typeof thinking!.signature).toBe('string');
    expect((thinking!.signature as string).length).toBeGreaterThan(10);
    expect(toolUse).toMatchObject({ type: 'tool_use', name: 'bash' });

    const agent = messages.filter((m) => m.type === MessageType.AGENT);
    expect(agent[0]!.content[0]!.block.case).toBe('thinking');
    expect(agent[1]!.content.map((b) => b.block.case)).toEqual(['thinking', 'text']);
    const thinkingDeltas = watcher.events.filter((ev) => ev.kind.case === 'tokenDelta' && ev.kind.value.kind === TokenDeltaKind.THINKING);
    expect(thinkingDeltas.length).toBeGreaterThan(0);
    const usage = (await e.client.getConversation({ conversationId: id })).conversation!.totalUsage!;
    expect(usage.thinkingTokens).toBeGreaterThan(0n);
    watcher.stop();
  }, 90_000);

  it('keeps redacted thinking verbatim across a tool turn', async () => {
    const marker = 'redacted thoughts';
    e.route(
      marker,
      { kind: 'message', content: [{ type: 'redacted_thinking' }, { type: 'tool_use', name: 'bash', input: { command: 'true' } }] },
      say('Done.'),
    );
    const { id, watcher } = await start(marker);
    const messages = await atRest(id);
    const [first, second] = requestsFor(marker);
    expect(first).toBeDefined();
    const [redacted] = blocks(second!.body!.messages[1]!.content);
    expect(redacted!.type).toBe('redacted_thinking');
    expect(typeof redacted!.data).toBe('string');
    expect(messages.find((m) => m.type === MessageType.AGENT)!.content[0]!.block.case).toBe('redactedThinking');
    watcher.stop();
  }, 90_000);

  it('can be turned off per conversation, and changed later', async () => {
    const marker = 'no thinking please';
    e.route(marker, say('Plain answer.'), say('Second answer.'));
    const { id, watcher } = await start(marker, { thinking: ThinkingLevel.OFF });
    await atRest(id);
    expect(requestsFor(marker)[0]!.body!.thinking).toBeUndefined();
    const updated = await e.client.updateConversationSettings({ conversationId: id, thinking: ThinkingLevel.LOW });
    expect(updated.conversation!.thinking).toBe(ThinkingLevel.LOW);
    await e.client.sendMessage({ conversationId: id, text: 'and now think a little' });
    await atRest(id);
    const second = requestsFor(marker)[1]!;
    expect(second.body!.thinking).toMatchObject({ type: 'enabled' });
    watcher.stop();
  }, 90_000);
});

describe('long outputs', () => {
  it('retries a tool call cut by max_tokens with the model output limit, and runs it once complete', async () => {
    const marker = 'print a big banner';
    const call = { command: `echo ${'ran-once '.repeat(20)}` };
    e.route(
      marker,
      {
        kind: 'message',
        content: [
          { type: 'text', text: 'Printing it now.' },
          { type: 'tool_use', name: 'bash', input: call, partialJsonChars: 40 },
        ],
        stopReason: 'max_tokens',
      },
      {
        kind: 'message',
        content: [
          { type: 'text', text: 'Printing it now.' },
          { type: 'tool_use', name: 'bash', input: call },
        ],
      },
      say('Printed.'),
    );
    const { id, watcher } = await start(marker);
    const messages = await atRest(id);
    const [first, second, third] = requestsFor(marker);
    expect(first!.body!.max_tokens).toBeLessThan(MODEL_OUTPUT_LIMIT);
    expect(second!.body!.max_tokens).toBe(MODEL_OUTPUT_LIMIT);
    // Nothing of the cut response was kept: the retry asks the same question.
    const plain = (r: ReceivedRequest) => r.body!.messages.map((m) => ({ ...m, content: stripCache(m.content) }));
    expect(plain(second!)).toEqual(plain(first!));
    expect(third).toBeDefined();
    const results = messages.flatMap((m) => m.content.flatMap((b) => (b.block.case === 'toolResult' ? [b.block.value] : [])));
    expect(results).toHaveLength(1);
    expect(results[0]!.isError).toBe(false);
    expect(results[0]!.content).toContain('ran-once');
    watcher.stop();
  }, 90_000);

  it('tells the model in a user turn when a tool call never fits, and the conversation comes to rest', async () => {
    const marker = 'write an enormous file';
    const cut: ScriptedMessage = {
      kind: 'message',
      content: [
        {
          type: 'tool_use',
          name: 'patch',
          input: { path: 'x.txt', patches: [{ operation: 'overwrite', new_text: 'x'.repeat(500) }] },
          partialJsonChars: 30,
        },
      ],
      stopReason: 'max_tokens',
    };
    e.route(marker, cut, cut, say('I will split the file into several smaller writes.'));
    const { id, watcher } = await start(marker);
    const messages = await atRest(id);
    const [, second, third] = requestsFor(marker);
    expect(second!.body!.max_tokens).toBe(MODEL_OUTPUT_LIMIT);
    const last = third!.body!.messages.at(-1)!;
    expect(last.role).toBe('user');
    const notice = blocks(last.content)
      .map((b) => String(b.text ?? ''))
      .join('\n');
    expect(notice).toMatch(/patch/);
    expect(notice).toMatch(/cut|output limit/i);
    // The user sees the notice too.
    expect(messages.some((m) => m.type === MessageType.SYSTEM && JSON.stringify(m.content).includes('patch'))).toBe(true);
    watcher.stop();
  }, 90_000);

  it('keeps a text answer cut by max_tokens, continues it from a user turn, and marks the cut', async () => {
    const marker = 'tell a long story';
    e.route(marker, say('Once upon a time, ', { stopReason: 'max_tokens' }), say('they lived happily ever after.'));
    const { id, watcher } = await start(marker);
    const messages = await atRest(id);
    const [, second] = requestsFor(marker);
    const turns = second!.body!.messages;
    expect(turns.at(-1)!.role).toBe('user');
    expect(blocks(turns.at(-2)!.content)[0]).toMatchObject({ type: 'text', text: 'Once upon a time, ' });
    const agent = messages.filter((m) => m.type === MessageType.AGENT);
    expect(agent[0]!.stopReason).toBe(StopReason.MAX_TOKENS);
    expect(agent[1]!.content[0]!.block.value).toMatchObject({ text: 'they lived happily ever after.' });
    watcher.stop();
  }, 90_000);
});

describe('pause_turn and server tools', () => {
  it('re-sends the paused content exactly, server-tool blocks included, and continues', async () => {
    const marker = 'search the web for bedrock';
    const citation = {
      type: 'web_search_result_location',
      url: 'https://example.com/bedrock',
      title: 'Bedrock',
      encrypted_index: 'EiQ',
      cited_text: 'Bedrock is rock.',
    };
    e.route(
      marker,
      {
        kind: 'message',
        stopReason: 'pause_turn',
        content: [
          { type: 'server_tool_use', name: 'web_search', input: { query: 'bedrock' } },
          {
            type: 'web_search_tool_result',
            content: [
              { type: 'web_search_result', url: 'https://example.com/bedrock', title: 'Bedrock', encrypted_content: 'EqQ', page_age: null },
            ],
          },
        ],
      },
      { kind: 'message', content: [{ type: 'text', text: 'Bedrock is solid rock under soil.', citations: [citation] }] },
    );
    const { id, watcher } = await start(marker, { serverTools: [ServerTool.WEB_SEARCH] });
    const messages = await atRest(id);
    const [first, second] = requestsFor(marker);
    expect(first!.body!.tools!.some((t) => t.name === 'web_search')).toBe(true);
    const paused = second!.body!.messages.at(-1)!;
    expect(paused.role).toBe('assistant');
    const sent = blocks(paused.content);
    expect(sent.map((b) => b.type)).toEqual(['server_tool_use', 'web_search_tool_result']);
    expect(sent[0]).toMatchObject({ name: 'web_search', input: { query: 'bedrock' } });
    expect(sent[1]).toMatchObject({ content: [{ url: 'https://example.com/bedrock', encrypted_content: 'EqQ' }] });
    const agent = messages.filter((m) => m.type === MessageType.AGENT);
    expect(agent[0]!.stopReason).toBe(StopReason.PAUSE_TURN);
    const text = agent[1]!.content[0]!.block;
    expect(text.case).toBe('text');
    expect(JSON.parse((text.value as { citationsJson: string }).citationsJson)).toEqual([citation]);
    const usage = (await e.client.getConversation({ conversationId: id })).conversation!.totalUsage!;
    expect(usage.webSearchRequests).toBe(1n);
    watcher.stop();
  }, 90_000);

  it('refuses a server tool the deployment does not allow, clearly, and creates nothing', async () => {
    const before = (await e.client.listConversations({})).conversations.length;
    await expect(e.client.createConversation({ cwd: '/tmp', serverTools: [99 as ServerTool] })).rejects.toThrow(
      /server tool|BEDROCK_SERVER_TOOLS/i,
    );
    expect((await e.client.listConversations({})).conversations.length).toBe(before);
  });
});

describe('refusal', () => {
  it('tells the user, leaves the refused turn out of later requests, and takes a new message', async () => {
    const marker = 'refusal case';
    e.route(marker, say('I started to', { stopReason: 'refusal', stopExplanation: 'This request could enable harm.' }));
    // The refused turn is left out of later requests, so the next one starts with the new message.
    e.route('something harmless', say('Happy to help with that instead.'));
    const { id, watcher } = await start(marker);
    const messages = await atRest(id);
    const error = messages.find((m) => m.type === MessageType.ERROR);
    expect(JSON.stringify(error?.content)).toMatch(/declined/i);
    expect(JSON.stringify(error?.content)).toContain('This request could enable harm.');
    const refused = messages.find((m) => m.type === MessageType.AGENT)!;
    expect(refused.stopReason).toBe(StopReason.REFUSAL);

    await e.client.sendMessage({ conversationId: id, text: 'something harmless' });
    await atRest(id);
    expect(requestsFor(marker)).toHaveLength(1);
    const next = requestsFor('something harmless')[0]!;
    const sent = JSON.stringify(next.body!.messages);
    expect(sent).not.toContain(marker);
    expect(sent).not.toContain('I started to');
    expect(next.body!.messages.at(-1)!.role).toBe('user');
    watcher.stop();
  }, 90_000);
});

describe('liveness', () => {
  it('keeps a response that only pings for longer than the idle timeout, and completes it once', async () => {
    const marker = 'ping for a while';
    e.route(marker, say('Thought for a long time.', { fault: { type: 'pings', afterEvents: 2, forMs: 5000, everyMs: 500 } }));
    const { id, watcher } = await start(marker);
    const messages = await atRest(id);
    expect(requestsFor(marker)).toHaveLength(1);
    expect(messages.filter((m) => m.type === MessageType.AGENT)).toHaveLength(1);
    expect(messages.some((m) => m.type === MessageType.ERROR)).toBe(false);
    watcher.stop();
  }, 90_000);
});

function stripCache(content: unknown): unknown {
  if (!Array.isArray(content)) return content;
  return content.map((b: Record<string, unknown>) => {
    const { cache_control: _drop, ...rest } = b;
    void _drop;
    return rest;
  });
}
