/**
 * Property tests of the state machine (see properties.test.ts): the LLM side — a valid tool chain at
 * every request, retries and backoff, the context thresholds, usage and automatic continuation.
 */
import { describe, it, expect } from '@jest/globals';
import fc from 'fast-check';
import { toolSetFor } from '@bedrock/contracts/tools';
import {
  buildLlmHistory,
  checkToolChain,
  contextTokens,
  addUsage,
  CONTINUATION_FALLBACK_SUMMARY,
  CONTINUATION_THRESHOLD,
  WARNING_THRESHOLD,
  MAX_TOKENS_NOTICE,
  PAUSE_TURN_NOTICE,
  cutToolNotice,
  refusalMessage,
} from './index.ts';
import type { NewMessage } from './index.ts';
import { scenarioArb } from '../../test/core-support/scenario-runs.ts';
import { RUNS, opts, run, effectsOf, persisted, stepsWithoutWaiting, fail } from '../../test/core-support/property-helpers.ts';

/**
 * Direct check of the chain: walking the persisted messages, every tool_use of an agent message
 * is answered by exactly one tool_result, in request order, before the next agent message.
 */
function directChainProblems(messages: readonly NewMessage[]): string[] {
  const problems: string[] = [];
  const asked = new Set<string>();
  let queue: string[] = [];
  messages.forEach((m, i) => {
    if (m.type === 'agent') {
      if (queue.length > 0) problems.push(`message ${i}: agent message while [${queue.join(', ')}] are unanswered`);
      queue = [];
      // A refused response's calls never run: its turn is left out of every later request.
      if (m.stopReason === 'refusal') return;
      for (const b of m.content) {
        if (b.type !== 'tool_use') continue;
        if (asked.has(b.id)) problems.push(`message ${i}: tool_use ${b.id} asked twice`);
        asked.add(b.id);
        queue.push(b.id);
      }
    } else if (m.type === 'tool') {
      for (const b of m.content) {
        if (b.type !== 'tool_result') continue;
        const expected = queue.shift();
        if (expected !== b.toolUseId) problems.push(`message ${i}: tool_result for ${b.toolUseId}, expected ${expected ?? 'none'}`);
      }
    }
  });
  if (queue.length > 0) problems.push(`unanswered tool_use: [${queue.join(', ')}]`);
  return problems;
}

describe('conversation state machine properties', () => {
  it('keeps the persisted tool_use/tool_result chain valid at every request_llm', () => {
    let requests = 0;
    fc.assert(
      fc.property(scenarioArb({ maxLength: 50 }), (sc) => {
        const r = run(sc);
        const messages: NewMessage[] = [];
        for (const s of r.steps) {
          // In effect order: a request_llm must already be valid with the messages persisted before it
          // (stricter than needed: the shell commits the whole transition before dispatching).
          for (const e of effectsOf(s.result)) {
            if (e.type === 'persist_message') messages.push(e.message);
            if (e.type !== 'request_llm') continue;
            requests++;
            const problems = checkToolChain(buildLlmHistory(messages));
            if (problems.length > 0) fail(r, `step ${s.index}: checkToolChain: ${problems.join('; ')}`);
            const direct = directChainProblems(messages);
            if (direct.length > 0) fail(r, `step ${s.index}: ${direct.join('; ')}`);
          }
        }
      }),
      opts,
    );
    expect(requests).toBeGreaterThan(RUNS);
  });

  it('retries at most maxLlmAttempts per request chain, with exponential, capped backoff that honours retry-after (REQ-BED-006)', () => {
    let retries = 0;
    let exhausted = 0;
    fc.assert(
      fc.property(scenarioArb({ maxLength: 50 }), (sc) => {
        const r = run(sc);
        const policy = sc.ctx.policy;
        const max = policy.maxLlmAttempts;
        let lastAttempt = 0;
        let lastDelay: { delay: number; retryAfter: number } | null = null;
        for (const s of stepsWithoutWaiting(r)) {
          const after = s.after.phase;
          if ((after.kind === 'llm_requesting' || after.kind === 'awaiting_continuation') && after.attempt > max) {
            fail(r, `step ${s.index}: attempt ${after.attempt} > ${max}`);
          }
          for (const e of effectsOf(s.result)) {
            if (e.type === 'request_llm') {
              if (e.attempt > max) fail(r, `step ${s.index}: request_llm attempt ${e.attempt} > ${max}`);
              if (e.attempt !== 1 && e.attempt !== lastAttempt + 1) {
                fail(r, `step ${s.index}: request_llm attempt ${e.attempt} follows attempt ${lastAttempt}`);
              }
              if (e.attempt === 1) lastDelay = null;
              lastAttempt = e.attempt;
            }
            if (e.type === 'schedule_timer' && e.purpose === 'retry') {
              retries++;
              const ev = s.event;
              const before = s.before.phase;
              if (ev.type !== 'llm_error' || !ev.retryable) return fail(r, `step ${s.index}: retry timer without a retryable error`);
              if (before.kind !== 'llm_requesting' && before.kind !== 'awaiting_continuation')
                return fail(r, `step ${s.index}: retry from ${before.kind}`);
              const n = before.attempt;
              if (n >= max) fail(r, `step ${s.index}: retry scheduled after attempt ${n} of ${max}`);
              if (after.kind !== before.kind || after.attempt !== n + 1)
                fail(r, `step ${s.index}: retry does not move to attempt ${n + 1}`);
              const expected = Math.min(policy.retryMaxDelayMs, Math.max(policy.retryBaseDelayMs * 2 ** (n - 1), ev.retryAfterMs));
              expect(e.delayMs).toBe(expected);
              expect(e.delayMs).toBeGreaterThanOrEqual(Math.min(ev.retryAfterMs, policy.retryMaxDelayMs));
              if (lastDelay && lastDelay.retryAfter === 0 && ev.retryAfterMs === 0 && e.delayMs < policy.retryMaxDelayMs) {
                expect(e.delayMs).toBeGreaterThanOrEqual(2 * lastDelay.delay);
              }
              lastDelay = { delay: e.delayMs, retryAfter: ev.retryAfterMs };
              // The client is told which attempt runs next, of how many, and when.
              const told = effectsOf(s.result).flatMap((x) =>
                x.type === 'notify' && x.notification.kind === 'retry_scheduled' ? [x.notification] : [],
              );
              expect(told).toEqual([expect.objectContaining({ attempt: n + 1, maxAttempts: max, delayMs: e.delayMs })]);
            }
          }
          // A retryable error on the last attempt ends the chain.
          const before = s.before.phase;
          const ev = s.event;
          if (
            ev.type === 'llm_error' &&
            ev.retryable &&
            !ev.aborted &&
            (before.kind === 'llm_requesting' || before.kind === 'awaiting_continuation') &&
            before.retry === null &&
            before.requestId === ev.requestId &&
            before.attempt === max
          ) {
            exhausted++;
            if (before.kind === 'awaiting_continuation') {
              expect(after.kind).toBe('context_exhausted');
              if (after.kind === 'context_exhausted') expect(after.summary).toBe(CONTINUATION_FALLBACK_SUMMARY);
            } else if (sc.ctx.isSubAgent) {
              expect(after.kind).toBe('failed');
            } else {
              expect(after.kind).toBe('error');
              if (after.kind === 'error') expect(after.message.startsWith(`Failed after ${max} attempts`)).toBe(true);
            }
          }
        }
        return true;
      }),
      opts,
    );
    expect(retries).toBeGreaterThan(50);
    void exhausted; // rare: covered by the seeded coverage test in properties.test.ts
  });

  it('a response at >= 90% of the window runs no tool (REQ-BED-019/024), and the 80% warning is given once, on the first response at >= 80% (REQ-BED-023)', () => {
    let triggered = 0;
    fc.assert(
      fc.property(scenarioArb({ maxLength: 50 }), (sc) => {
        const r = run(sc);
        let warnings = 0;
        for (const s of stepsWithoutWaiting(r)) {
          const effects = effectsOf(s.result);
          warnings += effects.filter((e) => e.type === 'notify' && e.notification.kind === 'context_warning').length;
          const ev = s.event;
          const bp = s.before.phase;
          if (ev.type !== 'llm_response' || bp.kind !== 'llm_requesting' || bp.retry !== null || bp.requestId !== ev.requestId) continue;
          const over =
            contextTokens(ev.usage) >= CONTINUATION_THRESHOLD * sc.ctx.contextWindow || ev.stopReason === 'model_context_window_exceeded';
          // A refusal is its own outcome, whatever the usage: nothing runs, no summary.
          if (ev.stopReason === 'refusal') {
            if (effects.some((e) => e.type === 'execute_tool' || e.type === 'spawn_sub_agent' || e.type === 'request_llm'))
              fail(r, `step ${s.index}: a refusal started work`);
            const due = !s.before.contextWarned && contextTokens(ev.usage) >= WARNING_THRESHOLD * sc.ctx.contextWindow;
            expect(s.after.contextWarned).toBe(s.before.contextWarned || due);
            continue;
          }
          if (!over) {
            // REQ-BED-023: the warning is given on the first response at >= 80%, and only then.
            const due = !s.before.contextWarned && contextTokens(ev.usage) >= WARNING_THRESHOLD * sc.ctx.contextWindow;
            const given = effects.filter((e) => e.type === 'notify' && e.notification.kind === 'context_warning').length;
            if (given !== (due ? 1 : 0)) fail(r, `step ${s.index}: ${given} context warnings, expected ${due ? 1 : 0}`);
            expect(s.after.contextWarned).toBe(s.before.contextWarned || due);
            continue;
          }
          triggered++;
          if (effects.some((e) => e.type === 'execute_tool' || e.type === 'spawn_sub_agent'))
            fail(r, `step ${s.index}: a tool ran at the threshold`);
          if (sc.ctx.isSubAgent) {
            expect(s.after.phase.kind).toBe('failed');
            if (s.after.phase.kind === 'failed') expect(s.after.phase.errorKind).toBe('context_exhausted');
            expect(effects.some((e) => e.type === 'notify_parent' && !e.outcome.success)).toBe(true);
          } else {
            expect(s.after.phase.kind).toBe('awaiting_continuation');
            const req = effects.filter((e) => e.type === 'request_llm');
            expect(req).toHaveLength(1);
            if (req[0]?.type === 'request_llm') {
              expect(req[0].purpose).toBe('continuation');
              // Defined (the history's tool_use blocks need them); the gateway forbids their use.
              expect(req[0].toolNames).toEqual(toolSetFor(sc.ctx));
              expect(req[0].maxTokens).toBe(0);
              const asked = ev.content.flatMap((b) => (b.type === 'tool_use' ? [b.id] : []));
              expect(req[0].rejectedToolCalls.map((c) => c.id)).toEqual(asked);
            }
          }
        }
        if (warnings > 1) fail(r, `${warnings} context warnings`);
      }),
      opts,
    );
    expect(triggered).toBeGreaterThan(8);
  });

  it('tracks usage (REQ-BED-012) and continues a cut response at most maxAutoContinuations times (REQ-BED-003): a cut tool call is asked again at the output limit, else told; a refusal ends the turn', () => {
    let continued = 0;
    let raised = 0;
    let toldCut = 0;
    let refused = 0;
    fc.assert(
      fc.property(scenarioArb({ maxLength: 50 }), (sc) => {
        const r = run(sc);
        const ctx = sc.ctx;
        let auto = 0;
        for (const s of stepsWithoutWaiting(r)) {
          const ev = s.event;
          const bp = s.before.phase;
          const effects = effectsOf(s.result);
          const requests = effects.flatMap((e) => (e.type === 'request_llm' ? [e] : []));
          const messages = persisted(effects);
          const matching =
            ev.type === 'llm_response' &&
            (bp.kind === 'llm_requesting' || bp.kind === 'awaiting_continuation') &&
            bp.retry === null &&
            bp.requestId === ev.requestId;
          if (!matching || ev.type !== 'llm_response') {
            if (requests.some((e) => e.attempt === 1)) auto = 0;
            // A retry asks for what the failed attempt asked for.
            for (const req of requests) if (bp.kind === 'llm_requesting' && req.attempt > 1) expect(req.maxTokens).toBe(bp.maxTokens);
            continue;
          }
          if (bp.kind === 'awaiting_continuation') {
            const a = s.after.phase;
            expect(a.kind).toBe('context_exhausted');
            if (a.kind === 'context_exhausted') {
              expect(a.finalUsage).toEqual(addUsage(bp.triggerUsage, ev.usage));
              // The summary is the response's text, or the fallback when it has none.
              const text = ev.content.flatMap((b) => (b.type === 'text' ? [b.text] : [])).join('');
              expect(a.summary.trim()).toBe(text.trim() === '' ? CONTINUATION_FALLBACK_SUMMARY : text.trim());
            }
            continue;
          }
          if (bp.kind !== 'llm_requesting') continue;
          expect(s.after.lastUsage).toEqual(ev.usage);
          expect(s.after.totalUsage).toEqual(addUsage(s.before.totalUsage, ev.usage));
          expect(s.after.totalUsage.thinkingTokens).toBe((s.before.totalUsage.thinkingTokens ?? 0) + (ev.usage.thinkingTokens ?? 0));
          expect(s.after.totalUsage.webSearchRequests).toBe(
            (s.before.totalUsage.webSearchRequests ?? 0) + (ev.usage.webSearchRequests ?? 0),
          );
          const agent = messages.filter((m) => m.type === 'agent');
          const notices = messages
            .filter((m) => m.type === 'system')
            .map((m) => m.content.map((b) => (b.type === 'text' ? b.text : '')).join(''));

          if (ev.stopReason === 'refusal') {
            refused++;
            // Recorded as refused, with the words the user sees; nothing runs, nothing is asked.
            expect(agent).toHaveLength(1);
            expect(agent[0]!.stopReason).toBe('refusal');
            expect(agent[0]!.content).toEqual(ev.content);
            const errors = messages.filter((m) => m.type === 'error');
            expect(errors.map((m) => m.content)).toEqual([[{ type: 'text', text: refusalMessage(ev.stopExplanation ?? '') }]]);
            expect(requests).toEqual([]);
            if (ctx.isSubAgent) {
              expect(s.after.phase).toMatchObject({ kind: 'failed', errorKind: 'refused' });
            } else {
              expect(s.after.phase.kind).toBe('idle');
            }
            auto = 0;
            continue;
          }
          // Every other persisted response carries its stop reason and its blocks as they came.
          for (const m of agent) {
            expect(m.stopReason).toBe(ev.stopReason);
            expect(m.content).toEqual(ev.content);
          }
          const calls = ev.content.filter((b) => b.type === 'tool_use');
          const cut = ev.cutToolNames ?? [];
          const over =
            contextTokens(ev.usage) >= CONTINUATION_THRESHOLD * ctx.contextWindow || ev.stopReason === 'model_context_window_exceeded';
          const sent = Math.max(ev.maxTokens ?? 0, bp.maxTokens);
          if (over) {
            auto = 0;
            continue;
          }
          if (ev.stopReason === 'max_tokens' && cut.length > 0 && sent < ctx.maxOutputTokens && auto < ctx.policy.maxAutoContinuations) {
            raised++;
            auto++;
            if (messages.length > 0) fail(r, `step ${s.index}: a response with a cut tool call below the limit was persisted`);
            expect(requests).toHaveLength(1);
            expect(requests[0]).toMatchObject({ purpose: 'turn', attempt: 1, maxTokens: ctx.maxOutputTokens });
            continue;
          }
          if (cut.length > 0) {
            toldCut++;
            expect(notices).toEqual([cutToolNotice(cut, sent)]);
            for (const name of cut) expect(notices[0]).toContain(name);
          }
          if (calls.length > 0) {
            auto = 0;
            continue;
          }
          const resumable = ev.stopReason === 'pause_turn' && ev.content.some((b) => b.type === 'server_tool');
          const cutText = ev.stopReason === 'max_tokens' || ev.stopReason === 'pause_turn';
          if ((cutText || cut.length > 0) && auto < ctx.policy.maxAutoContinuations) {
            continued++;
            auto++;
            if (requests.length !== 1) fail(r, `step ${s.index}: a cut response (${ev.stopReason}) was not continued`);
            expect(requests[0]).toMatchObject({ purpose: 'turn', attempt: 1, maxTokens: bp.maxTokens });
            expect(s.after.phase.kind).toBe('llm_requesting');
            // Continued from a user turn (a notice), except a paused turn, which is sent back as it is.
            if (cut.length === 0)
              expect(notices).toEqual(resumable ? [] : [ev.stopReason === 'max_tokens' ? MAX_TOKENS_NOTICE : PAUSE_TURN_NOTICE]);
            const last = buildLlmHistory(r.steps.slice(0, s.index + 1).flatMap((x) => persisted(effectsOf(x.result)))).at(-1);
            expect(last?.role).toBe(resumable && cut.length === 0 ? 'assistant' : 'user');
          } else {
            if (requests.length !== 0) fail(r, `step ${s.index}: ${ev.stopReason} response continued (${auto} continuations so far)`);
            if (cut.length === 0) expect(notices).toEqual([]);
            if (ctx.isSubAgent) {
              const a = s.after.phase;
              expect(a.kind).toBe('failed');
              if (a.kind === 'failed') expect(a.error.startsWith('Sub-agent ended its turn without calling submit_result')).toBe(true);
            } else {
              expect(s.after.phase.kind).toBe('idle');
            }
            auto = 0;
          }
        }
      }),
      opts,
    );
    expect(continued).toBeGreaterThan(20);
    expect(raised).toBeGreaterThan(5);
    expect(toldCut).toBeGreaterThan(5);
    expect(refused).toBeGreaterThan(5);
  });
});
