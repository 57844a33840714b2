import { describe, it, expect } from '@jest/globals';
import { OutputCapture, utf8BoundaryAfter, utf8BoundaryBefore, toText } from './output-capture.ts';

describe('OutputCapture', () => {
  it('keeps everything when it fits', () => {
    const c = new OutputCapture({ headBytes: 10, tailBytes: 10 });
    c.push(Buffer.from('hello '));
    c.push(Buffer.from('world'));
    expect(c.truncated).toBe(false);
    expect(c.render()).toBe('hello world');
  });

  it('keeps head and tail around a marker with the omitted count', () => {
    const c = new OutputCapture({ headBytes: 5, tailBytes: 5 });
    for (let i = 0; i < 100; i++) c.push(Buffer.from(`${i % 10}`));
    expect(c.totalBytes).toBe(100);
    expect(c.truncated).toBe(true);
    expect(c.render()).toBe('01234\n\n[... 90 bytes of output omitted ...]\n\n56789');
  });

  it('handles a single chunk larger than head and tail together', () => {
    const c = new OutputCapture({ headBytes: 3, tailBytes: 3 });
    c.push(Buffer.from('abcdefghij'));
    expect(c.render()).toBe('abc\n\n[... 4 bytes of output omitted ...]\n\nhij');
  });

  it('never splits a multi-byte character at either cut', () => {
    // "é" is 2 bytes, "€" 3, "😀" 4: place them across both cut points.
    const text = 'ab€€€€€' + 'x'.repeat(50) + '😀😀😀';
    for (let head = 1; head < 12; head++) {
      for (let tail = 1; tail < 14; tail++) {
        const c = new OutputCapture({ headBytes: head, tailBytes: tail });
        c.push(Buffer.from(text));
        const out = c.render();
        expect(out).not.toContain('\uFFFD');
        const [first, last] = out.split(/\n\n\[\.\.\. \d+ bytes of output omitted \.\.\.\]\n\n/);
        expect(text.startsWith(first as string)).toBe(true);
        expect(text.endsWith(last as string)).toBe(true);
      }
    }
  });

  it('counts omitted bytes including those dropped at the character boundaries', () => {
    const c = new OutputCapture({ headBytes: 4, tailBytes: 4 });
    c.push(Buffer.from('€€€€€€')); // 18 bytes
    const out = c.render();
    // head keeps one € (3 bytes), tail keeps one € (3 bytes): 12 omitted.
    expect(out).toBe('€\n\n[... 12 bytes of output omitted ...]\n\n€');
  });
});

describe('UTF-8 boundaries', () => {
  it('moves a cut back before an incomplete character and leaves complete ones', () => {
    const b = Buffer.from('a€');
    expect(utf8BoundaryBefore(b, 4)).toBe(4);
    expect(utf8BoundaryBefore(b, 3)).toBe(1);
    expect(utf8BoundaryBefore(b, 2)).toBe(1);
    expect(utf8BoundaryAfter(b, 2)).toBe(4);
    expect(utf8BoundaryAfter(b, 1)).toBe(1);
  });

  it('turns invalid bytes and NUL into U+FFFD', () => {
    expect(toText(Buffer.from([0x61, 0x00, 0xff, 0x62]))).toBe('a\uFFFD\uFFFDb');
  });
});
