import { describe, expect, it } from '@jest/globals';
import { MAX_TOKENS_NOTICE, MODE_NOTICE_UNRESTRICTED } from './constants.ts';
import { buildLlmHistory, checkToolChain, SYSTEM_NOTICE_PREFIX, type HistoryMessage } from './history.ts';
import type { ContentBlock } from './types.ts';

const text = (t: string) => ({ type: 'text' as const, text: t });
const use = (id: string) => ({ type: 'tool_use' as const, id, name: 'bash', input: { command: 'true' } });
const result = (id: string) => ({ type: 'tool_result' as const, toolUseId: id, content: 'ok', isError: false });

describe('buildLlmHistory', () => {
  it('holds a system notice persisted mid-chain until the tool results are in', () => {
    const messages: HistoryMessage[] = [
      { type: 'user', content: [text('go')] },
      { type: 'agent', content: [text('running'), use('a'), use('b')] },
      { type: 'tool', content: [result('a')] },
      { type: 'system', content: [text('Mode changed')] },
      { type: 'tool', content: [result('b')] },
    ];
    const turns = buildLlmHistory(messages);
    expect(turns.map((t) => t.role)).toEqual(['user', 'assistant', 'user']);
    expect(turns[2]!.content).toEqual([result('a'), result('b'), text(SYSTEM_NOTICE_PREFIX + 'Mode changed')]);
    expect(checkToolChain(turns)).toEqual([]);
  });

  it('merges consecutive user messages (a cancelled turn, then a new message) and drops error messages', () => {
    const turns = buildLlmHistory([
      { type: 'user', content: [text('first')] },
      { type: 'error', content: [text('Failed after 3 attempts')] },
      { type: 'user', content: [text('second')] },
    ]);
    expect(turns).toEqual([{ role: 'user', content: [text('first'), text('second')] }]);
  });

  it('puts tool results before text in a merged user turn', () => {
    const turns = buildLlmHistory([
      { type: 'user', content: [text('go')] },
      { type: 'agent', content: [use('a')] },
      { type: 'tool', content: [result('a')] },
      { type: 'user', content: [text('next')] },
    ]);
    expect(turns[2]!.content.map((b) => b.type)).toEqual(['tool_result', 'text']);
  });
});

describe("buildLlmHistory: the model's own blocks", () => {
  const thinking = (t: string, signature = 'sig'): ContentBlock => ({ type: 'thinking', thinking: t, signature });
  const redacted: ContentBlock = { type: 'redacted_thinking', data: 'b3BhcXVl' };
  const serverUse: ContentBlock = {
    type: 'server_tool',
    blockType: 'server_tool_use',
    json: '{"type":"server_tool_use","id":"srv1","name":"web_search","input":{"query":"x"}}',
  };
  const serverResult: ContentBlock = {
    type: 'server_tool',
    blockType: 'web_search_tool_result',
    json: '{"type":"web_search_tool_result","tool_use_id":"srv1","content":[]}',
  };
  const cited: ContentBlock = {
    type: 'text',
    text: 'It is 42.',
    citations: '[{"type":"web_search_result_location","url":"https://a.example"}]',
  };

  it('keeps a thinking block first in an assistant turn with tool_use, and every block in order', () => {
    const turns = buildLlmHistory([
      { type: 'user', content: [text('go')] },
      { type: 'agent', content: [thinking('plan'), redacted, text('running'), use('a')], stopReason: 'tool_use' },
      { type: 'tool', content: [result('a')] },
    ]);
    expect(turns[1]).toEqual({ role: 'assistant', content: [thinking('plan'), redacted, text('running'), use('a')] });
    expect(checkToolChain(turns)).toEqual([]);
  });

  it('keeps a thinking block whose text is empty (display omitted) but signed, and leaves out one without a signature', () => {
    const turns = buildLlmHistory([
      { type: 'user', content: [text('go')] },
      { type: 'agent', content: [thinking('', 'sig-omitted'), thinking('unsigned', ''), use('a')] },
      { type: 'tool', content: [result('a')] },
    ]);
    expect(turns[1]!.content).toEqual([thinking('', 'sig-omitted'), use('a')]);
  });

  it('keeps server-tool blocks and text citations verbatim, in order', () => {
    const turns = buildLlmHistory([
      { type: 'user', content: [text('search')] },
      { type: 'agent', content: [thinking('t'), serverUse, serverResult, cited], stopReason: 'end_turn' },
    ]);
    expect(turns[1]!.content).toEqual([thinking('t'), serverUse, serverResult, cited]);
  });

  it('merges a paused turn and its resumption into one assistant turn (sent back as it is)', () => {
    const turns = buildLlmHistory([
      { type: 'user', content: [text('search')] },
      { type: 'agent', content: [thinking('t'), serverUse, serverResult], stopReason: 'pause_turn' },
      { type: 'agent', content: [cited], stopReason: 'end_turn' },
      { type: 'user', content: [text('thanks')] },
    ]);
    expect(turns).toEqual([
      { role: 'user', content: [text('search')] },
      { role: 'assistant', content: [thinking('t'), serverUse, serverResult, cited] },
      { role: 'user', content: [text('thanks')] },
    ]);
    // While paused, the history ends with the paused turn itself.
    const paused = buildLlmHistory([
      { type: 'user', content: [text('search')] },
      { type: 'agent', content: [serverUse, serverResult], stopReason: 'pause_turn' },
    ]);
    expect(paused[paused.length - 1]).toEqual({ role: 'assistant', content: [serverUse, serverResult] });
  });

  it('continues a cut response from a user turn: the notice follows the cut text', () => {
    const turns = buildLlmHistory([
      { type: 'user', content: [text('write')] },
      { type: 'agent', content: [thinking('t'), text('The first half')], stopReason: 'max_tokens' },
      { type: 'system', content: [text(MAX_TOKENS_NOTICE)] },
    ]);
    expect(turns.map((t) => t.role)).toEqual(['user', 'assistant', 'user']);
    expect(turns[2]!.content).toEqual([text(SYSTEM_NOTICE_PREFIX + MAX_TOKENS_NOTICE)]);
  });

  it('leaves out a refused turn: from the last user message before it to the refusal', () => {
    const messages: HistoryMessage[] = [
      { type: 'user', content: [text('first')] },
      { type: 'agent', content: [text('answer one')], stopReason: 'end_turn' },
      { type: 'user', content: [text('the refused request')] },
      { type: 'agent', content: [use('a')], stopReason: 'tool_use' },
      { type: 'tool', content: [result('a')] },
      { type: 'system', content: [text(MODE_NOTICE_UNRESTRICTED)] },
      { type: 'agent', content: [text('I will not')], stopReason: 'refusal' },
      { type: 'error', content: [text('The model declined to answer.')] },
      { type: 'user', content: [text('something else')] },
    ];
    const turns = buildLlmHistory(messages);
    expect(turns).toEqual([
      { role: 'user', content: [text('first')] },
      { role: 'assistant', content: [text('answer one')] },
      // The mode did change during the refused turn: its notice stays.
      { role: 'user', content: [text(SYSTEM_NOTICE_PREFIX + MODE_NOTICE_UNRESTRICTED), text('something else')] },
    ]);
    expect(JSON.stringify(turns)).not.toContain('refused request');
    expect(checkToolChain(turns)).toEqual([]);
  });

  it('a conversation whose first turn was refused starts again with the next message', () => {
    const turns = buildLlmHistory([
      { type: 'user', content: [text('bad')] },
      { type: 'agent', content: [], stopReason: 'refusal' },
      { type: 'user', content: [text('good')] },
    ]);
    expect(turns).toEqual([{ role: 'user', content: [text('good')] }]);
  });
});

describe('checkToolChain', () => {
  it('reports unanswered, misordered and stray tool results', () => {
    const u = (...content: ReturnType<typeof text | typeof result>[]) => ({ role: 'user' as const, content });
    const a = (...content: ReturnType<typeof text | typeof use>[]) => ({ role: 'assistant' as const, content });
    expect(checkToolChain([u(text('x')), a(use('a'))])).toEqual(['turn 1 has tool_use blocks that are not answered']);
    expect(checkToolChain([u(text('x')), a(use('a'), use('b')), u(result('b'), result('a'))])).toHaveLength(1);
    expect(checkToolChain([u(result('z'))])).toHaveLength(1);
    expect(checkToolChain([a(text('hi'))])).toEqual(['the first turn is not a user turn']);
    expect(checkToolChain([u(text('x')), a(use('a')), u(result('a'))])).toEqual([]);
  });
});
