import { describe, it, expect, beforeAll, afterAll } from '@jest/globals';
import { PromptCache, CACHE_LOOKBACK_BLOCKS, minCacheableTokens } from './prompt-cache.ts';
import { startMessagesApiServer, type MessagesApiServer } from './server.ts';
import { validateRequest } from './validate-request.ts';
import { createBlockSigner } from './signing.ts';
import { COMPACTION_BETA } from './compaction.ts';
import type { MessagesRequestBody } from './script.ts';

const EPH = { type: 'ephemeral' } as const;
/** A request body the tests can edit. */
interface Body {
  model: string;
  max_tokens: number;
  tools?: unknown[];
  system?: Array<Record<string, unknown>>;
  messages: Array<{ role: 'user' | 'assistant'; content: Array<Record<string, unknown>> }>;
  [key: string]: unknown;
}
const applyTo = (cache: PromptCache, body: Body) => cache.apply(body as unknown as MessagesRequestBody);
/** ~1250 tokens of text (4 characters a token). */
const big = (tag: string) => `${tag} ${'x'.repeat(5000)}`;
const tools = [{ name: 'bash', description: 'run', input_schema: { type: 'object' } }];

/** A conversation of `turns` user/assistant pairs, ending with a user turn; breakpoint on the last block. */
function chat(turns: number, extra: Partial<Body> = {}): Body {
  const messages: Body['messages'] = [];
  for (let i = 0; i < turns; i++) {
    messages.push({ role: 'user', content: [{ type: 'text', text: `question ${i}` }] });
    messages.push({ role: 'assistant', content: [{ type: 'text', text: `answer ${i}` }] });
  }
  messages.push({ role: 'user', content: [{ type: 'text', text: 'last', cache_control: EPH }] });
  return {
    model: 'claude-sonnet-4-6',
    max_tokens: 100,
    tools,
    system: [{ type: 'text', text: big('system'), cache_control: EPH }],
    messages,
    ...extra,
  };
}

describe('the fake prompt cache', () => {
  it('writes on the first request and reads the same prefix on the second (input + read + creation = the whole input)', () => {
    const cache = new PromptCache();
    const first = applyTo(cache, chat(2));
    expect(first.cache_read_input_tokens).toBe(0);
    expect(first.cache_creation_input_tokens).toBeGreaterThan(1024);
    expect(first.cache_creation.ephemeral_5m_input_tokens).toBe(first.cache_creation_input_tokens);
    const second = applyTo(cache, chat(2));
    expect(second.cache_read_input_tokens).toBe(first.cache_creation_input_tokens + first.cache_read_input_tokens);
    expect(second.cache_creation_input_tokens).toBe(0);
    expect(second.input_tokens + second.cache_read_input_tokens + second.cache_creation_input_tokens).toBe(
      first.input_tokens + first.cache_read_input_tokens + first.cache_creation_input_tokens,
    );
  });

  it('a grown conversation reads what the previous request wrote and writes only the new part', () => {
    const cache = new PromptCache();
    const first = applyTo(cache, chat(2));
    const next = chat(3);
    const second = applyTo(cache, next);
    // The previous request's last block ("last") is not in the new prefix: the system breakpoint is what is found.
    expect(second.cache_read_input_tokens).toBeGreaterThan(0);
    expect(second.cache_read_input_tokens).toBeLessThan(first.cache_creation_input_tokens);
    // With a breakpoint on the end of the previous request's content, everything before is read.
    const cache2 = new PromptCache();
    const a = chat(2);
    applyTo(cache2, a);
    const b = chat(2);
    b.messages.at(-1)!.content[0]!.cache_control = EPH;
    b.messages = [
      ...b.messages,
      { role: 'assistant', content: [{ type: 'text', text: 'more' }] },
      { role: 'user', content: [{ type: 'text', text: 'again', cache_control: EPH }] },
    ];
    const read = applyTo(cache2, b);
    expect(read.cache_read_input_tokens).toBe(applyTo(cache2, a).cache_read_input_tokens);
  });

  it(`looks back at most ${CACHE_LOOKBACK_BLOCKS} blocks from a breakpoint`, () => {
    const within = new PromptCache();
    applyTo(within, chat(1));
    const body = (blocks: number): Body => {
      const b = chat(1);
      const msgs = b.messages;
      delete msgs.at(-1)!.content[0]!.cache_control;
      // An assistant turn with many blocks after the cached prefix, then a user turn with the only message breakpoint.
      msgs.push({ role: 'assistant', content: Array.from({ length: blocks }, (_, i) => ({ type: 'text', text: `b${i}` })) });
      msgs.push({ role: 'user', content: [{ type: 'text', text: 'end', cache_control: EPH }] });
      // No system breakpoint, so only the look-back can find the previous request's prefix.
      delete b.system![0]!.cache_control;
      return b;
    };
    const prefixEnd = (c: PromptCache, n: number) => applyTo(c, body(n)).cache_read_input_tokens;
    // The previous request's breakpoint ("last" of chat(1)) is 1 + n + 1 blocks before the new breakpoint.
    expect(prefixEnd(within, CACHE_LOOKBACK_BLOCKS - 3)).toBeGreaterThan(0);
    const beyond = new PromptCache();
    applyTo(beyond, chat(1));
    expect(prefixEnd(beyond, CACHE_LOOKBACK_BLOCKS)).toBe(0);
  });

  it('does not cache a prefix below the model minimum (no error)', () => {
    expect(minCacheableTokens('claude-opus-4-6')).toBe(4096);
    expect(minCacheableTokens('claude-sonnet-4-6')).toBe(1024);
    const cache = new PromptCache();
    const small: Body = { ...chat(1), system: [{ type: 'text', text: 'short', cache_control: EPH }] };
    const opus = { ...small, model: 'claude-opus-4-6' };
    expect(applyTo(cache, opus).cache_creation_input_tokens).toBe(0);
    expect(applyTo(cache, opus).cache_read_input_tokens).toBe(0);
  });

  it('a change of tools invalidates everything; of system, system and messages; of tool_choice or thinking, only messages', () => {
    const base = chat(3);
    const systemOnly = (c: PromptCache, b: Body) => applyTo(c, b).cache_read_input_tokens;
    const prime = () => {
      const c = new PromptCache();
      applyTo(c, base);
      return c;
    };
    const full = systemOnly(prime(), base);
    const toolsAndSystem = applyTo(prime(), { ...base, messages: chat(3).messages.slice(0, 1) }).cache_read_input_tokens;
    expect(full).toBeGreaterThan(toolsAndSystem);
    expect(systemOnly(prime(), { ...base, tools: [...tools, { name: 'patch', input_schema: { type: 'object' } }] })).toBe(0);
    expect(systemOnly(prime(), { ...base, system: [{ type: 'text', text: big('other'), cache_control: EPH }] })).toBe(0);
    // tool_choice or thinking changed: the system breakpoint (tools + system) is still read, the messages are not.
    const noneChoice = systemOnly(prime(), { ...base, tool_choice: { type: 'none' } });
    const thinking = systemOnly(prime(), { ...base, thinking: { type: 'adaptive' } });
    expect(noneChoice).toBeGreaterThan(0);
    expect(noneChoice).toBeLessThan(full);
    expect(thinking).toBe(noneChoice);
  });

  it('splits the creation by TTL and expires entries after their TTL', () => {
    let now = 0;
    const cache = new PromptCache(() => now);
    const b = chat(2, { system: [{ type: 'text', text: big('system'), cache_control: { type: 'ephemeral', ttl: '1h' } }] });
    const first = applyTo(cache, b);
    expect(first.cache_creation.ephemeral_1h_input_tokens).toBeGreaterThan(0);
    expect(first.cache_creation.ephemeral_5m_input_tokens).toBeGreaterThan(0);
    now = 6 * 60_000; // the 5m entry is gone, the 1h one is not
    const later = applyTo(cache, b);
    expect(later.cache_read_input_tokens).toBe(first.cache_creation.ephemeral_1h_input_tokens);
    now += 61 * 60_000;
    expect(applyTo(cache, b).cache_read_input_tokens).toBe(0);
  });
});

describe('the validator: cache_control and compaction', () => {
  const signer = createBlockSigner();
  const body = (extra: Record<string, unknown> = {}) => ({
    model: 'claude-sonnet-4-6',
    max_tokens: 10,
    messages: [{ role: 'user', content: 'hi' }],
    ...extra,
  });

  it('refuses more than 4 breakpoints, a bad ttl, and a 1h breakpoint after a 5m one', () => {
    const blocks = (n: number) => Array.from({ length: n }, (_, i) => ({ type: 'text', text: `s${i}`, cache_control: EPH }));
    expect(validateRequest(body({ system: blocks(4) }), signer)).toBeUndefined();
    expect(validateRequest(body({ system: blocks(5) }), signer)).toMatch(/A maximum of 4 blocks with cache_control/);
    expect(
      validateRequest(body({ system: [{ type: 'text', text: 'a', cache_control: { type: 'ephemeral', ttl: '2h' } }] }), signer),
    ).toMatch(/ttl: Input should be '5m' or '1h'/);
    const ordered = [
      { type: 'text', text: 'a', cache_control: { type: 'ephemeral', ttl: '1h' } },
      { type: 'text', text: 'b', cache_control: EPH },
    ];
    expect(validateRequest(body({ system: ordered }), signer)).toBeUndefined();
    expect(validateRequest(body({ system: [...ordered].reverse() }), signer)).toMatch(/ttl='1h' cannot come after one with ttl='5m'/);
  });

  it('accepts compaction only with the beta header, a supported model and a trigger of at least 50 000', () => {
    const edit = (value: number) => ({
      context_management: { edits: [{ type: 'compact_20260112', trigger: { type: 'input_tokens', value } }] },
    });
    expect(validateRequest(body(edit(100_000)), signer)).toMatch(/requires the beta header/);
    expect(validateRequest(body(edit(100_000)), signer, [COMPACTION_BETA])).toBeUndefined();
    expect(validateRequest(body(edit(10_000)), signer, [COMPACTION_BETA])).toMatch(/greater than or equal to 50000/);
    expect(validateRequest({ ...body(edit(100_000)), model: 'claude-sonnet-4-5' }, signer, [COMPACTION_BETA])).toMatch(/not supported/);
  });
});

/** An SSE event's data, loosely typed for the assertions. */
interface Ev {
  type: string;
  index?: number;
  content_block: Record<string, unknown> & { type: string };
  delta: { type?: string; content?: string; encrypted_content?: string };
  usage: { iterations: Array<{ type: string }> };
}

describe('compaction through the server', () => {
  let server: MessagesApiServer;
  beforeAll(async () => {
    server = await startMessagesApiServer();
  });
  afterAll(async () => {
    await server.close();
  });

  const post = (body: unknown, beta = true) =>
    fetch(`${server.url}/v1/messages`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': 'k', ...(beta ? { 'anthropic-beta': COMPACTION_BETA } : {}) },
      body: JSON.stringify(body),
    });
  const compacting = (messages: unknown[]) => ({
    model: 'claude-sonnet-4-6',
    max_tokens: 100,
    stream: true,
    messages,
    context_management: { edits: [{ type: 'compact_20260112', trigger: { type: 'input_tokens', value: 50_000 } }] },
  });
  const long = 'y'.repeat(240_000); // ~60 000 tokens

  it('streams a compaction block (compaction_delta) first when the trigger is crossed, and takes it back verbatim only', async () => {
    server.enqueue({ kind: 'message', content: [{ type: 'text', text: 'done' }] });
    const res = await post(compacting([{ role: 'user', content: long }]));
    expect(res.status).toBe(200);
    const events = (await res.text())
      .split('\n\n')
      .filter(Boolean)
      .map((c) => JSON.parse(/^data: (.*)$/m.exec(c)![1]!) as Ev);
    const start = events.find((e) => e.type === 'content_block_start')!;
    expect(start.index).toBe(0);
    expect(start.content_block.type).toBe('compaction');
    const delta = events.find((e) => e.delta?.type === 'compaction_delta')!;
    expect(delta.delta.content).toMatch(/Summary of the conversation/);
    const usage = events.find((e) => e.type === 'message_delta')!.usage;
    expect(usage.iterations.map((i) => i.type)).toEqual(['compaction', 'message']);
    const block = { ...start.content_block, content: delta.delta.content, encrypted_content: delta.delta.encrypted_content };

    // Sent back as returned: accepted, no second compaction (the input before the block is dropped).
    server.enqueue({ kind: 'message', content: [{ type: 'text', text: 'ok' }] });
    const history = [
      { role: 'user', content: long },
      { role: 'assistant', content: [block, { type: 'text', text: 'done' }] },
      { role: 'user', content: 'next' },
    ];
    const again = await post(compacting(history));
    expect(again.status).toBe(200);
    expect(await again.text()).not.toContain('compaction_delta');

    // Modified, or without the beta header: refused.
    const tampered = [history[0], { role: 'assistant', content: [{ ...block, content: 'other summary' }] }, history[2]];
    expect((await post(compacting(tampered))).status).toBe(400);
    expect(server.violations.at(-1)!.message).toMatch(/Invalid `signature` in `compaction` block/);
    const { context_management: _cm, ...plain } = compacting(history);
    void _cm;
    expect((await post(plain, false)).status).toBe(400);
    expect(server.violations.at(-1)!.message).toMatch(/require the beta header/);
  });
});
