import { describe, it, expect } from '@jest/globals';
import { createBlockSigner } from './signing.ts';
import { messageBody, resolveMessage, streamEvents } from './sse-encoder.ts';
import type { ScriptBlock, ScriptedMessage } from './script.ts';

const signer = createBlockSigner('encoder-test-key');
const resolve = (content: ScriptBlock[], extra: Partial<ScriptedMessage> = {}) =>
  resolveMessage({ kind: 'message', content, ...extra }, 'claude-test', 10, signer);
/** The events after message_start and before message_delta, as (event, data) without the index noise. */
const blockEvents = (content: ScriptBlock[], chunkChars = 5, extra: Partial<ScriptedMessage> = {}) => {
  const events = streamEvents(resolve(content, extra), chunkChars);
  return events.slice(1, -2).map((e) => e.data);
};
const messageDelta = (content: ScriptBlock[], extra: Partial<ScriptedMessage> = {}) => streamEvents(resolve(content, extra)).at(-2)!.data;

describe('SSE encoder: thinking', () => {
  it('streams thinking_delta events, then the signature_delta with the server signature of the text', () => {
    const text = 'Let me see.';
    expect(blockEvents([{ type: 'thinking', thinking: text }])).toEqual([
      { type: 'content_block_start', index: 0, content_block: { type: 'thinking', thinking: '', signature: '' } },
      { type: 'content_block_delta', index: 0, delta: { type: 'thinking_delta', thinking: 'Let m' } },
      { type: 'content_block_delta', index: 0, delta: { type: 'thinking_delta', thinking: 'e see' } },
      { type: 'content_block_delta', index: 0, delta: { type: 'thinking_delta', thinking: '.' } },
      { type: 'content_block_delta', index: 0, delta: { type: 'signature_delta', signature: signer.signThinking(text) } },
      { type: 'ping' },
      { type: 'content_block_stop', index: 0 },
    ]);
    expect(signer.verifyThinking(text, signer.signThinking(text))).toBe(true);
  });

  it('can leave the signature out, send a given one, or cut the block before its signature', () => {
    const unsigned = blockEvents([
      { type: 'text', text: 'a' },
      { type: 'thinking', thinking: 'hm', signature: false },
    ]);
    expect(unsigned.slice(4)).toEqual([
      { type: 'content_block_start', index: 1, content_block: { type: 'thinking', thinking: '', signature: '' } },
      { type: 'content_block_delta', index: 1, delta: { type: 'thinking_delta', thinking: 'hm' } },
      { type: 'content_block_stop', index: 1 },
    ]);
    const forged = blockEvents([{ type: 'thinking', thinking: 'hm', signature: 'Zm9yZ2Vk' }]);
    expect(forged).toContainEqual({ type: 'content_block_delta', index: 0, delta: { type: 'signature_delta', signature: 'Zm9yZ2Vk' } });
    const cut = blockEvents([{ type: 'thinking', thinking: 'hm', cut: true }], 5, { stopReason: 'max_tokens' });
    expect(cut).toEqual([
      { type: 'content_block_start', index: 0, content_block: { type: 'thinking', thinking: '', signature: '' } },
      { type: 'content_block_delta', index: 0, delta: { type: 'thinking_delta', thinking: 'hm' } },
      { type: 'ping' },
    ]);
  });

  it('sends redacted_thinking whole in content_block_start, with data issued by the server', () => {
    const events = blockEvents([{ type: 'redacted_thinking' }, { type: 'text', text: 'ok' }]);
    const start = events[0] as { content_block: { type: string; data: string } };
    expect(start.content_block.type).toBe('redacted_thinking');
    expect(signer.verifyRedacted(start.content_block.data)).toBe(true);
    expect(events.slice(1, 3)).toEqual([{ type: 'ping' }, { type: 'content_block_stop', index: 0 }]);
  });

  it('reports thinking tokens in message_delta usage', () => {
    expect(
      messageDelta([
        { type: 'thinking', thinking: 'x'.repeat(400) },
        { type: 'text', text: 'y'.repeat(40) },
      ]),
    ).toEqual({
      type: 'message_delta',
      delta: { stop_reason: 'end_turn', stop_sequence: null, stop_details: null },
      usage: { output_tokens: 110, output_tokens_details: { thinking_tokens: 100 } },
    });
  });
});

describe('SSE encoder: server tools and citations', () => {
  const citation = {
    type: 'web_search_result_location',
    url: 'https://bedrock.test/a',
    title: 'A',
    encrypted_index: 'ZW5j',
    cited_text: 'Bedrock is a base.',
  };
  const results = [
    { type: 'web_search_result', url: 'https://bedrock.test/a', title: 'A', encrypted_content: 'ZW5jcnlwdGVk', page_age: null },
  ];

  it('streams server_tool_use like tool_use, its result whole, and citations before the cited text', () => {
    const events = blockEvents(
      [
        { type: 'server_tool_use', id: 'srvtoolu_1', name: 'web_search', input: { query: 'bedrock' } },
        { type: 'web_search_tool_result', content: results },
        { type: 'text', text: 'A base.', citations: [citation] },
      ],
      12,
    );
    expect(events).toEqual([
      {
        type: 'content_block_start',
        index: 0,
        content_block: { type: 'server_tool_use', id: 'srvtoolu_1', name: 'web_search', input: {} },
      },
      { type: 'content_block_delta', index: 0, delta: { type: 'input_json_delta', partial_json: '{"query":"be' } },
      { type: 'content_block_delta', index: 0, delta: { type: 'input_json_delta', partial_json: 'drock"}' } },
      { type: 'ping' },
      { type: 'content_block_stop', index: 0 },
      {
        type: 'content_block_start',
        index: 1,
        content_block: { type: 'web_search_tool_result', tool_use_id: 'srvtoolu_1', content: results },
      },
      { type: 'content_block_stop', index: 1 },
      { type: 'content_block_start', index: 2, content_block: { type: 'text', text: '' } },
      { type: 'content_block_delta', index: 2, delta: { type: 'citations_delta', citation } },
      { type: 'content_block_delta', index: 2, delta: { type: 'text_delta', text: 'A base.' } },
      { type: 'content_block_stop', index: 2 },
    ]);
  });

  it('streams web_fetch results whole and counts server tool calls in usage', () => {
    const fetched = {
      type: 'web_fetch_result',
      url: 'https://bedrock.test/b',
      retrieved_at: '2026-01-01T00:00:00Z',
      content: { type: 'document', source: { type: 'text', media_type: 'text/plain', data: 'B' } },
    };
    const content: ScriptBlock[] = [
      { type: 'server_tool_use', id: 'srvtoolu_1', name: 'web_search', input: { query: 'b' } },
      { type: 'web_search_tool_result', content: results },
      { type: 'server_tool_use', id: 'srvtoolu_2', name: 'web_fetch', input: { url: 'https://bedrock.test/b' } },
      { type: 'web_fetch_tool_result', content: fetched },
      { type: 'server_tool_use', id: 'srvtoolu_3', name: 'web_search', input: { query: 'c' } },
      { type: 'web_search_tool_result', tool_use_id: 'srvtoolu_3', content: [] },
    ];
    const events = blockEvents(content, 100);
    expect(events).toContainEqual({
      type: 'content_block_start',
      index: 3,
      content_block: { type: 'web_fetch_tool_result', tool_use_id: 'srvtoolu_2', content: fetched },
    });
    expect(events).toContainEqual({
      type: 'content_block_start',
      index: 5,
      content_block: { type: 'web_search_tool_result', tool_use_id: 'srvtoolu_3', content: [] },
    });
    expect(messageDelta(content, { stopReason: 'pause_turn' }) as { delta: unknown; usage: unknown }).toMatchObject({
      delta: { stop_reason: 'pause_turn', stop_details: null },
      usage: { server_tool_use: { web_search_requests: 2, web_fetch_requests: 1 } },
    });
  });

  it('gives the non-streaming body the same blocks, stop details and usage', () => {
    const body = messageBody(
      resolve(
        [
          { type: 'thinking', thinking: 'think' },
          { type: 'redacted_thinking', data: 'given' },
          { type: 'server_tool_use', id: 'srvtoolu_1', name: 'web_search', input: { query: 'b' } },
          { type: 'web_search_tool_result', content: results },
          { type: 'text', text: 'A base.', citations: [citation] },
        ],
        { stopReason: 'refusal', stopExplanation: 'Not this.' },
      ),
    ) as Record<string, unknown>;
    expect(body.content).toEqual([
      { type: 'thinking', thinking: 'think', signature: signer.signThinking('think') },
      { type: 'redacted_thinking', data: 'given' },
      { type: 'server_tool_use', id: 'srvtoolu_1', name: 'web_search', input: { query: 'b' } },
      { type: 'web_search_tool_result', tool_use_id: 'srvtoolu_1', content: results },
      { type: 'text', text: 'A base.', citations: [citation] },
    ]);
    expect(body.stop_reason).toBe('refusal');
    expect(body.stop_details).toEqual({ type: 'refusal', category: null, explanation: 'Not this.' });
    expect(body.usage).toMatchObject({
      output_tokens_details: { thinking_tokens: 66 },
      server_tool_use: { web_search_requests: 1, web_fetch_requests: 0 },
    });
  });
});

describe('SSE encoder: refusal', () => {
  it('sends stop_details in message_delta for a refusal, with or without explanation', () => {
    expect(
      messageDelta([{ type: 'text', text: 'I' }], { stopReason: 'refusal', stopExplanation: 'This request asks for something harmful.' }),
    ).toEqual({
      type: 'message_delta',
      delta: {
        stop_reason: 'refusal',
        stop_sequence: null,
        stop_details: { type: 'refusal', category: null, explanation: 'This request asks for something harmful.' },
      },
      usage: { output_tokens: 1 },
    });
    expect((messageDelta([], { stopReason: 'refusal' }) as { delta: unknown }).delta).toEqual({
      stop_reason: 'refusal',
      stop_sequence: null,
      stop_details: { type: 'refusal', category: null, explanation: null },
    });
  });
});
