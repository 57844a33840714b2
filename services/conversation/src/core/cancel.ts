/**
 * Cancellation and recovery: the user's cancel, the answer to a request being cancelled, and
 * work lost in a restart. Rows: docs/state-machine.md.
 */
import {
  CANCELLED_CURRENT,
  CANCELLED_SKIPPED,
  CONTINUATION_CANCELLED_SUMMARY,
  CONTINUATION_FALLBACK_SUMMARY,
  LOST_RESULT,
  rejection,
} from './constants.ts';
import type { Phase, ToolOutputSeen } from './types.ts';
import { NOOP, type Draft, type LlmErrorEvent, type LlmResponseEvent, type Outcome } from './draft.ts';
import { exhaust, failSubAgent, stopWork } from './turn.ts';

/** `toolOutput`: what the running tool had printed when the user cancelled it (kept in its result). */
export function onUserCancel(d: Draft, toolOutput?: ToolOutputSeen): Outcome {
  const phase = d.phase;
  if (d.ctx.isSubAgent) {
    // A person may stop a sub-agent; its parent then sees a failure it can handle.
    stopWork(d, CANCELLED_CURRENT, CANCELLED_SKIPPED, toolOutput);
    failSubAgent(d, 'Cancelled by user', 'cancelled');
    return;
  }
  switch (phase.kind) {
    case 'idle':
    case 'error':
      return rejection('nothing_to_cancel');
    case 'cancelling':
      return NOOP;
    case 'llm_requesting':
      if (phase.retry) {
        d.emit({ type: 'cancel_timer', timerId: phase.retry.timerId });
        d.phase = { kind: 'idle' };
        return;
      }
      {
        // REQ-BED-005: abort at once; wait (boundedly) for the acknowledgement, persist nothing.
        const timerId = d.newTimerId();
        d.emit({ type: 'abort_llm', requestId: phase.requestId });
        d.emit({ type: 'schedule_timer', timerId, delayMs: d.ctx.policy.cancelAckTimeoutMs, purpose: 'cancel_timeout' });
        d.phase = { kind: 'cancelling', requestId: phase.requestId, timerId };
      }
      return;
    case 'awaiting_continuation':
      stopWork(d, CANCELLED_CURRENT, CANCELLED_SKIPPED);
      exhaust(d, CONTINUATION_CANCELLED_SUMMARY, phase.triggerUsage);
      return;
    default:
      stopWork(d, CANCELLED_CURRENT, CANCELLED_SKIPPED, toolOutput);
      d.phase = { kind: 'idle' };
      return;
  }
}

/**
 * Any answer to the request being cancelled (response, error or the abort acknowledgement)
 * ends Cancelling. REQ-BED-005: no tool it asked for runs and nothing the model would take for
 * a whole answer is kept — but the text the user already saw stream is: it is persisted as an
 * agent message of its text alone, stop reason `cancelled`, so every client shows it (marked
 * cancelled) rather than losing it. The abort acknowledgement carries that text; a response
 * that completed before the abort took effect gives its text blocks.
 */
export function onCancelledAnswer(
  d: Draft,
  phase: Extract<Phase, { kind: 'cancelling' }>,
  event: LlmResponseEvent | LlmErrorEvent,
): Outcome {
  if (phase.requestId !== event.requestId) return NOOP;
  d.emit({ type: 'cancel_timer', timerId: phase.timerId });
  const seen =
    event.type === 'llm_response'
      ? event.content.flatMap((b) => (b.type === 'text' && b.text.trim() ? [b.text] : [])).join('\n\n')
      : event.aborted
        ? (event.partialText ?? '')
        : '';
  if (seen.trim())
    d.emit({ type: 'persist_message', message: { type: 'agent', content: [{ type: 'text', text: seen }], stopReason: 'cancelled' } });
  d.phase = { kind: 'idle' };
  return;
}

export function onWorkLost(d: Draft): Outcome {
  const phase = d.phase;
  switch (phase.kind) {
    case 'idle':
    case 'error':
    case 'awaiting_mode_approval': // REQ-BED-015: waits for the user, across restarts.
      return NOOP;
    case 'awaiting_continuation':
      stopWork(d, LOST_RESULT, LOST_RESULT);
      exhaust(d, CONTINUATION_FALLBACK_SUMMARY, phase.triggerUsage);
      return;
    default:
      stopWork(d, LOST_RESULT, LOST_RESULT);
      if (d.ctx.isSubAgent) failSubAgent(d, 'The work this sub-agent waited on was lost.', 'unknown');
      else d.phase = { kind: 'idle' };
      return;
  }
}
