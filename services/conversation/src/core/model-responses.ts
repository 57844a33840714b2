/**
 * The model's answers: a response, an error (retried with backoff), and the timers that
 * retries, cancels and sub-agents wait on. Rows: docs/state-machine.md.
 */
import {
  CONTINUATION_FALLBACK_SUMMARY,
  CONTINUATION_THRESHOLD,
  MAX_TOKENS_NOTICE,
  NOT_EXECUTED_CONTEXT,
  PAUSE_TURN_NOTICE,
  WARNING_THRESHOLD,
  cutToolNotice,
  refusalMessage,
} from './constants.ts';
import { addUsage, contextTokens } from './usage.ts';
import type { Phase, ToolCall } from './types.ts';
import { NOOP, synthetic, textOf, type Copies, type Draft, type LlmErrorEvent, type LlmResponseEvent, type Outcome } from './draft.ts';
import { beginLlm, budgetSpent, exhaust, failSubAgent, requestContinuation, stopForBudget, toolNames } from './turn.ts';
import { onCancelledAnswer } from './cancel.ts';
import { finishSubAgents, runTools } from './tool-calls.ts';

type RequestPhase = Extract<Phase, { kind: 'llm_requesting' | 'awaiting_continuation' }>;
// Written-out copies of these phases below (see `Copies` in draft.ts).
const _llmRequestingCopied: Copies<
  Extract<Phase, { kind: 'llm_requesting' }>,
  'kind' | 'requestId' | 'attempt' | 'retry' | 'autoContinuations' | 'maxTokens'
> = true;
const _awaitingContinuationCopied: Copies<
  Extract<Phase, { kind: 'awaiting_continuation' }>,
  'kind' | 'requestId' | 'attempt' | 'retry' | 'rejectedToolCalls' | 'triggerUsage'
> = true;

function inFlight(phase: Phase, requestId: string): boolean {
  return (
    (phase.kind === 'llm_requesting' || phase.kind === 'awaiting_continuation') && phase.requestId === requestId && phase.retry === null
  );
}

export function onLlmResponse(d: Draft, event: LlmResponseEvent): Outcome {
  const phase = d.phase;
  if (phase.kind === 'cancelling') return onCancelledAnswer(d, phase, event);
  if (!inFlight(phase, event.requestId)) return NOOP;
  d.lastUsage = event.usage;
  d.totalUsage = addUsage(d.totalUsage, event.usage);
  // The gateway's notices are for the user: a notification each, no message (the model never
  // sees them).
  if (event.notices) for (const text of event.notices) if (text) d.notify({ kind: 'notice', text });

  if (phase.kind === 'awaiting_continuation') {
    const summary = textOf(event.content).trim() || CONTINUATION_FALLBACK_SUMMARY;
    exhaust(d, summary, addUsage(phase.triggerUsage, event.usage));
    return;
  }
  if (phase.kind !== 'llm_requesting') return NOOP;

  const used = contextTokens(event.usage);
  const window = d.ctx.contextWindow;
  const full = used >= window * CONTINUATION_THRESHOLD || event.stopReason === 'model_context_window_exceeded';

  if (event.stopReason === 'refusal') {
    // The model declined: its own outcome, not an answer. The history builder leaves the
    // refused turn out of later requests; the conversation takes a new message.
    const explanation = (event.stopExplanation ?? '').trim();
    d.persistAgent(event, explanation);
    warnOnce(d, used);
    const message = refusalMessage(explanation);
    d.persist('error', [{ type: 'text', text: message }]);
    if (d.ctx.isSubAgent) failSubAgent(d, message, 'refused');
    else d.phase = { kind: 'idle' };
    return;
  }

  // A plain loop, not flatMap: flatMap's per-block arrays were the largest single cost of a
  // state-changing transition in the profile (docs/state-machine.md, "Performance").
  const calls: ToolCall[] = [];
  for (const b of event.content) if (b.type === 'tool_use') calls.push({ id: b.id, name: b.name, input: b.input });
  const cutTools = event.cutToolNames ?? [];
  const canContinue = phase.autoContinuations < d.ctx.policy.maxAutoContinuations;
  // What the request asked for: the gateway reports it; older ones did not (0).
  const sent = Math.max(event.maxTokens ?? 0, phase.maxTokens ?? 0);

  if (event.stopReason === 'max_tokens' && cutTools.length > 0 && !full && sent < d.ctx.maxOutputTokens && canContinue) {
    // A tool call did not fit: ask again, at the model's output limit, and keep nothing of
    // this response (it would be written again).
    warnOnce(d, used);
    beginLlm(d, phase.autoContinuations + 1, d.ctx.maxOutputTokens);
    return;
  }

  if (event.content.length > 0) d.persistAgent(event);

  if (full) {
    // REQ-BED-019: no tool of this response runs; answer each so the chain stays valid.
    for (const call of calls) d.persistResult(synthetic(call.id, NOT_EXECUTED_CONTEXT));
    if (d.ctx.contextExhaustionBehavior === 'threshold_continuation') requestContinuation(d, calls, event.usage);
    else failSubAgent(d, 'Context window exhausted', 'context_exhausted');
    return;
  }
  warnOnce(d, used);
  if (cutTools.length > 0) {
    // Cut even at the limit: tell the model (after the results of the calls that did
    // complete, which run as usual), so it splits the work.
    d.notice(cutToolNotice(cutTools, sent));
    if (calls.length > 0) runTools(d, calls, [], calls.length);
    else if (canContinue) beginLlm(d, phase.autoContinuations + 1, phase.maxTokens ?? 0);
    else endTurn(d, event);
    return;
  }
  if (calls.length > 0) {
    runTools(d, calls, [], calls.length);
    return;
  }
  if ((event.stopReason === 'max_tokens' || event.stopReason === 'pause_turn') && canContinue) {
    // REQ-BED-003: end_turn = false — the model goes on. A turn paused with server-tool
    // blocks is resumed by sending it back as it is; any other cut is continued from a user
    // turn asking for the rest (current models take no assistant prefill).
    const resumable = event.stopReason === 'pause_turn' && event.content.some((b) => b.type === 'server_tool');
    if (!resumable) d.notice(event.stopReason === 'max_tokens' ? MAX_TOKENS_NOTICE : PAUSE_TURN_NOTICE);
    beginLlm(d, phase.autoContinuations + 1, phase.maxTokens ?? 0);
    return;
  }
  endTurn(d, event);
  return;
}

/**
 * REQ-BED-023: once, on the first response at >= 80% that does not start a continuation.
 * (A function, not a closure made on every response: that closure was a measurable cost.)
 */
function warnOnce(d: Draft, used: number): void {
  const window = d.ctx.contextWindow;
  if (d.contextWarned || used < window * WARNING_THRESHOLD) return;
  d.contextWarned = true;
  d.notify({ kind: 'context_warning', usedTokens: used, contextWindow: window });
}

/** The model ended its turn: a parent is idle; a sub-agent that did not submit a result failed. */
function endTurn(d: Draft, event: LlmResponseEvent): void {
  if (d.ctx.isSubAgent) {
    const said = textOf(event.content).trim();
    failSubAgent(d, `Sub-agent ended its turn without calling submit_result${said ? `: ${said}` : ''}`, 'unknown');
    return;
  }
  d.phase = { kind: 'idle' };
}

export function onLlmError(d: Draft, event: LlmErrorEvent): Outcome {
  const phase = d.phase;
  if (phase.kind === 'cancelling') return onCancelledAnswer(d, phase, event);
  if (!inFlight(phase, event.requestId)) return NOOP;
  if (phase.kind !== 'llm_requesting' && phase.kind !== 'awaiting_continuation') return NOOP;
  const max = d.ctx.policy.maxLlmAttempts;

  if (event.retryable && phase.attempt < max) {
    const delayMs = retryDelay(d, phase.attempt, event.retryAfterMs);
    const timerId = d.newTimerId();
    const requestId = d.newRequestId();
    d.emit({ type: 'schedule_timer', timerId, delayMs, purpose: 'retry' });
    d.notify({
      kind: 'retry_scheduled',
      attempt: phase.attempt + 1,
      maxAttempts: max,
      delayMs,
      errorKind: event.errorKind,
      message: event.message,
    });
    d.phase = withRequest(phase, requestId, phase.attempt + 1, { timerId, delayMs });
    return;
  }
  if (phase.kind === 'awaiting_continuation') {
    // REQ-BED-020: the user must not be blocked by a failed summary.
    exhaust(d, CONTINUATION_FALLBACK_SUMMARY, phase.triggerUsage);
    return;
  }
  const message = event.retryable ? `Failed after ${phase.attempt} attempts: ${event.message}` : event.message;
  d.persist('error', [{ type: 'text', text: message }]);
  d.notify({ kind: 'error', message, errorKind: event.errorKind });
  if (d.ctx.isSubAgent) failSubAgent(d, message, event.errorKind);
  else d.phase = { kind: 'error', message, errorKind: event.errorKind };
  return;
}

/** `{ ...phase, requestId, attempt, retry }` written out (see `Copies`). */
function withRequest(phase: RequestPhase, requestId: string, attempt: number, retry: RequestPhase['retry']): RequestPhase {
  if (phase.kind === 'llm_requesting') {
    const { autoContinuations, maxTokens } = phase;
    return { kind: 'llm_requesting', requestId, attempt, retry, autoContinuations, maxTokens };
  }
  const { rejectedToolCalls, triggerUsage } = phase;
  return { kind: 'awaiting_continuation', requestId, attempt, retry, rejectedToolCalls, triggerUsage };
}

/** Exponential backoff (REQ-BED-006), never sooner than the provider's retry-after. */
function retryDelay(d: Draft, failedAttempt: number, retryAfterMs: number): number {
  const { retryBaseDelayMs, retryMaxDelayMs } = d.ctx.policy;
  const backoff = retryBaseDelayMs * 2 ** (failedAttempt - 1);
  return Math.min(retryMaxDelayMs, Math.max(backoff, retryAfterMs));
}

export function onTimer(d: Draft, timerId: string): Outcome {
  const phase = d.phase;
  switch (phase.kind) {
    case 'llm_requesting':
    case 'awaiting_continuation':
      if (!phase.retry || phase.retry.timerId !== timerId) return NOOP;
      if (budgetSpent(d)) return stopForBudget(d);
      d.phase = withRequest(phase, phase.requestId, phase.attempt, null);
      d.emit({
        type: 'request_llm',
        requestId: phase.requestId,
        attempt: phase.attempt,
        purpose: phase.kind === 'llm_requesting' ? 'turn' : 'continuation',
        toolNames: toolNames(d),
        rejectedToolCalls: phase.kind === 'awaiting_continuation' ? phase.rejectedToolCalls : [],
        // A retry asks for what the failed attempt asked for.
        maxTokens: phase.kind === 'llm_requesting' ? (phase.maxTokens ?? 0) : 0,
      });
      return;
    case 'cancelling':
      if (phase.timerId !== timerId) return NOOP;
      // The abort acknowledgement was lost: do not stay busy (docs/design.md, resolution 2).
      d.emit({ type: 'abort_llm', requestId: phase.requestId });
      d.phase = { kind: 'idle' };
      return;
    case 'awaiting_sub_agents': {
      if (phase.timerId !== timerId) return NOOP;
      const late = phase.agents.filter((a) => phase.pending.includes(a.agentId));
      const outcomes = [...phase.outcomes];
      for (const agent of late) {
        d.emit({ type: 'stop_sub_agent', agentId: agent.agentId, reason: 'timed out' });
        outcomes.push({
          agentId: agent.agentId,
          task: agent.task,
          success: false,
          result: `Timed out after ${Math.round(d.ctx.policy.subAgentTimeoutMs / 1000)}s without submitting a result.`,
          errorKind: 'timeout',
        });
      }
      finishSubAgents(d, phase, outcomes);
      return;
    }
    default:
      return NOOP;
  }
}
