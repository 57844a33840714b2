/**
 * The reference model's rules for the llm_response that answers the request in flight: refusal,
 * a cut tool call, the context thresholds, tool calls, and automatic continuation.
 */
import { CONTINUATION_THRESHOLD, WARNING_THRESHOLD } from '../../src/core/constants.ts';
import type { ConversationEvent, ToolCall } from '../../src/core/types.ts';
import type { Draft } from './reference-model-draft.ts';
import { usageTokens } from './reference-model-state.ts';
import type { ModelOutcome, ModelPhase } from './reference-model-state.ts';

export function onResponse(
  x: Draft,
  p: Extract<ModelPhase, { kind: 'llm_requesting' }>,
  ev: Extract<ConversationEvent, { type: 'llm_response' }>,
): ModelOutcome {
  const ctx = x.ctx;
  const calls: ToolCall[] = [];
  for (const b of ev.content) if (b.type === 'tool_use') calls.push({ id: b.id, name: b.name, input: b.input });
  const used = usageTokens(ev.usage);
  const full = used >= CONTINUATION_THRESHOLD * ctx.contextWindow || ev.stopReason === 'model_context_window_exceeded';
  const warn = (): void => {
    if (used >= WARNING_THRESHOLD * ctx.contextWindow && !x.contextWarned) {
      x.emit('notify:context_warning');
      x.contextWarned = true;
    }
  };
  const more = p.autoContinuations < ctx.policy.maxAutoContinuations;
  const end = (): ModelOutcome => {
    if (ctx.isSubAgent) x.fail('unknown');
    else x.phase = { kind: 'idle' };
    return x.done();
  };

  // Refusal: the agent message (refused) and an error message; the turn ends.
  if (ev.stopReason === 'refusal') {
    x.emit('persist:agent', 'persist:error');
    x.toolUses.push(...calls.map((c) => c.id));
    warn();
    if (ctx.isSubAgent) x.fail('refused');
    else x.phase = { kind: 'idle' };
    return x.done();
  }
  // A cut tool call below the model's output limit: asked again at the limit, nothing kept.
  const cut = ev.cutToolNames ?? [];
  const sent = Math.max(ev.maxTokens ?? 0, p.maxTokens);
  if (ev.stopReason === 'max_tokens' && cut.length > 0 && !full && sent < ctx.maxOutputTokens && more) {
    warn();
    x.toLlm(p.autoContinuations + 1, ctx.maxOutputTokens);
    return x.done();
  }

  if (ev.content.length > 0) {
    x.emit('persist:agent');
    x.toolUses.push(...calls.map((c) => c.id));
  }
  if (full) {
    for (const c of calls) x.persistResult(c.id);
    if (ctx.contextExhaustionBehavior === 'threshold_continuation') {
      if (x.budgetSpent()) x.stopForBudget();
      else {
        x.emit('request_llm');
        x.phase = { kind: 'awaiting_continuation', requestId: x.nextRequestId(), attempt: 1, retryTimer: null };
      }
    } else {
      x.fail('context_exhausted');
    }
    return x.done();
  }
  warn();
  // Cut at the limit (or no continuation left): a notice; complete calls run as usual.
  if (cut.length > 0) {
    x.emit('persist:system');
    if (calls.length > 0) {
      x.runCalls(calls);
      return x.done();
    }
    if (!more) return end();
    x.toLlm(p.autoContinuations + 1, p.maxTokens);
    return x.done();
  }
  if (calls.length > 0) {
    x.runCalls(calls);
    return x.done();
  }
  if ((ev.stopReason === 'max_tokens' || ev.stopReason === 'pause_turn') && more) {
    // A paused turn holding server-tool blocks is sent back as it is; other cuts get a notice.
    const paused = ev.stopReason === 'pause_turn' && ev.content.some((b) => b.type === 'server_tool');
    if (!paused) x.emit('persist:system');
    x.toLlm(p.autoContinuations + 1, p.maxTokens);
    return x.done();
  }
  return end();
}
