/**
 * docs/state-machine.md "Budget": the transitions that stop for a spent budget.
 */
import { describe, it, expect } from '@jest/globals';
import { BUDGET_EXHAUSTED_MESSAGE, transition, type ConversationContext, type ConversationEvent } from './index.ts';
import {
  Conv,
  bash,
  parentCtx,
  response,
  subCtx,
  timerFired,
  toolComplete,
  triggerContinuation,
  userMessage,
} from '../../test/core-support/matrix-fixtures.ts';
import { type Ok, persisted, notes, effectsOf, results, textOf, waiting } from '../../test/core-support/matrix-rows.ts';

/**
 * docs/state-machine.md, "Budget": each state is reached with no budget, then the event runs
 * with the owner's budget spent (remainingBudgetMicros 0) — the shell's figure, read for the event.
 */
describe('docs/state-machine.md: budget', () => {
  const spent = (ctx: ConversationContext): ConversationContext => ({ ...ctx, remainingBudgetMicros: 0 });
  const run = (c: Conv, event: ConversationEvent): Ok => {
    const r = transition(c.state, spent(c.ctx), event);
    if (!r.ok) throw new Error(`rejected: ${r.rejection.code}`);
    return r;
  };
  const stoppedForBudget = (r: Ok): void => {
    expect(r.state.phase).toEqual({ kind: 'error', message: BUDGET_EXHAUSTED_MESSAGE, errorKind: 'budget_exhausted' });
    expect(effectsOf(r, 'request_llm')).toEqual([]);
    expect(textOf(persisted(r, 'error')[0]!)).toBe(BUDGET_EXHAUSTED_MESSAGE);
    expect(notes(r)).toContainEqual({ kind: 'error', message: BUDGET_EXHAUSTED_MESSAGE, errorKind: 'budget_exhausted' });
  };

  it('tool_executing (last tool) + tool_complete → error budget_exhausted | persist the result and the error, notify; no request', () => {
    const c = new Conv(parentCtx()).toTools([bash('t1'), bash('t2')]);
    c.ok(toolComplete('t1'));
    const r = run(c, toolComplete('t2'));
    stoppedForBudget(r);
    expect(results(r).map((x) => x.toolUseId)).toEqual(['t2']);
    expect(persisted(r).map((m) => m.type)).toEqual(['tool', 'error']);
    expect(r.effects.filter((e) => e.type !== 'notify' && e.type !== 'persist_message')).toEqual([]);
  });

  it('tool_executing (more tools to run) + tool_complete → tool_executing | the next tool starts: the boundary is after the last result', () => {
    const c = new Conv(parentCtx()).toTools([bash('t1'), bash('t2')]);
    const r = run(c, toolComplete('t1'));
    expect(r.state.phase.kind).toBe('tool_executing');
    expect(effectsOf(r, 'execute_tool').map((e) => e.toolUseId)).toEqual(['t2']);
  });

  it('idle + user_message → error budget_exhausted | the message persisted, no request', () => {
    const c = new Conv(parentCtx());
    const r = run(c, userMessage('hi'));
    stoppedForBudget(r);
    expect(persisted(r, 'user').map(textOf)).toEqual(['hi']);
  });

  it('llm_requesting (retry pending) + timer_fired → error budget_exhausted | no retry', () => {
    const c = new Conv(parentCtx()).retryPending();
    stoppedForBudget(run(c, timerFired(c.timer('retry'))));
  });

  it('llm_requesting + llm_response max_tokens (continued) → error budget_exhausted | the response kept, no continuation request', () => {
    const c = new Conv(parentCtx()).toLlm();
    const r = run(c, response(c.requestId, { text: 'partial', stopReason: 'max_tokens' }));
    stoppedForBudget(r);
    expect(persisted(r, 'agent').map(textOf)).toEqual(['partial']);
  });

  it('idle + user_trigger_continuation → error budget_exhausted | no summary request', () => {
    stoppedForBudget(run(new Conv(parentCtx()), triggerContinuation));
  });

  it('a sub-agent: tool_executing (last tool) + tool_complete → failed budget_exhausted | notify_parent', () => {
    const c = new Conv(subCtx()).toTools([bash('t1')]);
    const r = run(c, toolComplete('t1'));
    expect(r.state.phase).toEqual({ kind: 'failed', error: BUDGET_EXHAUSTED_MESSAGE, errorKind: 'budget_exhausted' });
    expect(effectsOf(r, 'notify_parent')[0]!.outcome).toMatchObject({ success: false, errorKind: 'budget_exhausted' });
    expect(effectsOf(r, 'request_llm')).toEqual([]);
  });

  it('with budget left (remainingBudgetMicros > 0) the request goes out as usual', () => {
    const c = new Conv(parentCtx()).toTools([bash('t1')]);
    const r = transition(c.state, { ...c.ctx, remainingBudgetMicros: 1 }, toolComplete('t1'));
    expect(r.ok && r.state.phase.kind).toBe('llm_requesting');
  });

  it('error (budget) with a queued message: it waits rather than starting a turn that could make no request', () => {
    const c = new Conv(parentCtx()).toTools([bash('t1')]);
    c.ok({ ...userMessage('later'), delivery: 'queue' });
    const r = run(c, toolComplete('t1'));
    stoppedForBudget(r);
    expect(waiting(r.state)).toEqual(['queue:later']);
  });
});
