import { describe, it, expect } from '@jest/globals';
import { createBlockSigner } from './signing.ts';
import { fakeModel, validateRequest } from './validate-request.ts';

const signer = createBlockSigner('validator-test-key');
const otherServer = createBlockSigner('another-server');
const check = (body: unknown) => validateRequest(body, signer);

type Body = Record<string, unknown>;
const TOOLS = [{ name: 'bash', description: 'run', input_schema: { type: 'object' } }];
const WEB_SEARCH = { type: 'web_search_20250305', name: 'web_search', max_uses: 5 };
const u = (content: unknown) => ({ role: 'user', content });
const a = (content: unknown) => ({ role: 'assistant', content });
const text = (t: string, extra: Body = {}) => ({ type: 'text', text: t, ...extra });
const toolUse = (id: string) => ({ type: 'tool_use', id, name: 'bash', input: { command: 'ls' } });
const result = (id: string, content: unknown = 'ok') => ({ type: 'tool_result', tool_use_id: id, content });
const thinking = (t: string) => ({ type: 'thinking', thinking: t, signature: signer.signThinking(t) });
const req = (messages: unknown[], extra: Body = {}): Body => ({ model: 'claude-sonnet-5-5', max_tokens: 1000, messages, ...extra });
const hi = [u('hi')];
/** A tool loop: the user asks, the model calls bash, the result comes back. */
const loop = (assistant: unknown[]) => [u('list files'), a(assistant), u([result('toolu_1')])];

describe('request validator: required fields', () => {
  it('needs model, max_tokens and messages', () => {
    expect(check({ max_tokens: 10, messages: hi })).toBe('model: Field required');
    expect(check({ model: 'claude-sonnet-5-5', messages: hi })).toBe('max_tokens: Field required');
    expect(check({ model: 'claude-sonnet-5-5', max_tokens: 0, messages: hi })).toBe(
      'max_tokens: Input should be greater than or equal to 1',
    );
    expect(check({ model: 'claude-sonnet-5-5', max_tokens: 10 })).toBe('messages: Field required');
    expect(check({ model: 'claude-sonnet-5-5', max_tokens: 10, messages: [] })).toBe('messages: at least one message is required');
    expect(check('not an object')).toMatch(/^There was an error parsing the body/);
    expect(check(req(hi))).toBeUndefined();
  });

  it('refuses max_tokens above the model output limit (unknown models: 128000)', () => {
    expect(check(req(hi, { model: 'claude-sonnet-4-5', max_tokens: 64_001 }))).toBe(
      'max_tokens: 64001 > 64000, which is the maximum allowed number of output tokens for claude-sonnet-4-5',
    );
    expect(check(req(hi, { model: 'claude-sonnet-4-5', max_tokens: 64_000 }))).toBeUndefined();
    expect(check(req(hi, { model: 'bedrock-offline', max_tokens: 64_001 }))).toMatch(/^max_tokens: 64001 > 64000/);
    expect(check(req(hi, { model: 'claude-someday', max_tokens: 128_001 }))).toMatch(/^max_tokens: 128001 > 128000/);
    expect(check(req(hi, { model: 'claude-someday', max_tokens: 128_000 }))).toBeUndefined();
  });
});

describe('request validator: roles and content', () => {
  it('needs roles alternating, starting with user', () => {
    expect(check(req([a('hello'), u('hi')]))).toBe('messages: first message must use the "user" role');
    expect(check(req([u('a'), u('b')]))).toMatch(
      /^messages: roles must alternate between "user" and "assistant", but found multiple "user" roles in a row/,
    );
    expect(check(req([u('a'), a('b'), a('c'), u('d')]))).toMatch(/multiple "assistant" roles in a row \(messages.1 and messages.2\)/);
    expect(check(req([u('a'), a('b'), u('c')]))).toBeUndefined();
  });

  it('needs non-empty content', () => {
    expect(check(req([u([])]))).toBe(
      'messages.0: all messages must have non-empty content except for the optional final assistant message',
    );
    expect(check(req([u('a'), a(''), u('b')]))).toBe(
      'messages.1: all messages must have non-empty content except for the optional final assistant message',
    );
    expect(check(req([u([text('a')])]))).toBeUndefined();
  });

  it('needs text blocks non-empty and not whitespace-only, in messages, tool results and system', () => {
    expect(check(req([u([text('')])]))).toBe('messages.0.content.0: text content blocks must be non-empty');
    expect(check(req([u([text('a'), text(' \n\t')])]))).toBe('messages.0.content.1: text content blocks must contain non-whitespace text');
    expect(check(req([u('   ')]))).toBe('messages.0.content: text content blocks must contain non-whitespace text');
    expect(
      check(
        req(
          loop([toolUse('toolu_1')])
            .slice(0, 2)
            .concat([u([result('toolu_1', [text(' ')])])]),
          { tools: TOOLS },
        ),
      ),
    ).toBe('messages.2.content.0.content.0: text content blocks must contain non-whitespace text');
    expect(check(req(hi, { system: [text('')] }))).toBe('system.0: text content blocks must be non-empty');
    expect(check(req([u([text('a'), text(' b ')])], { system: [text('be brief')] }))).toBeUndefined();
    expect(
      check(
        req(
          loop([toolUse('toolu_1')])
            .slice(0, 2)
            .concat([u([result('toolu_1', [text('out')])])]),
          { tools: TOOLS },
        ),
      ),
    ).toBeUndefined();
  });
});

describe('request validator: tool use and tool results', () => {
  it('needs every tool_use answered by a tool_result in the very next user turn', () => {
    const unanswered = [u('go'), a([text('Running.'), toolUse('toolu_1'), toolUse('toolu_2')]), u([result('toolu_1'), text('and then?')])];
    expect(check(req(unanswered, { tools: TOOLS }))).toBe(
      'messages.1: `tool_use` ids were found without `tool_result` blocks immediately after: toolu_2. Each `tool_use` block must have a corresponding `tool_result` block in the next message.',
    );
    const later = [u('go'), a([toolUse('toolu_1')]), u('what happened?'), a('nothing'), u([result('toolu_1')])];
    expect(check(req(later, { tools: TOOLS }))).toMatch(
      /^messages.1: `tool_use` ids were found without `tool_result` blocks immediately after: toolu_1\./,
    );
    const answered = [
      u('go'),
      a([text('Running.'), toolUse('toolu_1'), toolUse('toolu_2')]),
      u([result('toolu_2'), result('toolu_1'), text('and then?')]),
    ];
    expect(check(req(answered, { tools: TOOLS }))).toBeUndefined();
  });

  it('needs the tool results first in their user turn', () => {
    expect(check(req([u('go'), a([toolUse('toolu_1')]), u([text('here:'), result('toolu_1')])], { tools: TOOLS }))).toBe(
      'messages.2.content.1: `tool_result` blocks must come first in the `user` message, before any other content (found after messages.2.content.0)',
    );
    expect(check(req([u('go'), a([toolUse('toolu_1')]), u([result('toolu_1'), text('here:')])], { tools: TOOLS }))).toBeUndefined();
  });

  it('refuses a tool_result without its tool_use in the previous turn', () => {
    expect(check(req([u('go'), a('no tools'), u([result('toolu_9')])], { tools: TOOLS }))).toBe(
      'messages.2.content.0: unexpected `tool_use_id` found in `tool_result` blocks: toolu_9. Each `tool_result` block must have a corresponding `tool_use` block in the previous message.',
    );
    expect(check(req([u([result('toolu_9')])], { tools: TOOLS }))).toMatch(/^messages.0.content.0: unexpected `tool_use_id`/);
    expect(check(req(loop([toolUse('toolu_1')]), { tools: TOOLS }))).toBeUndefined();
  });

  it('needs tool_use ids unique', () => {
    const twice = [...loop([toolUse('toolu_1')]), a([toolUse('toolu_1')]), u([result('toolu_1')])];
    expect(check(req(twice, { tools: TOOLS }))).toBe(
      'messages.3.content.0: `tool_use` ids must be unique (toolu_1 is used more than once)',
    );
    const distinct = [...loop([toolUse('toolu_1')]), a([toolUse('toolu_2')]), u([result('toolu_2')])];
    expect(check(req(distinct, { tools: TOOLS }))).toBeUndefined();
  });

  it('needs tools defined when the history holds tool_use or tool_result blocks (a continuation sends them with tool_choice none)', () => {
    const history = [...loop([toolUse('toolu_1')]), a('Done.'), u('Summarise the session.')];
    expect(check(req(history))).toBe('Requests which include `tool_use` or `tool_result` blocks must define tools.');
    expect(check(req(history, { tools: [] }))).toBe('Requests which include `tool_use` or `tool_result` blocks must define tools.');
    expect(check(req(history, { tools: TOOLS, tool_choice: { type: 'none' } }))).toBeUndefined();
  });

  it('checks tool definitions: named, unique, with a schema', () => {
    expect(check(req(hi, { tools: [{ input_schema: { type: 'object' } }] }))).toBe('tools.0.custom.name: Field required');
    expect(check(req(hi, { tools: [{ name: 'bash' }] }))).toBe('tools.0.custom.input_schema: Field required');
    expect(check(req(hi, { tools: [...TOOLS, ...TOOLS] }))).toBe('tools: Tool names must be unique.');
    expect(check(req(hi, { tools: TOOLS }))).toBeUndefined();
  });

  it('accepts tool_choice auto, any, tool (named) and none only', () => {
    expect(check(req(hi, { tools: TOOLS, tool_choice: { type: 'required' } }))).toBe(
      "tool_choice: Input tag 'required' found using 'type' does not match any of the expected tags: 'auto', 'any', 'tool' or 'none'",
    );
    expect(check(req(hi, { tools: TOOLS, tool_choice: { type: 'tool' } }))).toBe('tool_choice.tool.name: Field required');
    for (const choice of [{ type: 'auto' }, { type: 'any' }, { type: 'tool', name: 'bash' }, { type: 'none' }]) {
      expect(check(req(hi, { tools: TOOLS, tool_choice: choice }))).toBeUndefined();
    }
  });

  it('with thinking on, accepts only tool_choice auto or none', () => {
    const on = { thinking: { type: 'adaptive' } };
    expect(check(req(hi, { ...on, tools: TOOLS, tool_choice: { type: 'any' } }))).toBe(
      'Thinking may not be enabled when tool_choice forces tool use.',
    );
    expect(check(req(hi, { ...on, tools: TOOLS, tool_choice: { type: 'tool', name: 'bash' } }))).toBe(
      'Thinking may not be enabled when tool_choice forces tool use.',
    );
    expect(check(req(hi, { ...on, tools: TOOLS, tool_choice: { type: 'auto' } }))).toBeUndefined();
    expect(check(req(hi, { ...on, tools: TOOLS, tool_choice: { type: 'none' } }))).toBeUndefined();
  });
});

describe('request validator: prefill and trailing whitespace', () => {
  const PREFILL = 'This model does not support assistant message prefill. The conversation must end with a user message.';

  it('refuses a request ending in an assistant turn, except for the old models that accept a prefill', () => {
    const prefilled = [u('Write a poem.'), a('Here is')];
    for (const model of ['claude-sonnet-5-5', 'claude-opus-4-6', 'claude-sonnet-4-5', 'bedrock-offline', 'claude-someday']) {
      expect(check(req(prefilled, { model }))).toBe(PREFILL);
    }
    expect(check(req(prefilled, { model: 'claude-3-5-sonnet-20241022' }))).toBeUndefined();
    expect(check(req([u('Write a poem.'), a('Here is'), u('Go on.')]))).toBeUndefined();
  });

  it('accepts a final paused turn (it holds a server_tool_use block), sent back to be resumed', () => {
    const paused = a([
      text('Let me search.'),
      { type: 'server_tool_use', id: 'srvtoolu_1', name: 'web_search', input: { query: 'bedrock' } },
      { type: 'web_search_tool_result', tool_use_id: 'srvtoolu_1', content: [] },
    ]);
    expect(check(req([u('Search for bedrock.'), paused], { tools: [WEB_SEARCH] }))).toBeUndefined();
    expect(check(req([u('Search for bedrock.'), a([text('Let me search.')])], { tools: [WEB_SEARCH] }))).toBe(PREFILL);
  });

  it('refuses a final assistant turn ending with whitespace', () => {
    const paused = a([{ type: 'server_tool_use', id: 'srvtoolu_1', name: 'web_search', input: {} }, text('Searching. ')]);
    expect(check(req([u('Search.'), paused], { tools: [WEB_SEARCH] }))).toBe(
      'messages: final assistant content cannot end with trailing whitespace',
    );
    expect(check(req([u('Hi'), a('Hello \n')], { model: 'claude-3-5-sonnet-20241022' }))).toBe(
      'messages: final assistant content cannot end with trailing whitespace',
    );
    expect(check(req([u('Hi'), a('Hello')], { model: 'claude-3-5-sonnet-20241022' }))).toBeUndefined();
  });
});

describe('request validator: cache_control', () => {
  const cc = { cache_control: { type: 'ephemeral' } };
  it('allows at most 4 blocks with cache_control across tools, system and messages', () => {
    const five = req([u([text('a', cc), text('b', cc)]), a([text('c', cc)]), u([text('d', cc)])], { system: [text('sys', cc)] });
    expect(check(five)).toBe('A maximum of 4 blocks with cache_control may be provided. Found 5.');
    const withTool = req([u([text('a', cc)]), a('c'), u([text('d', cc)])], { system: [text('sys', cc)], tools: [{ ...TOOLS[0], ...cc }] });
    expect(check(withTool)).toBeUndefined();
    const nested = req([u('go'), a([toolUse('toolu_1')]), u([result('toolu_1', [text('out', cc)]), text('x', cc)])], {
      system: [text('sys', cc)],
      tools: [{ ...TOOLS[0], ...cc }],
    });
    expect(check(nested)).toBeUndefined();
    const nestedFive = { ...nested, messages: [u([text('go', cc)]), ...(nested.messages as unknown[]).slice(1)] };
    expect(check(nestedFive)).toBe('A maximum of 4 blocks with cache_control may be provided. Found 5.');
  });

  it('refuses cache_control on thinking blocks', () => {
    const t = { ...thinking('hmm'), ...cc };
    expect(check(req([u('q'), a([t, text('a')]), u('b')]))).toMatch(
      /^messages.1.content.0.thinking.cache_control: Extra inputs are not permitted/,
    );
    expect(check(req([u('q'), a([thinking('hmm'), text('a', cc)]), u('b')]))).toBeUndefined();
  });
});

describe('request validator: thinking configuration', () => {
  it('needs 1024 <= budget_tokens < max_tokens', () => {
    const model = 'claude-sonnet-4-5';
    expect(check(req(hi, { model, max_tokens: 8000, thinking: { type: 'enabled', budget_tokens: 1000 } }))).toBe(
      'thinking.enabled.budget_tokens: Input should be greater than or equal to 1024',
    );
    expect(check(req(hi, { model, max_tokens: 8000, thinking: { type: 'enabled' } }))).toBe(
      'thinking.enabled.budget_tokens: Field required',
    );
    expect(check(req(hi, { model, max_tokens: 8000, thinking: { type: 'enabled', budget_tokens: 8000 } }))).toMatch(
      /^`max_tokens` must be greater than `thinking.budget_tokens`\./,
    );
    expect(check(req(hi, { model, max_tokens: 8000, thinking: { type: 'enabled', budget_tokens: 1024 } }))).toBeUndefined();
    expect(check(req(hi, { model, max_tokens: 8000, thinking: { type: 'enabled', budget_tokens: 7999 } }))).toBeUndefined();
  });

  it('accepts only the thinking types of the model family', () => {
    const enabled = { thinking: { type: 'enabled', budget_tokens: 2000 }, max_tokens: 8000 };
    const adaptive = { thinking: { type: 'adaptive', display: 'summarized' }, output_config: { effort: 'high' } };
    for (const model of ['claude-sonnet-5-5', 'claude-opus-5', 'claude-haiku-5-5', 'claude-fable-5-1', 'claude-opus-4-7']) {
      expect(check(req(hi, { model, ...enabled }))).toBe(
        '`thinking.type.enabled` is not supported for this model. Use `thinking.type.adaptive` and `output_config.effort` to control thinking behavior.',
      );
      expect(check(req(hi, { model, ...adaptive }))).toBeUndefined();
    }
    for (const model of ['claude-sonnet-4-5', 'claude-haiku-4-5-20251001']) {
      expect(check(req(hi, { model, ...adaptive }))).toBe(
        '`thinking.type.adaptive` is not supported for this model. Use `thinking.type.enabled` with `budget_tokens`.',
      );
      expect(check(req(hi, { model, ...enabled }))).toBeUndefined();
    }
    for (const model of ['claude-opus-4-6', 'bedrock-offline']) {
      expect(check(req(hi, { model, ...enabled }))).toBeUndefined();
      expect(check(req(hi, { model, ...adaptive }))).toBeUndefined();
    }
    expect(check(req(hi, { thinking: { type: 'on' } }))).toMatch(
      /^thinking: Input tag 'on' found using 'type' does not match any of the expected tags/,
    );
    expect(check(req(hi, { thinking: { type: 'disabled' } }))).toBeUndefined();
  });

  it('accepts output_config.effort low, medium, high, xhigh or max only', () => {
    expect(check(req(hi, { output_config: { effort: 'extreme' } }))).toBe(
      "output_config.effort: Input should be 'low', 'medium', 'high', 'xhigh' or 'max'",
    );
    for (const effort of ['low', 'medium', 'high', 'xhigh', 'max']) expect(check(req(hi, { output_config: { effort } }))).toBeUndefined();
  });

  it('has its own model table', () => {
    expect(fakeModel('claude-opus-4-7')).toEqual({
      maxOutputTokens: 128_000,
      adaptiveThinking: true,
      budgetThinking: false,
      prefill: false,
    });
    expect(fakeModel('claude-sonnet-4-5-20250929')).toEqual({
      maxOutputTokens: 64_000,
      adaptiveThinking: false,
      budgetThinking: true,
      prefill: false,
    });
    expect(fakeModel('bedrock-offline')).toEqual({ maxOutputTokens: 64_000, adaptiveThinking: true, budgetThinking: true, prefill: false });
    expect(fakeModel('claude-3-5-haiku-20241022').prefill).toBe(true);
  });
});

describe('request validator: thinking blocks', () => {
  it('accepts thinking blocks only in assistant turns', () => {
    expect(check(req([u([thinking('hmm'), text('hi')])]))).toBe(
      'messages.0.content.0: `thinking` blocks are only allowed in `assistant` messages',
    );
    expect(check(req([u([{ type: 'redacted_thinking', data: signer.redactedData() }, text('hi')])]))).toBe(
      'messages.0.content.0: `redacted_thinking` blocks are only allowed in `assistant` messages',
    );
    expect(check(req([u('q'), a([thinking('hmm'), text('answer')]), u('next')]))).toBeUndefined();
  });

  it('accepts a thinking block only with the signature this server issued for exactly its text', () => {
    const signed = thinking('Let me consider the files.');
    const ok = (block: unknown) => check(req([u('q'), a([block, text('answer')]), u('next')]));
    expect(ok(signed)).toBeUndefined();
    expect(ok({ ...signed, thinking: 'Let me consider the files!' })).toBe('messages.1.content.0: Invalid `signature` in `thinking` block');
    expect(ok({ ...signed, thinking: 'Let me consider the files. ' })).toBe(
      'messages.1.content.0: Invalid `signature` in `thinking` block',
    );
    expect(ok({ ...signed, signature: otherServer.signThinking(signed.thinking) })).toBe(
      'messages.1.content.0: Invalid `signature` in `thinking` block',
    );
    expect(ok({ ...signed, signature: 'c2lnbmF0dXJl' })).toBe('messages.1.content.0: Invalid `signature` in `thinking` block');
    expect(ok({ ...signed, signature: '' })).toBe('messages.1.content.0: Invalid `signature` in `thinking` block');
    expect(ok({ type: 'thinking', thinking: signed.thinking })).toBe('messages.1.content.0: Invalid `signature` in `thinking` block');
    // A block whose text is not displayed ("") is valid with its own signature.
    expect(ok(thinking(''))).toBeUndefined();
  });

  it('accepts redacted_thinking data only when this server issued it', () => {
    const ok = (data: unknown) => check(req([u('q'), a([{ type: 'redacted_thinking', data }, text('answer')]), u('next')]));
    const data = signer.redactedData();
    expect(ok(data)).toBeUndefined();
    expect(ok(otherServer.redactedData())).toBe('messages.1.content.0: Invalid `data` in `redacted_thinking` block');
    const raw = Buffer.from(data, 'base64');
    raw[0] = raw[0]! ^ 1;
    expect(ok(raw.toString('base64'))).toBe('messages.1.content.0: Invalid `data` in `redacted_thinking` block');
    expect(ok('EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIw')).toBe(
      'messages.1.content.0: Invalid `data` in `redacted_thinking` block',
    );
  });

  it('with manual thinking on, needs the assistant turn before final tool results to start with thinking', () => {
    const on = { tools: TOOLS, model: 'claude-sonnet-4-5', max_tokens: 4000, thinking: { type: 'enabled', budget_tokens: 1024 } };
    expect(check(req(loop([toolUse('toolu_1')]), on))).toBe(
      'messages.1.content.0.type: Expected `thinking` or `redacted_thinking`, but found `tool_use`. When `thinking` is enabled, a final `assistant` message must start with a thinking block (preceding the lastmost set of `tool_use` and `tool_result` blocks). We recommend you include thinking blocks from previous turns. To avoid this requirement, disable `thinking`. Please consult our documentation at https://docs.claude.com/en/docs/build-with-claude/extended-thinking',
    );
    expect(
      check(
        req(loop([text('Running.'), toolUse('toolu_1')]), {
          ...on,
          model: 'claude-sonnet-4-5',
          max_tokens: 4000,
          thinking: { type: 'enabled', budget_tokens: 1024 },
        }),
      ),
    ).toMatch(/^messages.1.content.0.type: Expected `thinking` or `redacted_thinking`, but found `text`\./);
    expect(check(req(loop([thinking('I should list them.'), toolUse('toolu_1')]), on))).toBeUndefined();
    expect(check(req(loop([{ type: 'redacted_thinking', data: signer.redactedData() }, toolUse('toolu_1')]), on))).toBeUndefined();
    // Thinking off, or a last user turn that is not a tool result: no such requirement.
    expect(check(req(loop([toolUse('toolu_1')]), { tools: TOOLS }))).toBeUndefined();
    expect(check(req(loop([toolUse('toolu_1')]), { tools: TOOLS, thinking: { type: 'disabled' } }))).toBeUndefined();
    expect(check(req([...loop([toolUse('toolu_1')]), a('Done.'), u('thanks')], on))).toBeUndefined();
    // Adaptive thinking: the model may choose not to think on a turn, so no such requirement.
    expect(check(req(loop([toolUse('toolu_1')]), { tools: TOOLS, thinking: { type: 'adaptive' } }))).toBeUndefined();
  });

  it('with manual thinking on, needs a final paused turn to start with thinking too', () => {
    const search = { type: 'server_tool_use', id: 'srvtoolu_1', name: 'web_search', input: { query: 'q' } };
    const paused = (blocks: unknown[]) =>
      req([u('Search.'), a(blocks)], {
        tools: [WEB_SEARCH],
        model: 'claude-sonnet-4-5',
        max_tokens: 4000,
        thinking: { type: 'enabled', budget_tokens: 1024 },
      });
    expect(check(paused([text('Searching.'), search]))).toMatch(
      /^messages.1.content.0.type: Expected `thinking` or `redacted_thinking`, but found `text`\./,
    );
    expect(check(paused([thinking('Search first.'), text('Searching.'), search]))).toBeUndefined();
    expect(check({ ...paused([text('Searching.'), search]), thinking: { type: 'disabled' } })).toBeUndefined();
  });
});

describe('request validator: server tools', () => {
  const search = (id = 'srvtoolu_1') => ({ type: 'server_tool_use', id, name: 'web_search', input: { query: 'q' } });
  const searchResult = (id = 'srvtoolu_1') => ({
    type: 'web_search_tool_result',
    tool_use_id: id,
    content: [{ type: 'web_search_result', url: 'https://x.test', title: 'X', encrypted_content: 'e' }],
  });

  it('needs server tools named by their type', () => {
    expect(check(req(hi, { tools: [{ type: 'web_search_20250305', max_uses: 5 }] }))).toBe(
      'tools.0.web_search_20250305.name: Field required',
    );
    expect(check(req(hi, { tools: [{ type: 'web_fetch_20250910', name: 'fetch' }] }))).toBe(
      "tools.0.web_fetch_20250910.name: Input should be 'web_fetch'",
    );
    expect(check(req(hi, { tools: [{ type: 'web_browse_20250101', name: 'web_browse' }] }))).toMatch(
      /^tools.0: Input tag 'web_browse_20250101' found using 'type'/,
    );
    expect(
      check(req(hi, { tools: [...TOOLS, WEB_SEARCH, { type: 'web_fetch_20250910', name: 'web_fetch', max_uses: 5 }] })),
    ).toBeUndefined();
  });

  it('needs a server tool result after its server_tool_use in the same assistant turn', () => {
    const ask = (blocks: unknown[]) => check(req([u('Search.'), a(blocks), u('thanks')], { tools: [WEB_SEARCH] }));
    expect(ask([searchResult(), search(), text('Found it.')])).toBe(
      'messages.1.content.0: `web_search_tool_result` block with tool_use_id srvtoolu_1 must follow the `server_tool_use` block with that id in the same message',
    );
    expect(ask([search('srvtoolu_1'), searchResult('srvtoolu_2'), text('Found it.')])).toMatch(/tool_use_id srvtoolu_2 must follow/);
    expect(check(req([u('Search.'), a([search()]), u([searchResult()])], { tools: [WEB_SEARCH] }))).toBe(
      'messages.2.content.0: `web_search_tool_result` blocks are only allowed in `assistant` messages',
    );
    expect(ask([text('Searching.'), search(), searchResult(), text('Found it.', { citations: [] })])).toBeUndefined();
  });

  it('needs the server tool a server_tool_use calls defined', () => {
    const history = [u('Search.'), a([search(), searchResult(), text('Found it.')]), u('thanks')];
    expect(check(req(history, { tools: TOOLS }))).toBe(
      'messages.1.content.0: `server_tool_use` block calls `web_search`, but `tools` defines no server tool of that name',
    );
    expect(check(req(history, { tools: [...TOOLS, WEB_SEARCH], tool_choice: { type: 'none' } }))).toBeUndefined();
  });
});
