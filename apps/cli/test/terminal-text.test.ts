/* eslint-disable no-control-regex -- matching terminal control characters is what this file is about */
/**
 * Terminal controls in the model's and tools' text (src/terminal-text.ts): OSC 52 clipboard
 * writes, title changes, hyperlinks, cursor moves and erases, DCS/APC strings, 8-bit C1 forms,
 * lone controls — all removed; newline, tab and the CLI's own colours kept; and the same through
 * the event renderer and a whole `run` (its Output is cleaned).
 */
import { describe, expect, it } from '@jest/globals';
import { create } from '@bufbuild/protobuf';
import { ConversationEventSchema, MessageType, TokenDeltaKind } from '@bedrock/contracts';
import { createEventRenderer } from '../src/render.ts';
import { paint } from '../src/render-style.ts';
import { safeOutput } from '../src/output.ts';
import { cleanStrings, stripControls, terminalSafe } from '../src/terminal-text.ts';

const HOSTILE: [string, string, string, string?][] = [
  ['OSC 52 clipboard write (BEL)', 'a\x1b]52;c;Y3VybCBldmlsLnNoIHwgc2g=\x07b', 'ab'],
  ['OSC 52 clipboard write (ST)', 'a\x1b]52;c;Y3VybA==\x1b\\b', 'ab'],
  ['window title', '\x1b]0;pwned\x07title\x1b]2;x\x07', 'title'],
  ['OSC 8 hyperlink', '\x1b]8;;https://evil.example/\x1b\\click\x1b]8;;\x1b\\', 'click'],
  ['unterminated OSC eats the rest', 'ok\x1b]52;c;AAAA', 'ok'],
  ['cursor up and erase line', 'real\n\x1b[1A\x1b[2Kfake', 'real\nfake'],
  ['cursor position and clear screen', '\x1b[H\x1b[2J\x1b[10;20Hx', 'x'],
  // terminalSafe (the whole output) cannot tell the model's red from the CLI's: the renderer cleans
  // the model's text with stripControls first (cleanStrings), so only the CLI's colours reach it.
  ['SGR from the model (conceal, colours)', '\x1b[8mhidden\x1b[0m \x1b[31mred\x1b[39m', 'hidden red', 'hidden \x1b[31mred\x1b[39m'],
  ['DCS (DECRQSS)', 'a\x1bP$qm\x1b\\b', 'ab'],
  ['APC and PM', 'a\x1b_payload\x1b\\b\x1b^pm\x1b\\c', 'abc'],
  ['8-bit CSI', 'a\x9b2Jb', 'ab'],
  ['8-bit OSC with 8-bit ST', 'a\x9d0;title\x9cb', 'ab'],
  ['8-bit DCS', 'a\x90qdata\x9cb', 'ab'],
  ['lone C1 controls (NEL, SS2, IND)', 'a\x85\x8e\x84b', 'ab'],
  ['8-bit APC eats to its end', 'a\x9fpayload', 'a'],
  ['two-character ESC sequences (save cursor, reset, charset)', 'a\x1b7\x1bc\x1b(0b', 'ab'],
  ['C0 controls, DEL, carriage return, backspace, bell', 'a\x00\x07\x08\r\x0b\x0c\x7fb', 'ab'],
  ['newline and tab stay', 'line 1\n\tline 2\n', 'line 1\n\tline 2\n'],
  ['ordinary unicode stays', 'héllo — 世界 ✓ 🙂', 'héllo — 世界 ✓ 🙂'],
];

describe('stripControls', () => {
  for (const [what, input, expected, safe] of HOSTILE) {
    it(what, () => {
      expect(stripControls(input)).toBe(expected);
      expect(terminalSafe(input)).toBe(safe ?? expected);
    });
  }
});

describe('terminalSafe', () => {
  it("keeps the CLI's own colours and cleans what is between them", () => {
    const own = `${paint(true, 'green', 'ok')} ${paint(true, 'dim', 'x\x1b]52;c;QQ==\x07y')} ${paint(true, 'bold', 'b')}`;
    expect(terminalSafe(own)).toBe('\x1b[32mok\x1b[39m \x1b[2mxy\x1b[22m \x1b[1mb\x1b[22m');
  });
});

describe('cleanStrings', () => {
  it('cleans every string of a message, nested and in lists, and leaves bytes and numbers', () => {
    const bytes = new Uint8Array([27, 93]);
    const out = cleanStrings({ $typeName: 'x', a: 'p\x1b[2Jq', n: 3n, list: [{ s: '\x9b1;1Hz' }], bytes });
    expect(out).toEqual({ $typeName: 'x', a: 'pq', n: 3n, list: [{ s: 'z' }], bytes });
  });
});

describe('the event renderer and the output', () => {
  it('print no control sequence of streamed text, tool output or persisted messages', () => {
    let out = '';
    let err = '';
    const render = createEventRenderer({ out: (t) => void (out += t), err: (t) => void (err += t) }, { color: true });
    const ev = (
      kind: Parameters<typeof create<typeof ConversationEventSchema>>[1] extends infer I
        ? I extends { kind?: infer K }
          ? K
          : never
        : never,
    ) => render(create(ConversationEventSchema, { conversationId: 'c', kind }));
    // A sequence split over two deltas loses its ESC in the first: the rest is plain text.
    ev({ case: 'tokenDelta', value: { requestId: 'r', text: 'hi \x1b]52;c;', blockIndex: 0, kind: TokenDeltaKind.TEXT } });
    ev({ case: 'tokenDelta', value: { requestId: 'r', text: 'QQ==\x07 there\x1b[1A', blockIndex: 0, kind: TokenDeltaKind.TEXT } });
    ev({
      case: 'messagePersisted',
      value: { message: { type: MessageType.AGENT, content: [{ block: { case: 'text', value: { text: 'x\x1b]0;t\x07y' } } }] } },
    });
    ev({ case: 'toolOutput', value: { toolUseId: 't1', text: 'out\x1b[2J\x9b5Aput\n' } });
    const all = out + err;
    expect(all).toContain('hi QQ== there');
    expect(all).not.toMatch(/\x1b(?!\[(?:1|2|22|31|32|33|36|39)m)|[\x00-\x08\x0b-\x1f\x7f-\x9f](?<!\x1b)/u);
    expect(all).not.toMatch(/\x1b\](?:52|0)|\x1b\[(?:1A|2J)|\x9b/);
  });

  it('safeOutput cleans every write and keeps the stdio mark', () => {
    let out = '';
    const safe = safeOutput({ out: (t) => void (out += t), err: () => undefined });
    safe.out('a\x1b]52;c;QQ==\x07b\n');
    expect(out).toBe('ab\n');
    expect(safeOutput(safe)).toBe(safe);
  });
});
