import { describe, it, expect } from '@jest/globals';
import { firstAfter } from './stream-position.ts';
import { durableGap } from './watch/watch-conversation.ts';

const at = (sequence: number, deltaIndex = 0) => ({ sequence: BigInt(sequence), deltaIndex });

describe('firstAfter', () => {
  const entries = [at(1), at(1, 1), at(1, 2), at(2), at(4), at(4, 1)].map((position) => ({ position }));

  it('finds the first entry strictly after a position', () => {
    expect(firstAfter(entries, at(0))).toBe(0);
    expect(firstAfter(entries, at(1))).toBe(1);
    expect(firstAfter(entries, at(1, 2))).toBe(3);
    expect(firstAfter(entries, at(3))).toBe(4);
    expect(firstAfter(entries, at(4, 1))).toBe(6);
    expect(firstAfter([], at(0))).toBe(0);
  });
});

describe('durableGap', () => {
  const self = (p: { sequence: bigint; deltaIndex: number }) => p;

  it('is a gap when the first durable event is past the next sequence', () => {
    expect(durableGap(at(2), [at(2, 1), at(4)], self)).toBe(true);
    expect(durableGap(at(2, 3), [at(3)], self)).toBe(false);
    expect(durableGap(at(2), [at(2, 1), at(2, 2)], self)).toBe(false);
    expect(durableGap(at(2), [], self)).toBe(false);
  });
});
