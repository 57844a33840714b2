import { describe, expect, it } from '@jest/globals';
import { MODE_NOTICE_RESTRICTED, MODE_NOTICE_UNRESTRICTED, UPGRADE_APPROVED, type ContentBlock, type MessageType } from './core/index.ts';
import { chooseForkPoint, forkBlockers, forkTitle, needsRestrictedNotice, type ForkMessage } from './forks.ts';

const msg = (type: MessageType, content: ContentBlock[], stopReason: ForkMessage['stopReason'] = null) => ({ type, content, stopReason });
const text = (t: string): ContentBlock => ({ type: 'text', text: t });
const use = (id: string): ContentBlock => ({ type: 'tool_use', id, name: 'bash', input: { command: 'ls' } });
const result = (id: string, content = 'ok'): ContentBlock => ({ type: 'tool_result', toolUseId: id, content, isError: false });
/** Numbers the messages 1, 2, … */
const history = (...messages: Omit<ForkMessage, 'sequence'>[]): ForkMessage[] => messages.map((m, i) => ({ ...m, sequence: i + 1 }));

describe('forkBlockers', () => {
  it('blocks from a tool call to its last result, and after a turn the provider paused with its own tool blocks', () => {
    const messages = history(
      msg('user', [text('go')]),
      msg('agent', [text('two calls'), use('a'), use('b')]),
      msg('tool', [result('a')]),
      msg('system', [text(MODE_NOTICE_RESTRICTED)]),
      msg('tool', [result('b')]),
      msg('agent', [{ type: 'server_tool', blockType: 'server_tool_use', json: '{}' }], 'pause_turn'),
      msg('agent', [text('resumed')]),
      msg('agent', [text('cut, no server tool')], 'pause_turn'),
      msg('error', [text('failed')]),
    );
    expect(forkBlockers(messages)).toEqual([
      null,
      { kind: 'open_tool_call', askedAt: 2 },
      { kind: 'open_tool_call', askedAt: 2 },
      { kind: 'open_tool_call', askedAt: 2 },
      null,
      { kind: 'paused_turn' },
      null,
      null,
      null,
    ]);
    expect(chooseForkPoint(messages, 6)).toEqual({
      kind: 'invalid',
      problem:
        'message 6 is a response the provider paused mid-turn (the model resumes it in the next response): fork at message 5 or at message 7',
    });
  });
});

describe('chooseForkPoint', () => {
  const running = history(msg('user', [text('go')]), msg('agent', [use('a')]), msg('tool', [result('a')]), msg('agent', [use('b')]));

  it('takes the latest place a history can end when no message is named', () => {
    expect(chooseForkPoint(running, 0)).toEqual({ kind: 'ok', through: 3 });
    expect(chooseForkPoint(history(msg('user', [text('go')]), msg('error', [text('down')])), 0)).toEqual({ kind: 'ok', through: 2 });
  });

  it('refuses inside a call, beyond the end, and an empty history', () => {
    expect(chooseForkPoint(running, 2)).toEqual({
      kind: 'invalid',
      problem:
        'message 2 asks for tools whose results would be left out, and a history cannot split a tool call from its result: fork at message 1 (before the call) or at message 3 (after its results)',
    });
    expect(chooseForkPoint(running, 4)).toMatchObject({
      kind: 'invalid',
      problem: expect.stringMatching(/or later, once the turn has moved on$/),
    });
    expect(chooseForkPoint(running, 5)).toEqual({ kind: 'beyond', last: 4 });
    expect(chooseForkPoint([], 0)).toEqual({ kind: 'empty' });
  });
});

describe('needsRestrictedNotice', () => {
  it('follows the last word on the mode in the copy', () => {
    const notice = (t: string) => msg('system', [text(t)]);
    expect(needsRestrictedNotice(history(msg('user', [text('go')])))).toBe(false);
    expect(needsRestrictedNotice(history(notice(MODE_NOTICE_UNRESTRICTED)))).toBe(true);
    expect(needsRestrictedNotice(history(notice(MODE_NOTICE_UNRESTRICTED), notice(MODE_NOTICE_RESTRICTED)))).toBe(false);
    expect(needsRestrictedNotice(history(notice(MODE_NOTICE_RESTRICTED), msg('tool', [result('u', UPGRADE_APPROVED)])))).toBe(true);
  });
});

describe('forkTitle', () => {
  it('names the source by its title, else its slug, within 200 characters', () => {
    expect(forkTitle({ title: 'Fix the login bug', slug: 'c-1' })).toBe('Fork of Fix the login bug');
    expect(forkTitle({ title: null, slug: 'c-12345678' })).toBe('Fork of c-12345678');
    const long = forkTitle({ title: 'é'.repeat(200), slug: 'c-1' });
    expect(Array.from(long)).toHaveLength(200);
    expect(long.endsWith('é…')).toBe(true);
  });
});
