/**
 * Property tests of the state machine (see properties.test.ts): the mode invariants of spec 002, as
 * resolved by docs/design.md.
 */
import { describe, it, expect } from '@jest/globals';
import fc from 'fast-check';
import { toolSetFor, PATCH_RESTRICTED_ERROR } from '@bedrock/contracts/tools';
import { transition, initialState, MODE_NOTICE_RESTRICTED } from './index.ts';
import type { PhaseKind } from './index.ts';
import { shapeWith } from '../../test/core-support/arbitraries.ts';
import { scenarioArb } from '../../test/core-support/scenario-runs.ts';
import { probeEvents } from '../../test/core-support/event-driver.ts';
import { RUNS, opts, run, effectsOf, persisted, statesOf, bare, fail, toolResults } from '../../test/core-support/property-helpers.ts';

const TERMINAL: readonly PhaseKind[] = ['context_exhausted', 'completed', 'failed'];

describe('conversation state machine properties', () => {
  describe('mode invariants (spec 002, as resolved by docs/design.md)', () => {
    it('(1) once awaiting_mode_approval, only approve, deny (or cancel, or an interrupting message) leave it', () => {
      let checked = 0;
      fc.assert(
        fc.property(scenarioArb({ shape: shapeWith({ sandboxAvailable: true }) }), (sc) => {
          const r = run(sc);
          for (const state of statesOf(r).map(bare)) {
            const phase = state.phase;
            if (phase.kind !== 'awaiting_mode_approval') continue;
            for (const event of [...probeEvents(state, sc.ctx), ...r.steps.map((s) => s.event)]) {
              checked++;
              const result = transition(state, sc.ctx, event);
              if (!result.ok) continue;
              // A message delivered with `interrupt` cancels first, as user_cancel.
              const interrupts = event.type === 'user_message' && event.delivery === 'interrupt';
              const leaves = interrupts || ['user_approve_upgrade', 'user_deny_upgrade', 'user_cancel'].includes(event.type);
              if (!leaves) {
                if (JSON.stringify(result.state.phase) !== JSON.stringify(state.phase)) {
                  fail(r, `awaiting_mode_approval + ${event.type} -> ${result.state.phase.kind}`);
                }
                expect(result.state.mode).toBe(state.mode);
              } else {
                // It may wait again, but only for the next request_mode_upgrade call of the response.
                const next = result.state.phase;
                if (next.kind === 'awaiting_mode_approval' && next.toolUseId === phase.toolUseId) {
                  fail(r, `awaiting_mode_approval + ${event.type} still waits for ${next.toolUseId}`);
                }
                expect(result.state.mode).toBe(event.type === 'user_approve_upgrade' ? 'unrestricted' : state.mode);
                if (interrupts && toolResults(persisted(result.effects))[0]?.toolUseId !== phase.toolUseId)
                  fail(r, 'an interrupting message left the upgrade request unanswered');
              }
            }
          }
        }),
        opts,
      );
      expect(checked).toBeGreaterThan(30);
    });

    it('(2) sub-agents are restricted whenever the sandbox is available and are never offered request_mode_upgrade or spawn_agents', () => {
      let subAgentRequests = 0;
      let spawnsFromUnrestricted = 0;
      fc.assert(
        fc.property(scenarioArb(), (sc) => {
          const r = run(sc);
          const ctx = sc.ctx;
          const expectedMode = ctx.sandboxAvailable ? 'restricted' : 'unrestricted';
          if (ctx.isSubAgent) {
            for (const state of statesOf(r)) {
              if (state.mode !== expectedMode) fail(r, `sub-agent mode ${state.mode}, expected ${expectedMode}`);
            }
          }
          for (const s of r.steps) {
            for (const e of effectsOf(s.result)) {
              if (e.type === 'request_llm' && ctx.isSubAgent) {
                subAgentRequests++;
                expect(e.toolNames).not.toContain('request_mode_upgrade');
                expect(e.toolNames).not.toContain('spawn_agents');
                expect(e.toolNames).toEqual(
                  e.purpose === 'turn' ? toolSetFor({ isSubAgent: true, sandboxAvailable: ctx.sandboxAvailable }) : [],
                );
              }
              if (e.type === 'spawn_sub_agent') {
                if (s.before.mode === 'unrestricted') spawnsFromUnrestricted++;
                if (e.mode !== expectedMode)
                  fail(r, `step ${s.index}: spawn_sub_agent mode ${e.mode} (parent ${s.before.mode}), expected ${expectedMode}`);
              }
            }
          }
        }),
        opts,
      );
      expect(subAgentRequests).toBeGreaterThan(RUNS / 4);
      void spawnsFromUnrestricted; // rare: covered by the seeded coverage test in properties.test.ts
    });

    it('(3) in restricted mode patch always gets the REQ-PATCH-009 error and never an execute_tool', () => {
      let refused = 0;
      fc.assert(
        fc.property(scenarioArb({ shape: shapeWith({ sandboxAvailable: true }) }), (sc) => {
          const r = run(sc);
          const patchCalls = new Set<string>();
          const executed = new Set<string>();
          for (const s of r.steps) {
            const effects = effectsOf(s.result);
            for (const m of persisted(effects)) {
              for (const b of m.content) if (m.type === 'agent' && b.type === 'tool_use' && b.name === 'patch') patchCalls.add(b.id);
            }
            for (const e of effects) {
              if (e.type !== 'execute_tool') continue;
              expect(e.mode).toBe(s.after.mode);
              executed.add(e.toolUseId);
              if (e.name === 'patch' && (e.mode === 'restricted' || s.after.mode === 'restricted')) {
                fail(r, `step ${s.index}: patch ${e.toolUseId} executed in restricted mode`);
              }
            }
            for (const result of toolResults(persisted(effects))) {
              if (!patchCalls.has(result.toolUseId) || executed.has(result.toolUseId) || result.cancelled) continue;
              // A patch answered in the transition that made it current: refused or synthetic.
              if (s.after.mode === 'restricted') {
                refused++;
                expect(result.content).toBe(PATCH_RESTRICTED_ERROR);
                expect(result.isError).toBe(true);
              }
            }
          }
        }),
        opts,
      );
      expect(refused).toBeGreaterThan(8);
    });

    it('(4) downgrade from idle (parent, unrestricted) always succeeds at once', () => {
      let checked = 0;
      fc.assert(
        fc.property(scenarioArb({ shape: shapeWith({ isSubAgent: false, sandboxAvailable: true }) }), (sc) => {
          const r = run(sc);
          for (const state of statesOf(r)) {
            if (state.phase.kind !== 'idle' || state.mode !== 'unrestricted') continue;
            checked++;
            const result = transition(state, sc.ctx, { type: 'user_request_downgrade' });
            if (!result.ok) return fail(r, `downgrade from idle rejected: ${result.rejection.code}`);
            expect(result.state.mode).toBe('restricted');
            expect(result.state.phase).toEqual(state.phase);
            const notices = persisted(result.effects).filter((m) => m.type === 'system');
            expect(notices).toHaveLength(1);
            expect(JSON.stringify(notices[0]!.content)).toContain(JSON.stringify(MODE_NOTICE_RESTRICTED).slice(1, -1));
            expect(result.effects.some((e) => e.type === 'notify' && e.notification.kind === 'mode_changed')).toBe(true);
          }
          return true;
        }),
        opts,
      );
      expect(checked).toBeGreaterThan(3);
    });

    it('(4b) downgrade in any non-terminal parent phase keeps the phase and restricts at once', () => {
      let checked = 0;
      fc.assert(
        fc.property(scenarioArb({ shape: shapeWith({ isSubAgent: false, sandboxAvailable: true }) }), (sc) => {
          const r = run(sc);
          for (const state of statesOf(r)) {
            if (TERMINAL.includes(state.phase.kind)) continue;
            const result = transition(state, sc.ctx, { type: 'user_request_downgrade' });
            if (state.mode === 'restricted') {
              expect(result.ok ? null : result.rejection.code).toBe('already_restricted');
              continue;
            }
            checked++;
            if (!result.ok) return fail(r, `downgrade in ${state.phase.kind} rejected: ${result.rejection.code}`);
            expect(result.state.mode).toBe('restricted');
            expect(result.state.phase).toEqual(state.phase);
          }
          return true;
        }),
        opts,
      );
      expect(checked).toBeGreaterThan(3);
    });

    it('(5) no event sequence reaches unrestricted from restricted without user_approve_upgrade', () => {
      let upgrades = 0;
      fc.assert(
        fc.property(scenarioArb({ shape: shapeWith({ sandboxAvailable: true }) }), (sc) => {
          const r = run(sc);
          for (const s of r.steps) {
            if (s.before.mode === 'restricted' && s.after.mode === 'unrestricted') {
              upgrades++;
              if (s.event.type !== 'user_approve_upgrade' || s.before.phase.kind !== 'awaiting_mode_approval') {
                fail(r, `step ${s.index}: ${s.event.type} in ${s.before.phase.kind} upgraded the mode`);
              }
            }
          }
          // And probing every reached restricted state with every event.
          for (const state of statesOf(r)) {
            if (state.mode !== 'restricted') continue;
            for (const event of probeEvents(state, sc.ctx)) {
              const result = transition(state, sc.ctx, event);
              if (
                result.ok &&
                result.state.mode === 'unrestricted' &&
                (event.type !== 'user_approve_upgrade' || state.phase.kind !== 'awaiting_mode_approval')
              ) {
                fail(r, `${event.type} in ${state.phase.kind} upgraded the mode`);
              }
            }
          }
        }),
        opts,
      );
      void upgrades; // rare: covered by the seeded coverage test in properties.test.ts
    });

    it('(6) without the sandbox the mode is always unrestricted and a downgrade is refused as sandbox_unavailable', () => {
      let downgrades = 0;
      fc.assert(
        fc.property(scenarioArb({ shape: shapeWith({ sandboxAvailable: false }) }), (sc) => {
          const r = run(sc);
          expect(initialState(sc.ctx).mode).toBe('unrestricted');
          for (const state of statesOf(r)) {
            if (state.mode !== 'unrestricted') fail(r, `mode ${state.mode} without sandbox`);
            if (!sc.ctx.isSubAgent && !TERMINAL.includes(state.phase.kind)) {
              downgrades++;
              const result = transition(state, sc.ctx, { type: 'user_request_downgrade' });
              expect(result.ok ? 'accepted' : result.rejection.code).toBe('sandbox_unavailable');
            }
          }
          for (const s of r.steps) {
            for (const e of effectsOf(s.result)) {
              if (e.type === 'execute_tool' || e.type === 'spawn_sub_agent') expect(e.mode).toBe('unrestricted');
              if (e.type === 'request_llm') expect(e.toolNames).not.toContain('request_mode_upgrade');
            }
          }
        }),
        opts,
      );
      expect(downgrades).toBeGreaterThan(50);
    });
  });
});
