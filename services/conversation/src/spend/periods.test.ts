import { describe, expect, it } from '@jest/globals';
import { nextUtcMidnight, nextUtcMinute, nextUtcMonth, utcDay, utcMonthStart } from './periods.ts';

describe('spend periods (UTC)', () => {
  it('names the day and the month, and when each resets, across month and year ends', () => {
    const at = new Date('2026-12-31T23:59:59.999Z');
    expect(utcDay(at)).toBe('2026-12-31');
    expect(utcMonthStart(at)).toBe('2026-12-01');
    expect(nextUtcMidnight(at).toISOString()).toBe('2027-01-01T00:00:00.000Z');
    expect(nextUtcMonth(at).toISOString()).toBe('2027-01-01T00:00:00.000Z');
    expect(nextUtcMinute(at).toISOString()).toBe('2027-01-01T00:00:00.000Z');
    const leap = new Date('2028-02-28T10:00:30Z');
    expect(nextUtcMidnight(leap).toISOString()).toBe('2028-02-29T00:00:00.000Z');
    expect(nextUtcMonth(leap).toISOString()).toBe('2028-03-01T00:00:00.000Z');
    expect(nextUtcMinute(new Date('2026-01-01T00:00:00Z')).toISOString()).toBe('2026-01-01T00:01:00.000Z');
  });

  it('takes a time in another offset as its UTC day', () => {
    expect(utcDay(new Date('2026-03-01T01:00:00+02:00'))).toBe('2026-02-28');
  });
});
