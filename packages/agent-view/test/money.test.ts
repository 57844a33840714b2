import { describe, expect, it } from '@jest/globals';
import { cacheReadPhrase, cacheReadShare, formatUsd, parseUsd, spendAgainst, spendSummary } from '../src/money.ts';

describe('money', () => {
  it('formats micro-dollars: cents from a cent up (rounded down), four decimals below, thousands grouped', () => {
    expect(formatUsd(0)).toBe('$0.00');
    expect(formatUsd(42)).toBe('$0.000042');
    expect(formatUsd(1)).toBe('$0.000001');
    expect(formatUsd(50)).toBe('$0.00005');
    expect(formatUsd(100)).toBe('$0.0001');
    expect(formatUsd(-7)).toBe('-$0.000007');
    expect(formatUsd(4_200)).toBe('$0.0042');
    expect(formatUsd(10_000)).toBe('$0.01');
    expect(formatUsd(12_349_999)).toBe('$12.34');
    expect(formatUsd(1_234_567_890_000n)).toBe('$1,234,567.89');
    expect(formatUsd(-2_500_000)).toBe('-$2.50');
  });

  it('says spend against a budget, and no budget for 0', () => {
    expect(spendAgainst(1_230_000, 5_000_000)).toBe('$1.23 of $5.00 (24%)');
    expect(spendAgainst(6_000_000n, 5_000_000n)).toBe('$6.00 of $5.00 (120%)');
    expect(spendAgainst(1_230_000, 0)).toBe('$1.23 (no budget)');
  });

  it('parses dollars as typed', () => {
    expect(parseUsd('5')).toBe(5_000_000);
    expect(parseUsd('$2.50')).toBe(2_500_000);
    expect(parseUsd('0.125')).toBe(125_000);
    expect(parseUsd('0')).toBe(0);
    expect(parseUsd('0.0000001')).toBeUndefined();
    expect(parseUsd('-1')).toBeUndefined();
    expect(parseUsd('five')).toBeUndefined();
  });

  it('sums up the day and the month in one line for the web UI', () => {
    expect(spendSummary(120_000, 5_000_000, 1_200_000n, 50_000_000n)).toBe('Spent today $0.12 of $5.00 · this month $1.20 of $50.00');
    expect(spendSummary(120_000, 0, 1_200_000, 0)).toBe('Spent today $0.12 · this month $1.20');
  });
});

describe('cache-read share', () => {
  const usage = (input: number | bigint, read: number | bigint, creation: number | bigint) => ({
    inputTokens: input,
    cacheReadInputTokens: read,
    cacheCreationInputTokens: creation,
  });

  it('is cache_read / (input + cache_read + cache_creation)', () => {
    expect(cacheReadShare(usage(50, 920, 30))).toBe(0.92);
    expect(cacheReadShare(usage(100n, 0n, 0n))).toBe(0);
    expect(cacheReadShare(usage(0, 0, 0))).toBeUndefined();
  });

  it('says it in one short phrase, rounded down, and nothing when the cache was never used', () => {
    expect(cacheReadPhrase(usage(50n, 920n, 30n))).toBe('cache 92% read');
    expect(cacheReadPhrase(usage(71, 29, 0))).toBe('cache 29% read');
    expect(cacheReadPhrase(usage(1, 999, 0))).toBe('cache 99% read');
    expect(cacheReadPhrase(usage(0, 0, 500))).toBe('cache 0% read');
    expect(cacheReadPhrase(usage(1000, 0, 0))).toBe('');
    expect(cacheReadPhrase(undefined)).toBe('');
  });
});
