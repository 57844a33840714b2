import { describe, expect, it } from '@jest/globals';
import type { Job } from '../interfaces.ts';
import { instrumentJob } from './job-metrics.ts';
import { METRIC } from './metric-names.ts';
import { createMetrics } from './metrics.ts';
import type { Metrics } from './metrics.ts';

const job = (id: string, waitedMs = 0): Job<string> => ({ id, data: id, attemptsMade: 1, readyAt: Date.now() - waitedMs });

/** The value of one series in the Prometheus text of the registry (undefined when it is not exported). */
async function value(metrics: Metrics, name: string, labels: Record<string, string | number>): Promise<number | undefined> {
  const want = Object.entries({ ...labels, service: 'test' })
    .map(([k, v]) => `${k}="${v}"`)
    .sort()
    .join(',');
  for (const line of (await metrics.registry.metrics()).split('\n')) {
    const match = /^(\w+)\{(.*)\} (\S+)$/.exec(line);
    if (match?.[1] !== name) continue;
    if ((match[2] ?? '').split(',').sort().join(',') === want) return Number(match[3]);
  }
  return undefined;
}

describe('instrumentJob', () => {
  it('counts started, in-flight and finished jobs by outcome, with their duration and queue wait', async () => {
    const metrics = createMetrics('test');
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const handler = instrumentJob<string>(metrics, 'q', async (j) => {
      await gate;
      if (j.data === 'c') return 'cancelled';
      if (j.data === 'i') return 'interrupted';
      return undefined;
    });
    // Exported from the start, at 0.
    expect(await value(metrics, METRIC.jobsInFlight, { queue: 'q' })).toBe(0);
    const signal = new AbortController().signal;
    const running = [handler(job('ok', 1500), signal), handler(job('c'), signal), handler(job('i'), signal)];
    expect(await value(metrics, METRIC.jobsStartedTotal, { queue: 'q' })).toBe(3);
    expect(await value(metrics, METRIC.jobsInFlight, { queue: 'q' })).toBe(3);
    expect(await value(metrics, METRIC.jobsTotal, { queue: 'q', outcome: 'completed' })).toBeUndefined();
    await new Promise((resolve) => setTimeout(resolve, 30));
    release();
    await Promise.all(running);
    expect(await value(metrics, METRIC.jobsInFlight, { queue: 'q' })).toBe(0);
    for (const outcome of ['completed', 'cancelled', 'interrupted']) {
      expect(await value(metrics, METRIC.jobsTotal, { queue: 'q', outcome })).toBe(1);
      expect(await value(metrics, `${METRIC.jobDurationSeconds}_count`, { queue: 'q', outcome })).toBe(1);
      expect(await value(metrics, `${METRIC.jobDurationSeconds}_sum`, { queue: 'q', outcome })).toBeGreaterThanOrEqual(0.025);
    }
    expect(await value(metrics, `${METRIC.queueWaitSeconds}_count`, { queue: 'q' })).toBe(3);
    // The job that waited 1.5 s is in the 2.5 s bucket and not in the 1 s one.
    expect(await value(metrics, `${METRIC.queueWaitSeconds}_bucket`, { queue: 'q', le: 1 })).toBe(2);
    expect(await value(metrics, `${METRIC.queueWaitSeconds}_bucket`, { queue: 'q', le: 2.5 })).toBe(3);
  });

  it('records a throw as failed, or as retried when the job was being handed back, and rethrows it', async () => {
    const metrics = createMetrics('test');
    const handler = instrumentJob<string>(metrics, 'q', async () => {
      throw new Error('boom');
    });
    await expect(handler(job('f'), new AbortController().signal)).rejects.toThrow('boom');
    const handBack = new AbortController();
    handBack.abort();
    await expect(handler(job('r'), handBack.signal)).rejects.toThrow('boom');
    expect(await value(metrics, METRIC.jobsTotal, { queue: 'q', outcome: 'failed' })).toBe(1);
    expect(await value(metrics, METRIC.jobsTotal, { queue: 'q', outcome: 'retried' })).toBe(1);
    expect(await value(metrics, METRIC.jobsStartedTotal, { queue: 'q' })).toBe(2);
    expect(await value(metrics, METRIC.jobsInFlight, { queue: 'q' })).toBe(0);
  });

  it('runs the handler unmeasured without metrics, and passes its errors on', async () => {
    const seen: string[] = [];
    const handler = instrumentJob<string>(undefined, 'q', async (j) => {
      seen.push(j.data);
      if (j.data === 'bad') throw new Error('bad job');
      return 'cancelled';
    });
    await expect(handler(job('good'), new AbortController().signal)).resolves.toBeUndefined();
    await expect(handler(job('bad'), new AbortController().signal)).rejects.toThrow('bad job');
    expect(seen).toEqual(['good', 'bad']);
  });
});
