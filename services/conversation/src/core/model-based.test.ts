/**
 * Model-based test: random but realistic event sequences are applied both to the implementation
 * (`transition`) and to the independent reference model (test/core-support/reference-model.ts);
 * after every event they must agree on accepted / rejected (code) / no-op (same state object), on
 * the effects (as tags) and on the abstract state (test/core-support/model-based-impl.ts).
 */
import { describe, it, expect } from '@jest/globals';
import fc from 'fast-check';
import { transition, initialState, buildLlmHistory, checkToolChain, pendingMessageId, type HistoryMessage } from './index.ts';
import type { ConversationContext, Effect } from './types.ts';
import { modelStep } from '../../test/core-support/reference-model.ts';
import { abstractModel, initialModel, type ModelOutcome } from '../../test/core-support/reference-model-state.ts';
import { abstractImpl, effectsMatch, payloadProblems, persistedIds, tagOf } from '../../test/core-support/model-based-impl.ts';
import { genEvent, rng, type Memory } from '../../test/core-support/model-based-events.ts';
import { noSandboxCtx, parentCtx, subCtx } from '../../test/core-support/matrix-fixtures.ts';

const CONTEXTS: readonly { readonly name: string; readonly ctx: ConversationContext }[] = [
  { name: 'parent, sandbox', ctx: parentCtx() },
  { name: 'parent, no sandbox', ctx: noSandboxCtx() },
  { name: 'sub-agent', ctx: subCtx() },
  { name: 'parent, 1 auto-continuation, 2 attempts', ctx: parentCtx({ policy: { maxAutoContinuations: 1, maxLlmAttempts: 2 } }) },
];

// ---------------------------------------------------------------------------------------------
// The run.

function describeOutcome(o: ModelOutcome): string {
  if (o.kind === 'noop') return 'no-op';
  if (o.kind === 'rejected') return `reject ${o.code}`;
  return `accept → ${JSON.stringify(abstractModel(o.next))} effects ${JSON.stringify([...o.effects].sort())}${
    o.optional.length > 0 ? ` (+ optional ${JSON.stringify(o.optional)})` : ''
  } toolResults ${JSON.stringify(o.next.toolResults)}`;
}

const CHAIN_CLOSED: readonly string[] = ['idle', 'error', 'llm_requesting', 'awaiting_continuation', 'context_exhausted'];

/** Runs one sequence; returns null when model and implementation agree throughout, else a report. */
/**
 * `budget`: the owner may have this many LLM requests made (a stand-in for spend: the shell
 * turns what was spent into the context's remaining budget, the core only reads the figure);
 * each event runs with the budget left after the requests made so far. Absent: no budget.
 */
function runSequence(ctxIndex: number, seeds: readonly number[], budget?: number): string | null {
  const { name, ctx: base } = CONTEXTS[ctxIndex]!;
  let ctx = base;
  let impl = initialState(ctx);
  let model = initialModel(ctx);
  const mem: Memory = { toolCounter: 0, timers: [], agents: [], messages: 0 };
  const implUses: string[] = [];
  const implResults: string[] = [];
  const messages: HistoryMessage[] = [];
  const effectIds: string[] = [];
  const trace: string[] = [];
  // Waiting messages: the text each was sent with → its id; ids delivered and withdrawn, in order.
  const waitingIds = new Map<string, string>();
  const implDelivered: string[] = [];
  const withdrawn: string[] = [];
  const implSteered = new Set<string>();
  const fail = (why: string): string => `context: ${name}\n${trace.join('\n')}\n${why}`;

  const initial = abstractImpl(impl);
  if (JSON.stringify(initial) !== JSON.stringify(abstractModel(model))) return fail(`initial state differs: ${JSON.stringify(initial)}`);

  for (const seed of seeds) {
    if (budget !== undefined) ctx = { ...base, remainingBudgetMicros: budget - impl.llmRequests };
    const event = genEvent(ctx, model, mem, rng(seed));
    trace.push(`  [${abstractModel(model).phase}] ${JSON.stringify(event)}`);
    const result = transition(impl, ctx, event);
    const scheduled = result.ok ? result.effects.filter((e) => e.type === 'schedule_timer') : [];
    const freshTimer =
      scheduled.length > 0 ? (scheduled[0] as Extract<Effect, { type: 'schedule_timer' }>).timerId : '<no timer scheduled>';
    const alternatives = modelStep(ctx, model, event, freshTimer);
    const expected = alternatives.map(describeOutcome).join('\n    or ');

    if (!result.ok) {
      const match = alternatives.find((o) => o.kind === 'rejected' && (o.code === '*' || o.code === result.rejection.code));
      if (!match) return fail(`implementation: reject ${result.rejection.code}\nmodel expects: ${expected}`);
      trace.push(`    → reject ${result.rejection.code}`);
      continue;
    }
    if (result.state === impl) {
      if (result.effects.length > 0) return fail(`same state object returned with effects ${JSON.stringify(result.effects.map(tagOf))}`);
      if (!alternatives.some((o) => o.kind === 'noop')) return fail(`implementation: no-op\nmodel expects: ${expected}`);
      trace.push('    → no-op');
      continue;
    }

    // Accepted by the implementation.
    const tags = result.effects.map(tagOf);
    const abs = abstractImpl(result.state);
    const ids = persistedIds(result.effects);
    const uses = [...implUses, ...ids.uses];
    const results = [...implResults, ...ids.results];
    const busyBefore = impl.phase.kind !== 'idle' && impl.phase.kind !== 'error';
    if (event.type === 'user_message' && event.delivery && event.delivery !== 'reject' && busyBefore) {
      // It waits (an interrupt that cancelled at once is delivered in the same transition).
      const id = pendingMessageId(ctx.conversationId, result.state.seq);
      waitingIds.set(event.text, id);
      if (event.delivery !== 'queue') implSteered.add(id);
      const kept = (result.state.pending ?? []).find((m) => m.id === id);
      if (kept && kept.text !== event.text) return fail(`pending ${id} holds ${JSON.stringify(kept.text)}`);
    }
    const delivered = [...implDelivered];
    for (const e of result.effects) {
      if (e.type !== 'persist_message' || e.message.type !== 'user') continue;
      const first = e.message.content[0];
      const id = first?.type === 'text' ? waitingIds.get(first.text) : undefined;
      if (id !== undefined) delivered.push(id);
    }
    const describeImpl = `accept → ${JSON.stringify(abs)} effects ${JSON.stringify([...tags].sort())} toolResults ${JSON.stringify(results)}`;
    if (result.state.phase.kind === 'awaiting_llm') return fail('transition() returned awaiting_llm');
    if (!(result.state.seq > impl.seq)) return fail(`seq did not increase: ${impl.seq} → ${result.state.seq}`);
    const problems = payloadProblems(ctx, impl, result.state, result.effects);
    if (problems.length > 0) return fail(`effect payloads: ${problems.join('; ')}`);
    const allIds = new Set(effectIds);
    for (const e of result.effects) {
      if (allIds.has(e.id)) return fail(`effect id ${e.id} reused`);
      effectIds.push(e.id);
    }
    const match = alternatives.find((o): o is Extract<ModelOutcome, { kind: 'accepted' }> => {
      if (o.kind !== 'accepted') return false;
      const m = abstractModel(o.next);
      const sameAbs = JSON.stringify({ ...m, errorKind: null }) === JSON.stringify({ ...abs, errorKind: null });
      const sameKind = m.errorKind === null || m.errorKind === abs.errorKind;
      const sameIds =
        JSON.stringify(o.next.toolUses) === JSON.stringify(uses) &&
        (o.next.resultsUnspecified || JSON.stringify(o.next.toolResults) === JSON.stringify(results));
      const sameDelivered = JSON.stringify(o.next.delivered) === JSON.stringify(delivered);
      return sameDelivered && sameAbs && sameKind && sameIds && effectsMatch(tags, o.effects, o.optional);
    });
    if (!match) return fail(`implementation: ${describeImpl}\nmodel expects: ${expected}`);
    trace.push(`    → ${abs.phase} ${JSON.stringify(tags)}`);
    impl = result.state;
    model = match.next;
    implUses.push(...ids.uses);
    implResults.push(...ids.results);
    implDelivered.splice(0, implDelivered.length, ...delivered);
    if (event.type === 'user_cancel_queued') withdrawn.push(event.queuedId);
    // Waiting messages are never lost, duplicated or reordered: each one that ever waited is
    // waiting, delivered once or withdrawn; queued ones go out in the order they arrived;
    // nothing waits while the conversation is at rest.
    const waitingNow = (impl.pending ?? []).map((m) => m.id);
    for (const id of waitingIds.values()) {
      const times = delivered.filter((x) => x === id).length + (waitingNow.includes(id) ? 1 : 0) + (withdrawn.includes(id) ? 1 : 0);
      if (times !== 1) return fail(`waiting message ${id} is accounted for ${times} times (waiting, delivered, withdrawn)`);
    }
    const seqOf = (id: string): number => Number(id.slice(id.lastIndexOf('/') + 1));
    const queuedOrder = delivered.filter((id) => !implSteered.has(id)).map(seqOf);
    if (queuedOrder.some((n, i) => i > 0 && n < queuedOrder[i - 1]!))
      return fail(`queued messages delivered out of order: ${delivered.join(', ')}`);
    // At rest nothing waits, unless the budget is spent (then messages wait: no turn could start).
    const spent = ctx.remainingBudgetMicros !== null && ctx.remainingBudgetMicros <= 0;
    if ((impl.phase.kind === 'idle' || impl.phase.kind === 'error') && waitingNow.length > 0 && !spent)
      return fail(`${impl.phase.kind} with messages waiting`);
    for (const e of result.effects) if (e.type === 'persist_message') messages.push(e.message);
    // Whenever the conversation is not inside a tool chain, the history for the model is valid.
    if (CHAIN_CLOSED.includes(impl.phase.kind) && !model.resultsUnspecified) {
      const problems = checkToolChain(buildLlmHistory(messages));
      if (problems.length > 0) return fail(`invalid tool chain in ${impl.phase.kind}: ${problems.join('; ')}`);
    }
    for (const e of result.effects) {
      if (e.type === 'schedule_timer') mem.timers.push(e.timerId);
      if (e.type === 'spawn_sub_agent') mem.agents.push(e.agentId);
    }
  }
  return null;
}

describe('model-based: implementation agrees with the reference model', () => {
  // Fixed fast-check seeds keep CI deterministic; on failure fast-check prints seed and path.
  it.each(CONTEXTS.map((c, i) => [c.name, i] as const))('%s', (_name, ctxIndex) => {
    fc.assert(
      fc.property(fc.array(fc.nat(), { minLength: 1, maxLength: 60 }), (seeds) => {
        const report = runSequence(ctxIndex, seeds);
        if (report !== null) throw new Error(report);
      }),
      { numRuns: 800, seed: 20261125 + ctxIndex },
    );
  });

  // "Budget": the same agreement when the owner's budget runs out mid-run (after 0 to 5 requests).
  it.each(CONTEXTS.map((c, i) => [c.name, i] as const))('%s, with a budget that runs out', (_name, ctxIndex) => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 5 }), fc.array(fc.nat(), { minLength: 1, maxLength: 60 }), (budget, seeds) => {
        const report = runSequence(ctxIndex, seeds, budget);
        if (report !== null) throw new Error(report);
      }),
      { numRuns: 300, seed: 20261126 + ctxIndex },
    );
  });

  it('the generator reaches every phase (the test is not vacuous)', () => {
    const seen = new Set<string>();
    for (let ctxIndex = 0; ctxIndex < CONTEXTS.length; ctxIndex++) {
      const { ctx } = CONTEXTS[ctxIndex]!;
      fc.assert(
        fc.property(fc.array(fc.nat(), { minLength: 1, maxLength: 60 }), (seeds) => {
          let model = initialModel(ctx);
          const mem: Memory = { toolCounter: 0, timers: [], agents: [], messages: 0 };
          for (const seed of seeds) {
            const event = genEvent(ctx, model, mem, rng(seed));
            const first = modelStep(ctx, model, event, `${ctx.conversationId}/timer/x${mem.timers.length}`)[0]!;
            if (first.kind === 'accepted') {
              model = first.next;
              const p = model.phase;
              if (p.kind === 'awaiting_sub_agents') mem.agents.push(...p.pending);
              if ((p.kind === 'llm_requesting' || p.kind === 'awaiting_continuation') && p.retryTimer) mem.timers.push(p.retryTimer);
              if (p.kind === 'cancelling') mem.timers.push(p.timerId);
              if (p.kind === 'awaiting_sub_agents') mem.timers.push(p.timerId);
            }
            seen.add(model.phase.kind);
          }
        }),
        { numRuns: 200, seed: 42 },
      );
    }
    expect([...seen].sort()).toEqual(
      [
        'awaiting_continuation',
        'awaiting_mode_approval',
        'awaiting_sub_agents',
        'cancelling',
        'completed',
        'context_exhausted',
        'error',
        'failed',
        'idle',
        'llm_requesting',
        'tool_executing',
      ].sort(),
    );
  });
});
