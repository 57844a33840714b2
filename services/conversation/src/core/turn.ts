/**
 * Steps the handlers share: the next LLM request of a turn, stopping the work in flight, and
 * the ways a turn ends (a spent budget, an exhausted context, a failed sub-agent).
 */
import { toolSetFor, type ToolName } from '@bedrock/contracts/tools';
import { BUDGET_EXHAUSTED_MESSAGE } from './constants.ts';
import type { ErrorKind, ToolCall, ToolOutputSeen, Usage } from './types.ts';
import { synthetic, type Draft } from './draft.ts';

/** A new request of the turn; `maxTokens` 0 asks for the service's default. */
export function beginLlm(d: Draft, autoContinuations: number, maxTokens = 0): void {
  if (budgetSpent(d)) return stopForBudget(d);
  const requestId = d.newRequestId();
  d.phase = { kind: 'llm_requesting', requestId, attempt: 1, retry: null, autoContinuations, maxTokens };
  d.emit({ type: 'request_llm', requestId, attempt: 1, purpose: 'turn', toolNames: toolNames(d), rejectedToolCalls: [], maxTokens });
}

export function toolNames(d: Draft): readonly ToolName[] {
  return toolSetFor({ isSubAgent: d.ctx.isSubAgent, sandboxAvailable: d.ctx.sandboxAvailable });
}

export function requestContinuation(d: Draft, rejectedToolCalls: readonly ToolCall[], triggerUsage: Usage): void {
  if (budgetSpent(d)) return stopForBudget(d);
  const requestId = d.newRequestId();
  d.phase = { kind: 'awaiting_continuation', requestId, attempt: 1, retry: null, rejectedToolCalls, triggerUsage };
  d.emit({ type: 'request_llm', requestId, attempt: 1, purpose: 'continuation', toolNames: toolNames(d), rejectedToolCalls, maxTokens: 0 });
}

/**
 * Stops whatever the phase has in flight and answers every tool call it still owes, so the
 * tool_use/tool_result chain stays valid (REQ-BED-005). Leaves the phase for the caller to set.
 */
/**
 * Ends the work in progress: `currentText` answers the call under way (after `currentOutput`, what
 * that tool had printed, when it is that call's), `skippedText` the calls after it.
 */
export function stopWork(d: Draft, currentText: string, skippedText: string, currentOutput?: ToolOutputSeen): void {
  const phase = d.phase;
  switch (phase.kind) {
    case 'llm_requesting':
    case 'awaiting_continuation':
      if (phase.retry) d.emit({ type: 'cancel_timer', timerId: phase.retry.timerId });
      else d.emit({ type: 'abort_llm', requestId: phase.requestId });
      return;
    case 'cancelling':
      d.emit({ type: 'cancel_timer', timerId: phase.timerId });
      return;
    case 'tool_executing': {
      d.emit({ type: 'kill_tool', toolUseId: phase.current.id });
      // Only the output of the call still running (the tool may have ended since it was read).
      const seen = currentOutput?.toolUseId === phase.current.id ? currentOutput.text.trimEnd() : '';
      d.persistResult(synthetic(phase.current.id, seen ? `${seen}\n\n${currentText}` : currentText));
      for (const call of phase.remaining) d.persistResult(synthetic(call.id, skippedText));
      return;
    }
    case 'awaiting_sub_agents':
      for (const agentId of phase.pending) d.emit({ type: 'stop_sub_agent', agentId, reason: currentText });
      d.emit({ type: 'cancel_timer', timerId: phase.timerId });
      d.persistResult(synthetic(phase.spawnToolUseId, currentText));
      for (const call of phase.remaining) d.persistResult(synthetic(call.id, skippedText));
      return;
    case 'awaiting_mode_approval':
      d.persistResult(synthetic(phase.toolUseId, currentText));
      for (const call of phase.remaining) d.persistResult(synthetic(call.id, skippedText));
      return;
    default:
      return;
  }
}

export function failSubAgent(d: Draft, error: string, errorKind: ErrorKind): void {
  d.phase = { kind: 'failed', error, errorKind };
  d.emit({
    type: 'notify_parent',
    parentId: d.ctx.parentId ?? '',
    outcome: { agentId: d.ctx.conversationId, task: '', success: false, result: error, errorKind },
  });
}

/** The owner's budget is spent (the shell's figure for this event): no LLM request may go out. */
export function budgetSpent(d: Draft): boolean {
  const remaining = d.ctx.remainingBudgetMicros;
  return remaining !== null && remaining !== undefined && remaining <= 0;
}

/**
 * The boundary where a turn stops for its budget: instead of the next LLM request (every tool
 * of the turn is answered by then: requests are only made once the results are in). An error
 * message and notification, then `error` (budget_exhausted), or a failed sub-agent.
 */
export function stopForBudget(d: Draft): void {
  d.persist('error', [{ type: 'text', text: BUDGET_EXHAUSTED_MESSAGE }]);
  d.notify({ kind: 'error', message: BUDGET_EXHAUSTED_MESSAGE, errorKind: 'budget_exhausted' });
  if (d.ctx.isSubAgent) failSubAgent(d, BUDGET_EXHAUSTED_MESSAGE, 'budget_exhausted');
  else d.phase = { kind: 'error', message: BUDGET_EXHAUSTED_MESSAGE, errorKind: 'budget_exhausted' };
}

export function exhaust(d: Draft, summary: string, finalUsage: Usage): void {
  d.phase = { kind: 'context_exhausted', summary, finalUsage };
  d.persist('continuation', [{ type: 'text', text: summary }]);
  d.notify({ kind: 'context_exhausted', summary });
}
