/** How the web UI cuts a streamed Markdown text into final blocks and the growing tail (ui/src/markdown-split.ts), in Node. */
import { describe, expect, it } from '@jest/globals';
import { BLOCK_CHARS, EMPTY_SPLIT, LIST_RUN, stableSplit, type Split } from '../ui/src/markdown-split.ts';

/** Feeds `text` in chunks of `size` characters, as a stream does, and returns the last split. */
function stream(text: string, size: number): { split: Split & { tail: string }; lexed: number } {
  let split: Split & { tail: string } = { ...EMPTY_SPLIT, tail: '' };
  let lexed = 0;
  for (let end = size; end < text.length + size; end += size) {
    const now = text.slice(0, Math.min(end, text.length));
    split = stableSplit(now, split);
    lexed = Math.max(lexed, split.tail.length);
  }
  return { split, lexed };
}

const numbered = (n: number) => Array.from({ length: n }, (_, i) => `${i + 1}. Line ${i + 1} of the answer.`).join('\n');

describe('stableSplit', () => {
  it('keeps finished paragraphs and leaves the last one as the tail', () => {
    const s = stableSplit('First paragraph.\n\nSecond, still being wri');
    expect(s.blocks).toEqual(['First paragraph.\n\n']);
    expect(s.tail).toBe('Second, still being wri');
    expect(s.consumed + s.tail).toBe('First paragraph.\n\nSecond, still being wri');
  });

  it('cuts a long list into runs of finished items, so only the last items are lexed again', () => {
    const text = numbered(2000);
    const { split, lexed } = stream(text, 40);
    // Nothing is lost or repeated.
    expect(split.blocks.join('') + split.tail).toBe(text);
    // The tail never held more than two runs of items (not the whole list).
    expect(lexed).toBeLessThan(2 * LIST_RUN * 40);
    // Blocks are bounded, and a later run starts with its own number (an ordered list keeps counting).
    expect(Math.max(...split.blocks.map((b) => b.length))).toBeLessThanOrEqual(BLOCK_CHARS + 40);
    expect(split.blocks.at(-1)).toMatch(/^\d{4}\. Line/);
  });

  it('does not cut a short list', () => {
    const s = stableSplit(numbered(LIST_RUN));
    expect(s.blocks).toEqual([]);
  });

  it('starts over when the text does not continue the earlier split', () => {
    const first = stableSplit('One.\n\nTwo.\n\nThr');
    expect(first.blocks).toEqual(['One.\n\nTwo.\n\n']);
    const other = stableSplit('Something else.\n\nMore', first);
    expect(other.blocks).toEqual(['Something else.\n\n']);
    expect(other.tail).toBe('More');
  });
});
