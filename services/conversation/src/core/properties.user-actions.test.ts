/**
 * Property tests of the state machine (see properties.test.ts): user messages and cancels in every
 * state, and context_exhausted absorbing every event.
 */
import { describe, it, expect } from '@jest/globals';
import fc from 'fast-check';
import { transition, CONTINUATION_CANCELLED_SUMMARY, REJECTION_MESSAGES, CANCELLED_CURRENT, CANCELLED_SKIPPED } from './index.ts';
import type { ConversationContext, ConversationState, Effect, PhaseKind, RejectionCode } from './index.ts';
import { shapeWith } from '../../test/core-support/arbitraries.ts';
import { scenarioArb, deepFreeze } from '../../test/core-support/scenario-runs.ts';
import { probeEvents } from '../../test/core-support/event-driver.ts';
import { RUNS, opts, run, persisted, statesOf, bare, clone, fail, toolResults } from '../../test/core-support/property-helpers.ts';

const BUSY: readonly PhaseKind[] = [
  'awaiting_llm',
  'llm_requesting',
  'tool_executing',
  'awaiting_sub_agents',
  'awaiting_mode_approval',
  'awaiting_continuation',
];

function expectedRejectionForUserMessage(state: ConversationState, ctx: ConversationContext): RejectionCode | null {
  const kind = state.phase.kind;
  if (ctx.isSubAgent) return kind === 'completed' || kind === 'failed' ? 'conversation_finished' : 'sub_agent_driven_by_parent';
  if (kind === 'idle' || kind === 'error') return null;
  if (kind === 'cancelling') return 'cancellation_in_progress';
  if (kind === 'context_exhausted') return 'context_exhausted';
  if (BUSY.includes(kind)) return 'agent_busy';
  throw new Error(`a parent reached ${kind}`);
}
describe('conversation state machine properties', () => {
  it('rejects a user message in every busy state (agent_busy, cancellation_in_progress, ...) with the documented words', () => {
    const seen = new Set<string>();
    fc.assert(
      fc.property(scenarioArb(), (sc) => {
        const r = run(sc);
        for (const state of statesOf(r)) {
          const expected = expectedRejectionForUserMessage(state, sc.ctx);
          const result = transition(state, sc.ctx, { type: 'user_message', text: 'are you there?', images: [] });
          if (expected === null) {
            if (!result.ok) fail(r, `user_message in ${state.phase.kind} was rejected (${result.rejection.code})`);
            continue;
          }
          seen.add(state.phase.kind);
          if (result.ok) fail(r, `user_message in ${state.phase.kind} was accepted, expected rejection ${expected}`);
          expect(result.rejection.code).toBe(expected);
          expect(result.rejection.message).toBe(REJECTION_MESSAGES[expected]);
        }
        // Order of checks (docs): exhausted, finished sub-agent, sub-agent, then an empty message, then the phase.
        for (const state of statesOf(r)) {
          const kind = state.phase.kind;
          const expected: RejectionCode =
            kind === 'context_exhausted'
              ? 'context_exhausted'
              : sc.ctx.isSubAgent && (kind === 'completed' || kind === 'failed')
                ? 'conversation_finished'
                : sc.ctx.isSubAgent
                  ? 'sub_agent_driven_by_parent'
                  : 'empty_message';
          const result = transition(state, sc.ctx, { type: 'user_message', text: ' \n\t', images: [] });
          if (result.ok || result.rejection.code !== expected)
            fail(r, `blank message in ${kind}: ${result.ok ? 'accepted' : result.rejection.code}, expected ${expected}`);
        }
      }),
      opts,
    );
    for (const kind of [
      'llm_requesting',
      'tool_executing',
      'awaiting_sub_agents',
      'awaiting_mode_approval',
      'awaiting_continuation',
      'cancelling',
    ]) {
      expect(seen).toContain(kind);
    }
  });

  it('cancel in tool_executing persists exactly one synthetic result per pending tool (current + remaining), then idle', () => {
    let checked = 0;
    fc.assert(
      fc.property(scenarioArb({ shape: shapeWith({ isSubAgent: false }) }), (sc) => {
        const r = run(sc);
        for (const state of statesOf(r).map(bare)) {
          const p = state.phase;
          if (p.kind !== 'tool_executing') continue;
          checked++;
          const result = transition(state, sc.ctx, { type: 'user_cancel' });
          if (!result.ok) return fail(r, `user_cancel in tool_executing rejected: ${result.rejection.code}`);
          expect(result.state.phase.kind).toBe('idle');
          const messages = persisted(result.effects);
          const results = toolResults(messages);
          const pending = [p.current, ...p.remaining].map((c) => c.id);
          expect(results.map((x) => x.toolUseId)).toEqual(pending);
          // One `tool` message per result.
          expect(messages.filter((m) => m.type === 'tool').map((m) => m.content.length)).toEqual(pending.map(() => 1));
          results.forEach((x, i) => {
            expect(x.cancelled).toBe(true);
            expect(x.isError).toBe(true);
            expect(x.content).toBe(i === 0 ? CANCELLED_CURRENT : CANCELLED_SKIPPED);
          });
          // The current tool runs on a runner (tools resolved in the conversation never stay current): kill it.
          const kills = result.effects.filter((e) => e.type === 'kill_tool');
          expect(kills.map((e) => (e.type === 'kill_tool' ? e.toolUseId : ''))).toEqual([p.current.id]);
          // The chain is valid after the cancel.
        }
        return true;
      }),
      opts,
    );
    expect(checked).toBeGreaterThan(20);
  });

  it('context_exhausted absorbs every event: no-op or rejection, state unchanged (REQ-BED-021)', () => {
    let checked = 0;
    fc.assert(
      fc.property(scenarioArb({ shape: shapeWith({ isSubAgent: false }), maxLength: 30 }), (sc) => {
        const r = run(sc);
        const exhausted = statesOf(r).filter((s) => s.phase.kind === 'context_exhausted');
        for (const state of exhausted) {
          checked++;
          const frozen = deepFreeze(clone(state));
          const events = [...probeEvents(state, sc.ctx), ...r.steps.map((s) => s.event)];
          for (const event of events) {
            const result = transition(frozen, sc.ctx, event);
            if (result.ok) {
              if (result.state !== frozen || result.effects.length > 0) {
                fail(r, `context_exhausted + ${event.type} changed something: ${JSON.stringify(result).slice(0, 400)}`);
              }
            }
          }
          const msg = transition(frozen, sc.ctx, { type: 'user_message', text: 'more', images: [] });
          expect(msg.ok ? null : msg.rejection.code).toBe('context_exhausted');
        }
      }),
      opts,
    );
    expect(checked).toBeGreaterThan(3);
  });

  it('user_cancel works from every phase as documented and answers every tool call still owed (REQ-BED-005)', () => {
    const seen = new Set<string>();
    fc.assert(
      fc.property(scenarioArb(), (sc) => {
        const r = run(sc);
        const ctx = sc.ctx;
        for (const state of statesOf(r).map(bare)) {
          const p = state.phase;
          const result = transition(state, ctx, { type: 'user_cancel' });
          seen.add(`${ctx.isSubAgent ? 'S' : 'P'}:${p.kind}`);
          const where = `user_cancel in ${p.kind} (${ctx.isSubAgent ? 'sub-agent' : 'parent'})`;
          if (p.kind === 'context_exhausted') {
            if (result.ok && (result.state !== state || result.effects.length > 0)) fail(r, `${where} changed the state`);
            continue;
          }
          if (p.kind === 'completed' || p.kind === 'failed') {
            expect(result.ok ? 'accepted' : result.rejection.code).toBe('conversation_finished');
            continue;
          }
          if (p.kind === 'idle' && !ctx.isSubAgent) {
            expect(result.ok ? 'accepted' : result.rejection.code).toBe('nothing_to_cancel');
            continue;
          }
          if (p.kind === 'error') {
            expect(result.ok ? 'accepted' : result.rejection.code).toBe('nothing_to_cancel');
            continue;
          }
          if (p.kind === 'cancelling') {
            if (!result.ok || result.state !== state || result.effects.length > 0) fail(r, `${where} is not a no-op`);
            continue;
          }
          if (!result.ok) return fail(r, `${where} rejected: ${result.rejection.code}`);
          const effects = result.effects;
          const next = result.state.phase;
          const of = <T extends Effect['type']>(type: T) => effects.filter((e): e is Extract<Effect, { type: T }> => e.type === type);
          // What is in flight is stopped.
          if ((p.kind === 'llm_requesting' || p.kind === 'awaiting_continuation') && p.retry === null) {
            expect(of('abort_llm').map((e) => e.requestId)).toEqual([p.requestId]);
          }
          if ((p.kind === 'llm_requesting' || p.kind === 'awaiting_continuation') && p.retry !== null) {
            expect(of('cancel_timer').map((e) => e.timerId)).toEqual([p.retry.timerId]);
          }
          if (p.kind === 'tool_executing') expect(of('kill_tool').map((e) => e.toolUseId)).toEqual([p.current.id]);
          if (p.kind === 'awaiting_sub_agents') {
            expect(
              of('stop_sub_agent')
                .map((e) => e.agentId)
                .sort(),
            ).toEqual([...p.pending].sort());
            expect(of('cancel_timer').map((e) => e.timerId)).toEqual([p.timerId]);
          }
          if (result.state.mode !== state.mode) fail(r, `${where} changed the mode`);
          const owedIds =
            p.kind === 'tool_executing'
              ? [p.current.id, ...p.remaining.map((c) => c.id)]
              : p.kind === 'awaiting_sub_agents'
                ? [p.spawnToolUseId, ...p.remaining.map((c) => c.id)]
                : p.kind === 'awaiting_mode_approval'
                  ? [p.toolUseId, ...p.remaining.map((c) => c.id)]
                  : [];
          if (ctx.isSubAgent) {
            // A sub-agent that is stopped (by a person or by its parent) fails, answers what it owes, and its parent is told.
            const stop = transition(state, ctx, { type: 'sub_agent_stop', reason: 'parent gave up' });
            for (const [how, res] of [
              ['user_cancel', result],
              ['sub_agent_stop', stop],
            ] as const) {
              if (!res.ok) return fail(r, `${how} in ${p.kind} (sub-agent) rejected: ${res.rejection.code}`);
              const phase = res.state.phase;
              if (phase.kind !== 'failed' || phase.errorKind !== 'cancelled') fail(r, `${how} in ${p.kind} (sub-agent) -> ${phase.kind}`);
              const told = res.effects.filter((e) => e.type === 'notify_parent');
              if (told.length !== 1 || told[0]?.type !== 'notify_parent' || told[0].outcome.success)
                fail(r, `${how} in ${p.kind}: notify_parent ${JSON.stringify(told)}`);
              const answered = toolResults(persisted(res.effects));
              if (
                JSON.stringify(answered.map((x) => x.toolUseId)) !== JSON.stringify(owedIds) ||
                answered.some((x) => !x.cancelled || !x.isError)
              ) {
                fail(
                  r,
                  `${how} in ${p.kind} (sub-agent) answered [${answered.map((x) => x.toolUseId).join(', ')}], owed [${owedIds.join(', ')}]`,
                );
              }
            }
            continue;
          }
          // Parent: what it goes to, and no partial response persisted (REQ-BED-005).
          if (p.kind === 'llm_requesting' && p.retry === null) {
            expect(next.kind).toBe('cancelling');
            expect(of('persist_message')).toHaveLength(0);
            const timers = of('schedule_timer');
            expect(timers.map((e) => e.purpose)).toEqual(['cancel_timeout']);
            if (next.kind === 'cancelling') expect(next.timerId).toBe(timers[0]?.timerId);
          } else if (p.kind === 'awaiting_continuation') {
            expect(next.kind).toBe('context_exhausted');
            if (next.kind === 'context_exhausted') expect(next.summary).toBe(CONTINUATION_CANCELLED_SUMMARY);
          } else {
            expect(next.kind).toBe('idle');
          }
          const answered = toolResults(persisted(effects));
          expect(answered.map((x) => x.toolUseId)).toEqual(owedIds);
          for (const x of answered) {
            expect(x.cancelled).toBe(true);
            expect(x.isError).toBe(true);
          }
        }
        return true;
      }),
      { numRuns: RUNS / 2 },
    );
    for (const kind of [
      'llm_requesting',
      'tool_executing',
      'awaiting_sub_agents',
      'awaiting_mode_approval',
      'awaiting_continuation',
      'cancelling',
    ]) {
      expect(seen).toContain(`P:${kind}`);
    }
    expect(seen).toContain('S:tool_executing');
  });
});
