/**
 * The pure transition function (REQ-BED-001). docs/state-machine.md is its specification;
 * `handle()` dispatches each event to its handler (user-input, cancel, modes, model-responses,
 * tool-calls), and each handler names the rows it implements.
 */
import { rejection } from './constants.ts';
import { ZERO_USAGE } from './usage.ts';
import type { ConversationContext, ConversationEvent, ConversationState, TransitionResult } from './types.ts';
import { Draft, NOOP, unhandled, type Outcome } from './draft.ts';
import { beginLlm, budgetSpent, failSubAgent, stopWork } from './turn.ts';
import { deliverAtRest, onCancelQueued, onTriggerContinuation, onUserMessage } from './user-input.ts';
import { onUserCancel, onWorkLost } from './cancel.ts';
import { onDowngrade, onUpgradeAnswer } from './modes.ts';
import { onLlmError, onLlmResponse, onTimer } from './model-responses.ts';
import { onSubAgentResult, onToolComplete } from './tool-calls.ts';

/** The matrix's internal "AwaitingLlm → LlmRequesting" step. */
export interface BeginLlmRequest {
  readonly type: 'begin_llm_request';
}
export type StepEvent = ConversationEvent | BeginLlmRequest;

/** The initial state (REQ-BED-014, REQ-BED-018 as resolved in docs/design.md). */
export function initialState(ctx: ConversationContext): ConversationState {
  return {
    phase: { kind: 'idle' },
    mode: ctx.sandboxAvailable ? 'restricted' : 'unrestricted',
    seq: 0,
    llmRequests: 0,
    lastUsage: null,
    totalUsage: ZERO_USAGE,
    contextWarned: false,
  };
}

/** Applies an event; settles the transient awaiting_llm phase so it is never returned. */
export function transition(state: ConversationState, ctx: ConversationContext, event: ConversationEvent): TransitionResult {
  return run(state, ctx, event, true);
}

/** One step of the matrix, without settling awaiting_llm (for table tests of the spec's rows). */
export function step(state: ConversationState, ctx: ConversationContext, event: StepEvent): TransitionResult {
  return run(state, ctx, event, false);
}

function run(state: ConversationState, ctx: ConversationContext, event: StepEvent, settle: boolean): TransitionResult {
  const d = new Draft(state, ctx);
  const outcome = handle(d, event);
  if (outcome === NOOP) return { ok: true, state, effects: [] };
  if (outcome) return { ok: false, rejection: outcome };
  // The turn came to rest with messages waiting: the next one goes out at once (unless the
  // budget is spent: they wait, as a new turn could make no request).
  if (d.pending.length > 0 && (d.phase.kind === 'idle' || d.phase.kind === 'error') && !budgetSpent(d)) deliverAtRest(d);
  if (settle && d.phase.kind === 'awaiting_llm') beginLlm(d, 0);
  return { ok: true, state: d.state(), effects: d.effects() };
}

const USER_ACTIONS = new Set<StepEvent['type']>([
  'user_message',
  'user_cancel',
  'user_approve_upgrade',
  'user_deny_upgrade',
  'user_request_downgrade',
  'user_trigger_continuation',
  'user_cancel_queued',
]);

function handle(d: Draft, event: StepEvent): Outcome {
  const phase = d.phase;
  // Read once: phases of a dozen object shapes come here, so each `phase.kind` is a
  // megamorphic (hash-table) property load.
  const kind = phase.kind;
  // ContextExhausted is absorbing: only a user message is answered, with a rejection.
  if (kind === 'context_exhausted') {
    return event.type === 'user_message' || event.type === 'user_cancel_queued' ? rejection('context_exhausted') : NOOP;
  }
  // A sub-agent that submitted its result or failed is finished.
  if (kind === 'completed' || kind === 'failed') {
    return USER_ACTIONS.has(event.type) ? rejection('conversation_finished') : NOOP;
  }
  switch (event.type) {
    case 'user_message':
      return onUserMessage(d, event.text, event.images, event.delivery ?? 'reject', event.toolOutput);
    case 'user_cancel_queued':
      return onCancelQueued(d, event.queuedId);
    case 'user_cancel':
      return onUserCancel(d, event.toolOutput);
    case 'user_approve_upgrade':
    case 'user_deny_upgrade':
      return onUpgradeAnswer(d, event.type === 'user_approve_upgrade');
    case 'user_request_downgrade':
      return onDowngrade(d);
    case 'user_trigger_continuation':
      return onTriggerContinuation(d);
    case 'begin_llm_request':
      if (phase.kind !== 'awaiting_llm') return NOOP;
      beginLlm(d, 0);
      return;
    case 'llm_response':
      return onLlmResponse(d, event);
    case 'llm_error':
      return onLlmError(d, event);
    case 'timer_fired':
      return onTimer(d, event.timerId);
    case 'tool_complete':
      return onToolComplete(d, event.result);
    case 'sub_agent_result':
      return onSubAgentResult(d, event.outcome);
    case 'sub_agent_start':
      if (!d.ctx.isSubAgent || phase.kind !== 'idle' || d.prev.seq !== 0) return NOOP;
      d.persist('user', [{ type: 'text', text: event.task }]);
      d.phase = { kind: 'awaiting_llm' };
      return;
    case 'sub_agent_stop':
      if (!d.ctx.isSubAgent) return NOOP;
      stopWork(d, `Stopped by the parent: ${event.reason}`, `Stopped by the parent: ${event.reason}`);
      failSubAgent(d, `Stopped by the parent: ${event.reason}`, 'cancelled');
      return;
    case 'work_lost':
      if (event.atSeq !== undefined && event.atSeq !== d.prev.seq) return NOOP;
      return onWorkLost(d);
    default:
      // Every event is handled above: one added to `ConversationEvent` fails to compile here (docs/extending.md).
      return unhandled(event);
  }
}
