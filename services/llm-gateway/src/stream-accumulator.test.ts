import { describe, it, expect } from '@jest/globals';
import { StopReason, TokenDeltaKind } from '@bedrock/contracts';
import { StreamAccumulator, type AccumulatorResult } from './stream-accumulator.ts';

type Event = { readonly type: string; readonly [key: string]: unknown };

const start = (index: number, content_block: Record<string, unknown>): Event => ({ type: 'content_block_start', index, content_block });
const delta = (index: number, d: Record<string, unknown>): Event => ({ type: 'content_block_delta', index, delta: d });
const stop = (index: number): Event => ({ type: 'content_block_stop', index });
const messageStart = (usage: Record<string, unknown> = { input_tokens: 10, output_tokens: 1 }): Event => ({
  type: 'message_start',
  message: { id: 'msg_1', type: 'message', role: 'assistant', model: 'claude-opus-5', content: [], usage },
});
const messageDelta = (
  stop_reason: string | null,
  usage: Record<string, unknown> = { output_tokens: 20 },
  extra: Record<string, unknown> = {},
): Event => ({
  type: 'message_delta',
  delta: { stop_reason, stop_sequence: null, ...extra },
  usage,
});

function fold(events: readonly Event[]) {
  const deltas: Array<[number, string, TokenDeltaKind]> = [];
  const acc = new StreamAccumulator((i, t, k) => deltas.push([i, t, k]));
  for (const e of events) acc.push(e);
  return { result: acc.finish(), deltas };
}

function ok(result: AccumulatorResult) {
  if (!result.ok) throw new Error(`expected a result, got ${result.reason}: ${result.detail}`);
  return result;
}

describe('StreamAccumulator', () => {
  it('keeps a thinking block with its signature, streams its text as THINKING deltas and the answer as TEXT', () => {
    const { result, deltas } = fold([
      messageStart(),
      start(0, { type: 'thinking', thinking: '', signature: '' }),
      delta(0, { type: 'thinking_delta', thinking: 'Let me ' }),
      delta(0, { type: 'thinking_delta', thinking: 'think.' }),
      delta(0, { type: 'signature_delta', signature: 'EqQBCkYIARgCIkB' }),
      delta(0, { type: 'signature_delta', signature: 'more' }),
      stop(0),
      start(1, { type: 'text', text: '' }),
      delta(1, { type: 'text_delta', text: 'The answer.' }),
      stop(1),
      messageDelta('end_turn'),
      { type: 'message_stop' },
    ]);
    const r = ok(result);
    expect(r.content).toEqual([
      { type: 'thinking', thinking: 'Let me think.', signature: 'EqQBCkYIARgCIkBmore' },
      { type: 'text', text: 'The answer.' },
    ]);
    expect(deltas).toEqual([
      [0, 'Let me ', TokenDeltaKind.THINKING],
      [0, 'think.', TokenDeltaKind.THINKING],
      [1, 'The answer.', TokenDeltaKind.TEXT],
    ]);
    expect(r.cutBlockTypes).toEqual([]);
    expect(r.unknownBlockTypes).toEqual([]);
  });

  it('keeps a thinking block whose text is empty (display omitted) when it has a signature', () => {
    const r = ok(
      fold([
        messageStart(),
        start(0, { type: 'thinking', thinking: '', signature: '' }),
        delta(0, { type: 'signature_delta', signature: 'sig' }),
        stop(0),
        messageDelta('end_turn'),
      ]).result,
    );
    expect(r.content).toEqual([{ type: 'thinking', thinking: '', signature: 'sig' }]);
  });

  it('leaves out a thinking block without a signature or without its content_block_stop (cut)', () => {
    const unsigned = ok(
      fold([
        messageStart(),
        start(0, { type: 'thinking', thinking: '' }),
        delta(0, { type: 'thinking_delta', thinking: 'hm' }),
        stop(0),
        start(1, { type: 'text', text: 'x' }),
        stop(1),
        messageDelta('end_turn'),
      ]).result,
    );
    expect(unsigned.content).toEqual([{ type: 'text', text: 'x' }]);
    expect(unsigned.cutBlockTypes).toEqual(['thinking']);
    const cut = fold([
      messageStart(),
      start(0, { type: 'thinking', thinking: '' }),
      delta(0, { type: 'thinking_delta', thinking: 'a long thought' }),
      delta(0, { type: 'signature_delta', signature: 'sig' }),
      messageDelta('max_tokens'),
      { type: 'message_stop' },
    ]);
    const r = ok(cut.result);
    expect(r.content).toEqual([]);
    expect(r.cutBlockTypes).toEqual(['thinking']);
    expect(r.stopReason).toBe(StopReason.MAX_TOKENS);
    // The user saw it stream all the same.
    expect(cut.deltas).toEqual([[0, 'a long thought', TokenDeltaKind.THINKING]]);
  });

  it('keeps redacted thinking with the data of its start block', () => {
    const r = ok(
      fold([
        messageStart(),
        start(0, { type: 'redacted_thinking', data: 'EmwKAhgBEgy3va3pzix' }),
        stop(0),
        start(1, { type: 'text', text: '' }),
        delta(1, { type: 'text_delta', text: 'ok' }),
        stop(1),
        messageDelta('end_turn'),
      ]).result,
    );
    expect(r.content).toEqual([
      { type: 'redacted_thinking', data: 'EmwKAhgBEgy3va3pzix' },
      { type: 'text', text: 'ok' },
    ]);
  });

  it('keeps server tool blocks verbatim: server_tool_use with its streamed input, results as they started', () => {
    const searchResult = {
      type: 'web_search_tool_result',
      tool_use_id: 'srvtoolu_1',
      content: [
        { type: 'web_search_result', url: 'https://example.com/a', title: 'A', encrypted_content: 'Eq0B', page_age: 'April 1, 2025' },
      ],
    };
    const fetchResult = {
      type: 'web_fetch_tool_result',
      tool_use_id: 'srvtoolu_2',
      content: {
        type: 'web_fetch_result',
        url: 'https://example.com/b',
        content: { type: 'document', source: { type: 'text', media_type: 'text/plain', data: 'hello' } },
      },
    };
    const { result, deltas } = fold([
      messageStart(),
      start(0, { type: 'server_tool_use', id: 'srvtoolu_1', name: 'web_search', input: {}, caller: { type: 'direct' } }),
      delta(0, { type: 'input_json_delta', partial_json: '{"query": "bed' }),
      delta(0, { type: 'input_json_delta', partial_json: 'rock"}' }),
      stop(0),
      start(1, searchResult),
      stop(1),
      start(2, { type: 'server_tool_use', id: 'srvtoolu_2', name: 'web_fetch', input: {} }),
      delta(2, { type: 'input_json_delta', partial_json: '{"url":"https://example.com/b"}' }),
      stop(2),
      start(3, fetchResult),
      stop(3),
      start(4, {
        type: 'code_execution_tool_result',
        tool_use_id: 'srvtoolu_3',
        content: { type: 'code_execution_result', stdout: '1', stderr: '', return_code: 0 },
      }),
      stop(4),
      messageDelta('end_turn', { output_tokens: 40, server_tool_use: { web_search_requests: 1, web_fetch_requests: 1 } }),
    ]);
    const r = ok(result);
    expect(r.content.map((b) => (b.type === 'server_tool' ? [b.blockType, JSON.parse(b.json)] : b))).toEqual([
      [
        'server_tool_use',
        { type: 'server_tool_use', id: 'srvtoolu_1', name: 'web_search', input: { query: 'bedrock' }, caller: { type: 'direct' } },
      ],
      ['web_search_tool_result', searchResult],
      ['server_tool_use', { type: 'server_tool_use', id: 'srvtoolu_2', name: 'web_fetch', input: { url: 'https://example.com/b' } }],
      ['web_fetch_tool_result', fetchResult],
      [
        'code_execution_tool_result',
        {
          type: 'code_execution_tool_result',
          tool_use_id: 'srvtoolu_3',
          content: { type: 'code_execution_result', stdout: '1', stderr: '', return_code: 0 },
        },
      ],
    ]);
    expect(r.usage).toMatchObject({ webSearchRequests: 1, webFetchRequests: 1 });
    expect(deltas).toEqual([]);
    expect(r.unknownBlockTypes).toEqual([]);
  });

  it('leaves out a server_tool_use cut before its stop, and reports a completed one whose input is not an object', () => {
    const cut = ok(
      fold([
        messageStart(),
        start(0, { type: 'server_tool_use', id: 's', name: 'web_search', input: {} }),
        delta(0, { type: 'input_json_delta', partial_json: '{"que' }),
        messageDelta('max_tokens'),
      ]).result,
    );
    expect(cut.content).toEqual([]);
    expect(cut.cutBlockTypes).toEqual(['server_tool_use']);
    expect(cut.cutToolNames).toEqual([]);
    const bad = fold([
      messageStart(),
      start(0, { type: 'server_tool_use', id: 's', name: 'web_search', input: {} }),
      delta(0, { type: 'input_json_delta', partial_json: '[1]' }),
      stop(0),
      messageDelta('end_turn'),
    ]).result;
    expect(bad).toEqual({
      ok: false,
      reason: 'malformed_tool_input',
      detail: 'the input of server tool call web_search (s) is not a JSON object',
    });
  });

  it('keeps text citations: those of the start block, then each citations_delta, verbatim', () => {
    const first = {
      type: 'web_search_result_location',
      url: 'https://example.com/a',
      title: 'A',
      encrypted_index: 'Eo8B',
      cited_text: 'Bedrock is…',
    };
    const second = {
      type: 'web_search_result_location',
      url: 'https://example.com/b',
      title: null,
      encrypted_index: 'Eo8C',
      cited_text: 'More.',
    };
    const r = ok(
      fold([
        messageStart(),
        start(0, { type: 'text', text: '', citations: [first] }),
        delta(0, { type: 'citations_delta', citation: second }),
        delta(0, { type: 'text_delta', text: 'Bedrock is a product.' }),
        stop(0),
        start(1, { type: 'text', text: '' }),
        delta(1, { type: 'text_delta', text: ' Plain text.' }),
        stop(1),
        messageDelta('end_turn'),
      ]).result,
    );
    expect(r.content).toEqual([
      { type: 'text', text: 'Bedrock is a product.', citations: JSON.stringify([first, second]) },
      { type: 'text', text: ' Plain text.' },
    ]);
  });

  it('names tool calls cut by max_tokens and leaves them out; keeps the complete ones and the cut text', () => {
    const r = ok(
      fold([
        messageStart(),
        start(0, { type: 'text', text: '' }),
        delta(0, { type: 'text_delta', text: 'Writing two files' }),
        stop(0),
        start(1, { type: 'tool_use', id: 'toolu_1', name: 'bash', input: {} }),
        delta(1, { type: 'input_json_delta', partial_json: '{"command":"ls"}' }),
        stop(1),
        start(2, { type: 'tool_use', id: 'toolu_2', name: 'patch', input: {} }),
        delta(2, { type: 'input_json_delta', partial_json: '{"path":"a.txt","con' }),
        messageDelta('max_tokens'),
        { type: 'message_stop' },
      ]).result,
    );
    expect(r.content).toEqual([
      { type: 'text', text: 'Writing two files' },
      { type: 'tool_use', id: 'toolu_1', name: 'bash', inputJson: '{"command":"ls"}' },
    ]);
    expect(r.cutToolNames).toEqual(['patch']);
    expect(r.stopReason).toBe(StopReason.MAX_TOKENS);
  });

  it('reads thinking tokens, the 1-hour share of cache writes and server tool counts from usage; message_delta counts win', () => {
    const r = ok(
      fold([
        messageStart({
          input_tokens: 500,
          output_tokens: 1,
          cache_read_input_tokens: 7,
          cache_creation_input_tokens: 50,
          cache_creation: { ephemeral_5m_input_tokens: 20, ephemeral_1h_input_tokens: 30 },
          output_tokens_details: { thinking_tokens: 0 },
          server_tool_use: { web_search_requests: 0 },
        }),
        start(0, { type: 'text', text: 'x' }),
        stop(0),
        messageDelta('end_turn', {
          output_tokens: 900,
          output_tokens_details: { thinking_tokens: 600 },
          server_tool_use: { web_search_requests: 2, web_fetch_requests: 3 },
        }),
      ]).result,
    );
    expect(r.usage).toEqual({
      inputTokens: 500,
      outputTokens: 900,
      cacheCreationInputTokens: 50,
      cacheCreation1hInputTokens: 30,
      cacheReadInputTokens: 7,
      thinkingTokens: 600,
      webSearchRequests: 2,
      webFetchRequests: 3,
      compactionTokens: 0,
    });
    const none = ok(
      fold([
        messageStart(),
        start(0, { type: 'text', text: 'x' }),
        stop(0),
        messageDelta('end_turn', { output_tokens: 5, output_tokens_details: null, server_tool_use: null }),
      ]).result,
    );
    expect(none.usage).toMatchObject({ thinkingTokens: 0, webSearchRequests: 0, webFetchRequests: 0 });
  });

  it('reads a refusal and its explanation from stop_details', () => {
    const r = ok(
      fold([
        messageStart(),
        start(0, { type: 'text', text: '' }),
        delta(0, { type: 'text_delta', text: 'I started to' }),
        stop(0),
        messageDelta(
          'refusal',
          { output_tokens: 4 },
          { stop_details: { type: 'refusal', category: 'cyber', explanation: 'The request asks for working malware.' } },
        ),
      ]).result,
    );
    expect(r.stopReason).toBe(StopReason.REFUSAL);
    expect(r.stopExplanation).toBe('The request asks for working malware.');
    expect(r.content).toEqual([{ type: 'text', text: 'I started to' }]);
    const plain = ok(
      fold([
        messageStart(),
        messageDelta('refusal', { output_tokens: 0 }, { stop_details: { type: 'refusal', category: null, explanation: null } }),
      ]).result,
    );
    expect(plain.stopExplanation).toBe('');
  });

  it('still leaves out block types it does not know, keeping later indexes aligned', () => {
    const { result, deltas } = fold([
      messageStart(),
      start(0, { type: 'mcp_tool_use', id: 'm', name: 'x', server_name: 's', input: {} }),
      delta(0, { type: 'input_json_delta', partial_json: '{}' }),
      stop(0),
      start(1, { type: 'text', text: '' }),
      delta(1, { type: 'text_delta', text: 'after' }),
      stop(1),
      messageDelta('end_turn'),
    ]);
    const r = ok(result);
    expect(r.content).toEqual([{ type: 'text', text: 'after' }]);
    expect(r.unknownBlockTypes).toEqual(['mcp_tool_use']);
    expect(deltas).toEqual([[1, 'after', TokenDeltaKind.TEXT]]);
  });
});

describe('StreamAccumulator: compaction', () => {
  it('keeps a compaction block whole (content and encrypted_content from compaction_delta), streams its summary as COMPACTION', () => {
    const { result, deltas } = fold([
      messageStart(),
      start(0, { type: 'compaction', content: null, encrypted_content: null, signature: 'sig' }),
      { type: 'content_block_delta', index: 0, delta: { type: 'compaction_delta', content: 'the summary', encrypted_content: 'opaque' } },
      stop(0),
      start(1, { type: 'text', text: '' }),
      { type: 'content_block_delta', index: 1, delta: { type: 'text_delta', text: 'answer' } },
      stop(1),
      messageDelta('end_turn'),
      { type: 'message_stop' },
    ]);
    const r = ok(result);
    expect(r.content[0]).toEqual({
      type: 'compaction',
      content: 'the summary',
      json: JSON.stringify({ type: 'compaction', content: 'the summary', encrypted_content: 'opaque', signature: 'sig' }),
    });
    expect(r.unknownBlockTypes).toEqual([]);
    expect(deltas[0]).toEqual([0, 'the summary', TokenDeltaKind.COMPACTION]);
  });

  it('adds the compaction iterations (usage.iterations, as the strict fake reports them) to the counts, and says their total', () => {
    // The shape of packages/offline-model's withIterations: a compaction iteration, then the
    // message iteration (equal to the top-level counts), in message_delta's usage.
    const iterations = [
      {
        type: 'compaction',
        input_tokens: 1000,
        output_tokens: 300,
        cache_creation_input_tokens: 200,
        cache_read_input_tokens: 50000,
        cache_creation: { ephemeral_5m_input_tokens: 0, ephemeral_1h_input_tokens: 200 },
      },
      { type: 'message', input_tokens: 10, output_tokens: 20, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 },
    ];
    const { result } = fold([
      messageStart({ input_tokens: 10, output_tokens: 1, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 }),
      start(0, { type: 'text', text: '' }),
      delta(0, { type: 'text_delta', text: 'answer' }),
      stop(0),
      messageDelta('end_turn', { output_tokens: 20, iterations }),
      { type: 'message_stop' },
    ]);
    expect(ok(result).usage).toEqual({
      inputTokens: 1010,
      outputTokens: 320,
      cacheCreationInputTokens: 200,
      cacheCreation1hInputTokens: 200,
      cacheReadInputTokens: 50000,
      thinkingTokens: 0,
      webSearchRequests: 0,
      webFetchRequests: 0,
      compactionTokens: 1000 + 300 + 200 + 50000,
    });
  });

  it('reports no compaction tokens without iterations', () => {
    const { result } = fold([
      messageStart(),
      start(0, { type: 'text', text: '' }),
      stop(0),
      messageDelta('end_turn'),
      { type: 'message_stop' },
    ]);
    expect(ok(result).usage.compactionTokens).toBe(0);
    expect(ok(result).usage.inputTokens).toBe(10);
  });
});
