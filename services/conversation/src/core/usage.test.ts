import { describe, it, expect } from '@jest/globals';
import type { Usage } from './types.ts';
import { addUsage, subtractUsage, ZERO_USAGE } from './usage.ts';

/** Every count of Usage: the compiler rejects this object when Usage gains or loses one. */
const FIELDS: Record<keyof Usage, true> = {
  inputTokens: true,
  outputTokens: true,
  cacheCreationInputTokens: true,
  cacheCreation1hInputTokens: true,
  compactionTokens: true,
  cacheReadInputTokens: true,
  thinkingTokens: true,
  webSearchRequests: true,
  webFetchRequests: true,
};
const fields = Object.keys(FIELDS).sort() as (keyof Usage)[];

/** A usage whose counts all differ: the i-th count is (i + 1) * scale. */
function distinct(scale: number): Usage {
  return Object.fromEntries(fields.map((f, i) => [f, (i + 1) * scale])) as unknown as Usage;
}

describe('usage arithmetic', () => {
  it('ZERO_USAGE names every count', () => {
    expect(Object.keys(ZERO_USAGE).sort()).toEqual(fields);
    for (const f of fields) expect(ZERO_USAGE[f]).toBe(0);
  });

  it('addUsage and subtractUsage cover every count', () => {
    const a = distinct(100);
    const b = distinct(1);
    const sum = addUsage(a, b);
    const delta = subtractUsage(a, b);
    for (const f of fields) {
      expect(sum[f]).toBe((a[f] ?? 0) + (b[f] ?? 0));
      expect(delta[f]).toBe((a[f] ?? 0) - (b[f] ?? 0));
    }
    expect(subtractUsage(sum, b)).toEqual(a);
  });

  it('counts absent from one side (stored before they existed) as 0', () => {
    const old: Usage = { inputTokens: 5, outputTokens: 4, cacheCreationInputTokens: 3, cacheReadInputTokens: 2 };
    const delta = subtractUsage(distinct(10), old);
    expect(delta.thinkingTokens).toBe(distinct(10).thinkingTokens);
    expect(Object.keys(delta).sort()).toEqual(fields);
  });
});
