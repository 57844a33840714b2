/**
 * `make loadtest`'s machinery on a short ramp (1 then 2 conversations, 4 s each) against the real
 * local cluster: every step has turns, events, an event → effect latency, the queues' lag and a
 * reading of every component (each service process, Postgres, Redis); an objective that cannot
 * hold (p99 ≤ 0.001 ms) breaks at once and names what broke.
 */
import { describe, expect, it } from '@jest/globals';
import { runLoadtest } from '../src/loadtest/loadtest.ts';

const base = {
  databaseUrl: process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres',
  redisUrl: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379',
  stepMs: 4000,
  modelMs: 50,
  thinkMs: 200,
  overheadFactor: 1000,
};

describe('the load test', () => {
  it('measures each step: throughput, latencies and every component', async () => {
    const report = await runLoadtest({ ...base, steps: [1, 2], eventToEffectP99Ms: 60_000 });
    expect(report.steps.map((s) => s.conversations)).toEqual([1, 2]);
    expect(report.ceiling).toEqual({ held: 2, broke: null });
    for (const step of report.steps) {
      expect(step.turns).toBeGreaterThan(0);
      expect(step.failedTurns).toBe(0);
      expect(step.eventsPerSecond).toBeGreaterThan(0);
      expect(step.eventToEffect.p99).toBeGreaterThan(0);
      expect(step.turn.p50).toBeGreaterThan(2 * base.modelMs);
      expect(step.queueLagP99['llm-requests']).not.toBeNull();
      expect(step.usage.pgTps).toBeGreaterThan(0);
      expect(step.usage.redisOpsPerSecond).toBeGreaterThan(0);
      const names = Object.keys(step.usage.components);
      expect(names).toEqual(
        expect.arrayContaining(['conversation-1', 'conversation-2', 'llm-gateway-1', 'tool-runner-1', 'web-bff-1', 'postgres', 'redis']),
      );
      // The services did the work: their CPU shows.
      expect(step.usage.components['conversation-1']!.cores + step.usage.components['conversation-2']!.cores).toBeGreaterThan(0);
      expect(step.usage.components['web-bff-1']!.rssMiB).toBeGreaterThan(10);
    }
  }, 240_000);

  it('stops at the first step that breaks an objective and says which and what was busiest', async () => {
    const report = await runLoadtest({ ...base, steps: [1, 2], eventToEffectP99Ms: 0.001 });
    expect(report.steps).toHaveLength(1);
    expect(report.ceiling.held).toBeNull();
    expect(report.ceiling.broke?.broken[0]).toMatch(/^event → effect p99 [\d.]+ ms > 0\.001 ms$/);
    expect(report.ceiling.broke?.busiest.component).toEqual(expect.any(String));
  }, 240_000);
});
