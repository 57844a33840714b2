/**
 * Property-based tests of the conversation state machine (spec 000 "Property-Based Tests", spec 002
 * "Property Invariants" as resolved by docs/design.md, REQ-BED-001..024), written against docs/state-machine.md:
 * here determinism, ids, conventions, waits and the driver's coverage; the rest in properties.*.test.ts.
 * Scenarios come from test/core-support/scenario-runs.ts; counterexamples print as event traces.
 */
import { describe, it, expect } from '@jest/globals';
import { isDeepStrictEqual } from 'node:util';
import fc from 'fast-check';
import { transition, REJECTION_MESSAGES } from './index.ts';
import type { PhaseKind } from './index.ts';
import { scenarioArb, runChoices, deepFreeze } from '../../test/core-support/scenario-runs.ts';
import { probeEvents } from '../../test/core-support/event-driver.ts';
import { RUNS, opts, run, effectsOf, persisted, statesOf, clone, fail } from '../../test/core-support/property-helpers.ts';

describe('conversation state machine properties', () => {
  it('is deterministic and never mutates its inputs (REQ-BED-001)', () => {
    fc.assert(
      fc.property(scenarioArb({ maxLength: 30 }), (sc) => {
        const r = run(sc);
        const ctx = deepFreeze(clone(sc.ctx));
        for (const s of r.steps) {
          // The reached state, frozen: a mutation by transition() throws (ESM code is strict).
          const snapshot = JSON.stringify(s.before);
          const state = deepFreeze(clone(s.before));
          const probes = probeEvents(s.before, sc.ctx);
          for (const event of [s.event, probes[s.index % probes.length]!, probes[(s.index * 7 + 3) % probes.length]!]) {
            const frozenEvent = deepFreeze(clone(event));
            const a = transition(state, ctx, frozenEvent);
            const b = transition(state, ctx, frozenEvent);
            if (!isDeepStrictEqual(a, b)) fail(r, `step ${s.index}: two calls with ${event.type} differ`);
            // Same as on the unfrozen original: freezing changes nothing.
            if (!isDeepStrictEqual(a, transition(s.before, sc.ctx, event))) fail(r, `step ${s.index}: frozen and unfrozen inputs differ`);
          }
          expect(JSON.stringify(state)).toBe(snapshot);
          expect(JSON.stringify(s.before)).toBe(snapshot);
        }
      }),
      { numRuns: 100 },
    );
  });

  it('effect, request and timer ids are unique across a run and deterministic', () => {
    fc.assert(
      fc.property(scenarioArb({ maxLength: 50 }), (sc) => {
        const r = run(sc);
        const again = runChoices(sc.ctx, sc.choices);
        if (
          !isDeepStrictEqual(
            again.steps.map((s) => s.result),
            r.steps.map((s) => s.result),
          )
        )
          fail(r, 'two runs of the same events differ');
        const cid = sc.ctx.conversationId;
        const requestPattern = new RegExp(`^${cid}/llm/\\d+$`);
        const timerPattern = new RegExp(`^${cid}/timer/\\d+$`);
        const ids = new Set<string>();
        const requestIds = new Set<string>();
        const timerIds = new Set<string>();
        for (const s of r.steps) {
          for (const e of effectsOf(s.result)) {
            if (ids.has(e.id)) fail(r, `step ${s.index}: duplicate effect id ${e.id}`);
            ids.add(e.id);
            // ${conversationId}/${seq}/${i}, seq of this transition, i its position.
            const m = /^(.*)\/(\d+)\/(\d+)$/.exec(e.id);
            const seq = Number(m?.[2]);
            if (m?.[1] !== cid || seq <= s.before.seq || seq > s.after.seq)
              fail(r, `step ${s.index}: effect id ${e.id} (seq ${s.before.seq} -> ${s.after.seq})`);
            if (e.type === 'request_llm') {
              if (requestIds.has(e.requestId)) fail(r, `step ${s.index}: request id ${e.requestId} reused`);
              if (!requestPattern.test(e.requestId)) fail(r, `step ${s.index}: request id ${e.requestId}`);
              requestIds.add(e.requestId);
            }
            if (e.type === 'schedule_timer') {
              if (timerIds.has(e.timerId)) fail(r, `step ${s.index}: timer id ${e.timerId} reused`);
              if (!timerPattern.test(e.timerId)) fail(r, `step ${s.index}: timer id ${e.timerId}`);
              timerIds.add(e.timerId);
            }
          }
        }
      }),
      opts,
    );
  });

  it('never has two LLM requests in flight, nor two tools running (serial tools, REQ-BED-004)', () => {
    fc.assert(
      fc.property(scenarioArb({ maxLength: 50 }), (sc) => {
        const r = run(sc);
        // The outside world: what has been asked for and neither answered nor aborted/killed.
        const llm = new Set<string>();
        const tools = new Set<string>();
        for (const s of r.steps) {
          const ev = s.event;
          // The event is delivered: it answers what it names.
          if (ev.type === 'llm_response' || ev.type === 'llm_error') llm.delete(ev.requestId);
          if (ev.type === 'tool_complete') tools.delete(ev.result.toolUseId);
          if (ev.type === 'work_lost') {
            llm.clear();
            tools.clear();
          }
          for (const e of effectsOf(s.result)) {
            if (e.type === 'abort_llm') llm.delete(e.requestId);
            if (e.type === 'kill_tool') tools.delete(e.toolUseId);
            if (e.type === 'request_llm') {
              if (llm.size > 0) fail(r, `step ${s.index}: request_llm ${e.requestId} while ${[...llm].join(', ')} in flight`);
              llm.add(e.requestId);
            }
            if (e.type === 'execute_tool') {
              if (tools.size > 0) fail(r, `step ${s.index}: execute_tool ${e.toolUseId} while ${[...tools].join(', ')} runs`);
              tools.add(e.toolUseId);
            }
          }
        }
      }),
      opts,
    );
  });

  it('never returns the transient phase awaiting_llm', () => {
    fc.assert(
      fc.property(scenarioArb({ maxLength: 30 }), (sc) => {
        const r = run(sc);
        for (const state of statesOf(r)) {
          if (state.phase.kind === 'awaiting_llm') fail(r, 'a run reached awaiting_llm');
          for (const event of probeEvents(state, sc.ctx)) {
            const result = transition(state, sc.ctx, event);
            if (result.ok && result.state.phase.kind === 'awaiting_llm')
              fail(r, `${state.phase.kind} + ${event.type} returned awaiting_llm`);
          }
        }
      }),
      opts,
    );
  });

  it('follows the conventions: no-op = same state object and no effects; accepted = seq grows; rejections carry the documented words', () => {
    fc.assert(
      fc.property(scenarioArb(), (sc) => {
        const r = run(sc);
        for (const s of r.steps) {
          const res = s.result;
          if (!res.ok) {
            if (res.rejection.message !== REJECTION_MESSAGES[res.rejection.code])
              fail(r, `step ${s.index}: rejection words of ${res.rejection.code}`);
            continue;
          }
          if (res.state.seq === s.before.seq) {
            if (res.state !== s.before || res.effects.length > 0)
              fail(r, `step ${s.index}: seq unchanged but the state or effects changed`);
          } else if (res.state.seq < s.before.seq) {
            fail(r, `step ${s.index}: seq went down`);
          }
        }
      }),
      opts,
    );
  });

  it('never waits for something nobody was asked for: every wait is backed by a request, tool, sub-agent or timer still outstanding', () => {
    fc.assert(
      fc.property(scenarioArb({ maxLength: 50 }), (sc) => {
        const r = run(sc);
        // The outside world, as the effects asked it to be and the events say it is.
        const requests = new Set<string>();
        const tools = new Set<string>();
        const agents = new Set<string>();
        const timers = new Set<string>();
        for (const s of r.steps) {
          const ev = s.event;
          if (ev.type === 'llm_response' || ev.type === 'llm_error') requests.delete(ev.requestId);
          if (ev.type === 'tool_complete') tools.delete(ev.result.toolUseId);
          if (ev.type === 'sub_agent_result') agents.delete(ev.outcome.agentId);
          if (ev.type === 'timer_fired') timers.delete(ev.timerId);
          if (ev.type === 'work_lost') {
            requests.clear();
            tools.clear();
            agents.clear();
          }
          for (const e of effectsOf(s.result)) {
            if (e.type === 'request_llm') requests.add(e.requestId);
            if (e.type === 'abort_llm') requests.delete(e.requestId);
            if (e.type === 'execute_tool') tools.add(e.toolUseId);
            if (e.type === 'kill_tool') tools.delete(e.toolUseId);
            if (e.type === 'spawn_sub_agent') agents.add(e.agentId);
            if (e.type === 'stop_sub_agent') agents.delete(e.agentId);
            if (e.type === 'schedule_timer') timers.add(e.timerId);
            if (e.type === 'cancel_timer') timers.delete(e.timerId);
          }
          const p = s.after.phase;
          const stuck = (what: string) => fail(r, `step ${s.index}: ${p.kind} waits for ${what}, which is not outstanding`);
          switch (p.kind) {
            case 'llm_requesting':
            case 'awaiting_continuation':
              if (p.retry ? !timers.has(p.retry.timerId) : !requests.has(p.requestId))
                stuck(p.retry ? `timer ${p.retry.timerId}` : `request ${p.requestId}`);
              break;
            case 'tool_executing':
              if (!tools.has(p.current.id)) stuck(`tool ${p.current.id}`);
              break;
            case 'awaiting_sub_agents':
              if (!timers.has(p.timerId)) stuck(`timer ${p.timerId}`);
              for (const id of p.pending) if (!agents.has(id)) stuck(`sub-agent ${id}`);
              break;
            case 'cancelling':
              // The acknowledgement may be lost; the timer must not be (docs/design.md resolution 2).
              if (!timers.has(p.timerId)) stuck(`timer ${p.timerId}`);
              break;
            default:
              break;
          }
        }
      }),
      opts,
    );
  });

  it('the driver reaches every phase and the rare situations the properties rely on (seeded, guards against vacuity)', () => {
    const seen = new Set<PhaseKind>();
    const count = {
      exhaustedChains: 0,
      cappedContinuations: 0,
      subAgentTimeouts: 0,
      invalidSpawns: 0,
      spawnsFromUnrestricted: 0,
      upgrades: 0,
      unrestrictedParentRequests: 0,
    };
    const samples = fc.sample(scenarioArb({ maxLength: 50 }), { numRuns: RUNS, seed: 42 });
    for (const sc of samples) {
      const r = run(sc);
      for (const state of statesOf(r)) seen.add(state.phase.kind);
      for (const s of r.steps) {
        const ev = s.event;
        const bp = s.before.phase;
        const effects = effectsOf(s.result);
        const inFlight = (bp.kind === 'llm_requesting' || bp.kind === 'awaiting_continuation') && bp.retry === null;
        if (
          ev.type === 'llm_error' &&
          ev.retryable &&
          inFlight &&
          bp.requestId === ev.requestId &&
          bp.attempt === sc.ctx.policy.maxLlmAttempts
        )
          count.exhaustedChains++;
        if (
          ev.type === 'llm_response' &&
          bp.kind === 'llm_requesting' &&
          bp.retry === null &&
          bp.requestId === ev.requestId &&
          (ev.stopReason === 'max_tokens' || ev.stopReason === 'pause_turn') &&
          bp.autoContinuations >= sc.ctx.policy.maxAutoContinuations &&
          !ev.content.some((b) => b.type === 'tool_use')
        )
          count.cappedContinuations++;
        if (ev.type === 'timer_fired' && bp.kind === 'awaiting_sub_agents' && bp.timerId === ev.timerId) count.subAgentTimeouts++;
        if (effects.some((e) => e.type === 'spawn_sub_agent') && s.before.mode === 'unrestricted') count.spawnsFromUnrestricted++;
        if (s.before.mode === 'restricted' && s.after.mode === 'unrestricted') count.upgrades++;
        if (bp.kind === 'llm_requesting' && s.before.mode === 'unrestricted' && sc.ctx.sandboxAvailable && !sc.ctx.isSubAgent)
          count.unrestrictedParentRequests++;
        for (const m of persisted(effects)) {
          for (const b of m.content) {
            if (m.type === 'agent' && b.type === 'tool_use' && b.name === 'spawn_agents' && !sc.ctx.isSubAgent) {
              const tasks = b.input.tasks;
              if (!Array.isArray(tasks) || tasks.length === 0) count.invalidSpawns++;
            }
          }
        }
      }
    }
    const all: PhaseKind[] = [
      'idle',
      'llm_requesting',
      'tool_executing',
      'cancelling',
      'awaiting_sub_agents',
      'awaiting_mode_approval',
      'awaiting_continuation',
      'context_exhausted',
      'error',
      'completed',
      'failed',
    ];
    expect([...seen].sort()).toEqual([...all].sort());
    for (const [what, n] of Object.entries(count)) expect([what, n > 0]).toEqual([what, true]);
  });
});
