/**
 * Crash semantics end to end (docs/architecture.md, "Side effects after a crash") on the SHIPPED
 * defaults: 20 conversations in Unrestricted mode whose tools append lines to a ledger file, and in the
 * middle of a turn kill -9 of a tool-runner, of a gateway, of a conversation replica, and a Redis restart
 * that loses every key. Each fault's recovery is bounded (ALLOWED_MS); no tool runs twice, no tool_use
 * or user message is lost or doubled. docs/testing.md, "Crash semantics (chaos)".
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { readConversationConfig } from '@bedrock/conversation';
import { FAULT_KINDS, startChaos, type Chaos, type FaultOutcome } from './support/chaos.ts';

let chaos: Chaos;
const outcomes: (FaultOutcome & { quietMs: number })[] = [];
const seconds = (ms: number) => `${(ms / 1000).toFixed(1)} s`;
const defaults = readConversationConfig({});
const { jobLock, jobStalledInterval } = defaults.transport.redis!;
/**
 * The recovery's worst case for each fault, from the shipped defaults (docs/conversation.md,
 * "Recovery: crashes and lost work"): a dead consumer's job is taken over once its lock has lapsed and a stalled
 * check has run; after a Redis restart, lost work is called lost after two stale periods and a
 * sweep. Plus 2 s for the work the recovery hands back to a machine that is busy.
 */
const ALLOWED_MS: Record<string, number> = {
  'tool-runner': jobLock + jobStalledInterval + 2_000,
  'llm-gateway': jobLock + jobStalledInterval + 2_000,
  conversation: jobLock + jobStalledInterval + 2_000,
  redis: 2 * defaults.recovery.staleAfter + defaults.recovery.interval + 2_000,
};

beforeAll(async () => {
  chaos = await startChaos('chaos');
}, 180_000);

afterAll(async () => {
  if (outcomes.length)
    console.log(
      outcomes
        .map((o) => `${o.fault}: at rest after ${seconds(o.restMs)}, without the fault ${seconds(o.quietMs)} (held ${o.held})`)
        .join('\n'),
    );
  await chaos?.close();
}, 60_000);

describe('crash semantics with 20 live conversations, on the shipped defaults', () => {
  it.each(FAULT_KINDS.map((k) => [k]))(
    'every conversation is at rest within the recovery’s worst case of a turn without the fault after %s is killed',
    async (kind) => {
      // Against the same turn without the fault, run just before it and measured from the same moment:
      // the turn's own work left then grows with the machine's load and is not what the fault costs
      // (the absolute figures are the benchmark's, `make bench BENCH=chaos`).
      const quiet = await chaos.fault(kind, false);
      const outcome = await chaos.fault(kind);
      outcomes.push({ ...outcome, quietMs: quiet.restMs });
      expect(outcome.restMs - quiet.restMs).toBeLessThanOrEqual(ALLOWED_MS[kind]!);
    },
    180_000,
  );

  it('ran no tool twice, answered every tool_use exactly once, and kept every user message once', async () => {
    const { problems, toolCalls, interrupted, lost, ledgerLines } = await chaos.check();
    console.log(`${toolCalls} tool calls, ${ledgerLines} ledger lines, ${interrupted} answered interrupted, ${lost} answered lost`);
    expect(problems).toEqual([]);
    // Tools did run (the ledger is not empty because nothing ran).
    expect(ledgerLines).toBeGreaterThan(20 * FAULT_KINDS.length);
  });
});
