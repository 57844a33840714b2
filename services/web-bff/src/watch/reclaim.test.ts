import { afterEach, describe, expect, it, jest } from '@jest/globals';
import { createReclaimer, exposeGc } from './reclaim.ts';

describe('reclaimer', () => {
  afterEach(() => {
    jest.useRealTimers();
  });

  it('collects once after `threshold` closes and a quiet spell, at most once per interval', () => {
    jest.useFakeTimers();
    let t = 0;
    const gc = jest.fn();
    const collected: number[] = [];
    const r = createReclaimer({ gc, threshold: 3, quietMs: 100, minIntervalMs: 1000, now: () => t, onCollect: (n) => collected.push(n) });
    r.closed();
    r.closed();
    jest.advanceTimersByTime(500);
    expect(gc).not.toHaveBeenCalled(); // under the threshold
    r.closed();
    jest.advanceTimersByTime(50);
    r.closed(); // still closing: the quiet spell starts again
    jest.advanceTimersByTime(60);
    expect(gc).not.toHaveBeenCalled();
    t += 110;
    jest.advanceTimersByTime(50);
    expect(gc).toHaveBeenCalledTimes(1);
    expect(collected).toEqual([4]);
    // Three more soon after: it waits for the interval.
    for (let i = 0; i < 3; i++) r.closed();
    t += 100;
    jest.advanceTimersByTime(100);
    expect(gc).toHaveBeenCalledTimes(1);
    t += 1000;
    jest.advanceTimersByTime(1000);
    expect(gc).toHaveBeenCalledTimes(2);
    r.stop();
  });

  it('does nothing without a collector', () => {
    jest.useFakeTimers();
    const r = createReclaimer({ gc: null, threshold: 1, quietMs: 1 });
    r.closed();
    jest.advanceTimersByTime(10);
    r.stop();
  });

  it('exposes the full collection of this process, which frees garbage', () => {
    const gc = exposeGc();
    expect(typeof gc).toBe('function');
    let garbage: unknown[] | null = Array.from({ length: 200_000 }, (_, i) => ({ i, s: `item ${i}` }));
    expect(garbage.length).toBe(200_000);
    const before = process.memoryUsage().heapUsed;
    garbage = null;
    gc!();
    expect(process.memoryUsage().heapUsed).toBeLessThan(before - 5 * 2 ** 20);
  });
});
