import { describe, expect, it } from '@jest/globals';
import { buildLlmHistory, checkToolChain, SYSTEM_NOTICE_PREFIX, type HistoryMessage } from './history.ts';

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
