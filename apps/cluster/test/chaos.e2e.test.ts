/**
 * Crash semantics end to end (docs/architecture.md, "Side effects after a crash"), on the SHIPPED
 * defaults: 20 conversations in Unrestricted mode whose tools append lines to a ledger file,
 * and in the middle of a turn each of: kill -9 of a tool-runner, of a gateway, of a
 * conversation replica, and a Redis restart that loses every key. After each fault every
 * conversation is at rest within 5 s; at the end no ledger line is there twice (no tool ran
 * twice), every tool_use is answered exactly once, and no user message is lost or doubled.
 * `make bench BENCH=chaos` runs the same scenario three times and prints the figures.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { FAULT_KINDS, startChaos, type Chaos, type FaultOutcome } from './support/chaos.ts';

let chaos: Chaos;
const outcomes: FaultOutcome[] = [];

beforeAll(async () => {
  chaos = await startChaos('chaos');
}, 180_000);

afterAll(async () => {
  if (outcomes.length)
    console.log(outcomes.map((o) => `${o.fault}: at rest after ${(o.restMs / 1000).toFixed(1)} s (held ${o.held})`).join('\n'));
  await chaos?.close();
}, 60_000);

describe('crash semantics with 20 live conversations, on the shipped defaults', () => {
  it.each(FAULT_KINDS.map((k) => [k]))(
    'every conversation is at rest within 5 s after %s is killed',
    async (kind) => {
      const outcome = await chaos.fault(kind);
      outcomes.push(outcome);
      expect(outcome.restMs).toBeLessThanOrEqual(5_000);
    },
    120_000,
  );

  it('ran no tool twice, answered every tool_use exactly once, and kept every user message once', async () => {
    const { problems, toolCalls, interrupted, lost, ledgerLines } = await chaos.check();
    console.log(`${toolCalls} tool calls, ${ledgerLines} ledger lines, ${interrupted} answered interrupted, ${lost} answered lost`);
    expect(problems).toEqual([]);
    // Tools did run (the ledger is not empty because nothing ran).
    expect(ledgerLines).toBeGreaterThan(20 * FAULT_KINDS.length);
  });
});
