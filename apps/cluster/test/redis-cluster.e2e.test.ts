/**
 * The product on a Redis Cluster of its own (3 masters + 3 replicas on free ports; every service with
 * BEDROCK_REDIS_CLUSTER=on and its ACL user on every node) under the chaos workload of chaos.e2e.test.ts:
 * a tool-runner killed in the middle of one turn, a Redis master (kill -9) in the middle of the next.
 * Every conversation is at rest within 10 s; no tool runs twice, every tool_use is answered exactly
 * once, no user message is lost or doubled.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { startChaos, type Chaos, type FaultOutcome } from './support/chaos.ts';

const CONVERSATIONS = 10;
let chaos: Chaos;
const outcomes: FaultOutcome[] = [];

beforeAll(async () => {
  chaos = await startChaos('rcluster', { redis: 'cluster', conversations: CONVERSATIONS });
}, 240_000);

afterAll(async () => {
  if (outcomes.length)
    console.log(outcomes.map((o) => `${o.fault}: at rest after ${(o.restMs / 1000).toFixed(1)} s (held ${o.held})`).join('\n'));
  await chaos?.close();
}, 60_000);

describe('on a Redis Cluster', () => {
  it('every conversation is at rest within 10 s after a tool-runner is killed (kill -9)', async () => {
    const outcome = await chaos.fault('tool-runner');
    outcomes.push(outcome);
    expect(outcome.restMs).toBeLessThanOrEqual(10_000);
  }, 120_000);

  it('every conversation is at rest within 10 s after a Redis master is killed', async () => {
    // kill -9 of a master; its replica is promoted by the cluster's failover.
    const outcome = await chaos.fault('redis-master');
    outcomes.push(outcome);
    expect(outcome.restMs).toBeLessThanOrEqual(10_000);
  }, 120_000);

  it('ran no tool twice, answered every tool_use exactly once, and kept every user message once', async () => {
    const { problems, toolCalls, ledgerLines } = await chaos.check();
    console.log(`${toolCalls} tool calls, ${ledgerLines} ledger lines`);
    expect(problems).toEqual([]);
    expect(ledgerLines).toBeGreaterThan(CONVERSATIONS * 2);
  });
});
