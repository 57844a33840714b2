/**
 * Property tests of the state machine (see properties.test.ts): the owner's budget (docs/state-machine.md,
 * "Budget").
 */
import { describe, it, expect } from '@jest/globals';
import fc from 'fast-check';
import { transition, initialState, buildLlmHistory, checkToolChain } from './index.ts';
import type { ConversationContext, ConversationEvent, NewMessage } from './index.ts';
import { scenarioArb, runChoices, describeRun } from '../../test/core-support/scenario-runs.ts';
import { nextEvent } from '../../test/core-support/event-driver.ts';
import { RUNS, opts } from '../../test/core-support/property-helpers.ts';

describe('budget (docs/state-machine.md, "Budget")', () => {
  it('never makes an LLM request once the budget is spent; the turn stops at that boundary, its tool chain closed', () => {
    let stops = 0;
    fc.assert(
      fc.property(scenarioArb({ maxLength: 50 }), fc.integer({ min: 0, max: 4000 }), (sc, budget) => {
        // The shell's side, simplified: one micro-dollar per token of the conversation's total
        // usage; each event runs with what is left, as the applier passes it in the context.
        let state = initialState(sc.ctx);
        const past: ConversationEvent[] = [];
        const messages: NewMessage[] = [];
        for (const [i, choice] of sc.choices.entries()) {
          const u = state.totalUsage;
          const remaining = budget - (u.inputTokens + u.outputTokens + u.cacheReadInputTokens + u.cacheCreationInputTokens);
          const ctx: ConversationContext = { ...sc.ctx, remainingBudgetMicros: remaining };
          const event = nextEvent(state, ctx, choice, past);
          past.push(event);
          const r = transition(state, ctx, event);
          if (!r.ok || r.state === state) continue;
          for (const e of r.effects) {
            if (e.type === 'request_llm' && remaining <= 0)
              throw new Error(
                `step ${i}: request_llm ${e.requestId} with ${remaining} left\n${describeRun(runChoices(sc.ctx, sc.choices))}`,
              );
            if (e.type === 'persist_message') messages.push(e.message);
          }
          const p = r.state.phase;
          const stopped = (p.kind === 'error' || p.kind === 'failed') && p.errorKind === 'budget_exhausted';
          if (stopped && state.phase.kind !== p.kind) {
            stops++;
            expect(remaining).toBeLessThanOrEqual(0);
            expect(checkToolChain(buildLlmHistory(messages))).toEqual([]);
          }
          state = r.state;
        }
      }),
      opts,
    );
    // Not vacuous: runs do cross their budget.
    expect(stops).toBeGreaterThan(RUNS / 10);
  });
});
