/**
 * Property tests of the state machine (see properties.test.ts): delivery modes of messages sent to a
 * busy agent (docs/state-machine.md, "Delivery modes").
 */
import { describe, it, expect } from '@jest/globals';
import fc from 'fast-check';
import { transition, buildLlmHistory, checkToolChain } from './index.ts';
import type { NewMessage } from './index.ts';
import { shapeWith } from '../../test/core-support/arbitraries.ts';
import { scenarioArb } from '../../test/core-support/scenario-runs.ts';
import { opts, run, effectsOf, persisted, statesOf, fail } from '../../test/core-support/property-helpers.ts';

describe('conversation state machine properties', () => {
  describe('delivery modes (docs/state-machine.md, "Delivery modes")', () => {
    it('waiting messages are never lost, duplicated or reordered; nothing waits at rest; a cancel keeps them', () => {
      let waited = 0;
      let cancelsWithQueue = 0;
      fc.assert(
        fc.property(scenarioArb({ maxLength: 50, shape: shapeWith({ isSubAgent: false }) }), (sc) => {
          const r = run(sc);
          const everWaited = new Map<string, { text: string; delivery: string }>();
          const delivered: string[] = [];
          const withdrawn = new Set<string>();
          for (const s of r.steps) {
            if (!s.result.ok || s.after === s.before) continue;
            const ev = s.event;
            const beforeWaiting = [...(s.before.pending ?? [])];
            // An interrupt that cancelled at once waits for no time: it is sent in the same transition.
            if (ev.type === 'user_message' && ev.delivery && ev.delivery !== 'reject' && !['idle', 'error'].includes(s.before.phase.kind)) {
              beforeWaiting.push({
                id: `${sc.ctx.conversationId}/q/${s.after.seq}`,
                delivery: ev.delivery,
                text: ev.text,
                images: ev.images,
              });
            }
            for (const m of beforeWaiting) everWaited.set(m.id, { text: m.text, delivery: m.delivery });
            if (ev.type === 'user_cancel_queued') withdrawn.add(ev.queuedId);
            const after = new Set((s.after.pending ?? []).map((m) => m.id));
            // What left the list without being withdrawn was sent by this transition, in this order.
            const gone = beforeWaiting.filter((m) => !after.has(m.id) && !(ev.type === 'user_cancel_queued' && ev.queuedId === m.id));
            const sentTexts = persisted(effectsOf(s.result))
              .filter((m) => m.type === 'user')
              .map((m) => m.content.flatMap((b) => (b.type === 'text' ? [b.text] : [])).join(''));
            const sentNow = ev.type === 'user_message' && ['idle', 'error'].includes(s.before.phase.kind) ? 1 : 0;
            if (JSON.stringify(sentTexts.slice(sentNow)) !== JSON.stringify(gone.map((m) => (m.text.trim() === '' ? '' : m.text))))
              fail(r, `step ${s.index}: sent [${sentTexts.join(' | ')}] but [${gone.map((m) => m.text).join(' | ')}] left the list`);
            delivered.push(...gone.map((m) => m.id));
            const kind = s.after.phase.kind;
            if ((kind === 'idle' || kind === 'error') && (s.after.pending?.length ?? 0) > 0)
              fail(r, `step ${s.index}: ${kind} with messages waiting`);
          }
          const last = r.steps.length > 0 ? r.steps[r.steps.length - 1]!.after : r.initial;
          const still = new Set((last.pending ?? []).map((m) => m.id));
          for (const id of everWaited.keys()) {
            waited++;
            const n = delivered.filter((x) => x === id).length + (still.has(id) ? 1 : 0) + (withdrawn.has(id) ? 1 : 0);
            if (n !== 1) fail(r, `waiting message ${id} accounted for ${n} times`);
          }
          const seq = (id: string) => Number(id.slice(id.lastIndexOf('/') + 1));
          const queued = delivered.filter((id) => everWaited.get(id)!.delivery === 'queue').map(seq);
          if (queued.some((n, i) => i > 0 && n < queued[i - 1]!))
            fail(r, `queued messages delivered out of order: ${delivered.join(', ')}`);
          // A cancel keeps what waits: each waiting message is still waiting or is sent by it.
          for (const state of statesOf(r)) {
            if (!state.pending || state.phase.kind === 'context_exhausted') continue;
            const res = transition(state, sc.ctx, { type: 'user_cancel' });
            if (!res.ok || res.state === state) continue;
            cancelsWithQueue++;
            const sent = persisted(res.effects).filter((m) => m.type === 'user').length;
            const kept = res.state.pending?.length ?? 0;
            if (sent + kept !== state.pending.length)
              fail(r, `a cancel with ${state.pending.length} waiting kept ${kept} and sent ${sent}`);
          }
        }),
        opts,
      );
      expect(waited).toBeGreaterThan(50);
      expect(cancelsWithQueue).toBeGreaterThan(5);
    });

    it('every request after a steering message is a valid Messages API history, the message after the tool results it joins', () => {
      let steeredAtBoundary = 0;
      fc.assert(
        fc.property(scenarioArb({ maxLength: 50, shape: shapeWith({ isSubAgent: false }) }), (sc) => {
          const r = run(sc);
          const messages: NewMessage[] = [];
          let steered = false;
          for (const s of r.steps) {
            const effects = effectsOf(s.result);
            messages.push(...persisted(effects));
            const ev = s.event;
            if (ev.type === 'user_message' && ev.delivery === 'steer' && s.result.ok && s.after !== s.before) steered = true;
            if (!steered || !effects.some((e) => e.type === 'request_llm')) continue;
            const turns = buildLlmHistory(messages);
            const problems = checkToolChain(turns);
            for (const [i, turn] of turns.entries()) {
              if (turn.content.length === 0) problems.push(`turn ${i} is empty`);
              for (const b of turn.content)
                if (b.type === 'text' && b.text.trim() === '') problems.push(`turn ${i} has a blank text block`);
              const firstOther = turn.content.findIndex((b) => b.type !== 'tool_result');
              if (firstOther >= 0 && turn.content.slice(firstOther).some((b) => b.type === 'tool_result'))
                problems.push(`turn ${i}: a tool_result after other blocks`);
            }
            if (problems.length > 0) fail(r, `step ${s.index}: ${problems.join('; ')}`);
            // A steering message delivered at a tool boundary: after the results, in the same user turn.
            const kinds = persisted(effects).map((m) => m.type);
            if (kinds.includes('tool') && kinds.at(-1) === 'user' && s.before.phase.kind !== 'idle') {
              const lastTurn = turns.at(-1)!;
              if (lastTurn.content.some((b) => b.type === 'tool_result')) {
                steeredAtBoundary++;
                expect(lastTurn.content.at(-1)?.type).toMatch(/text|image/);
              }
            }
          }
        }),
        opts,
      );
      expect(steeredAtBoundary).toBeGreaterThan(5);
    });
  });
});
