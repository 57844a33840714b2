/**
 * An independent reference model of the conversation state machine, written from
 * docs/state-machine.md (not from transition.ts), for the model-based test: modelStep gives the
 * outcomes the doc allows for an event. Its state and ids: reference-model-state.ts; a transition's
 * draft: reference-model-draft.ts; the llm_response rules: reference-model-response.ts.
 */
import { MAX_PENDING_MESSAGES } from '../../src/core/constants.ts';
import type { ConversationContext, ConversationEvent, PhaseKind, RejectionCode } from '../../src/core/types.ts';
import { Draft } from './reference-model-draft.ts';
import { onResponse } from './reference-model-response.ts';
import { BUSY_KINDS } from './reference-model-state.ts';
import type { ModelOutcome, ModelPending, ModelPhase, ModelState } from './reference-model-state.ts';

const TERMINAL_KINDS: readonly PhaseKind[] = ['context_exhausted', 'completed', 'failed'];

const NOOP: ModelOutcome = { kind: 'noop' };
const reject = (...codes: (RejectionCode | '*')[]): ModelOutcome[] => codes.map((code) => ({ kind: 'rejected', code }));
/** AMBIGUOUS: context_exhausted is "absorbing: anything else is a no-op", yet user actions elsewhere reject. */
const EXHAUSTED_USER_ACTION: ModelOutcome[] = [NOOP, { kind: 'rejected', code: '*' }];

function isUserAction(type: ConversationEvent['type']): boolean {
  return type.startsWith('user_');
}

/**
 * Every outcome the doc allows for `event` in model state `s`. `freshTimerId` is the id of the
 * timer the implementation scheduled in this transition, if any. Timer ids depend on `seq`,
 * whose count through the internal begin_llm_request step the doc leaves open, so the model is
 * handed the id of the timer the implementation scheduled and checks only that the timer is then
 * honoured.
 */
export function modelStep(ctx: ConversationContext, s: ModelState, event: ConversationEvent, freshTimerId: string): ModelOutcome[] {
  const p = s.phase;
  const S = ctx.isSubAgent;
  const d = (): Draft => new Draft(ctx, s, freshTimerId);

  // Sub-agents that are done: no-op, except user actions → conversation_finished.
  if (S && (p.kind === 'completed' || p.kind === 'failed')) {
    if (!isUserAction(event.type)) return [NOOP];
    switch (event.type) {
      case 'user_message':
        // AMBIGUOUS: an empty message to a finished sub-agent.
        return isEmpty(event) ? reject('conversation_finished', 'empty_message') : reject('conversation_finished');
      case 'user_request_downgrade':
        // AMBIGUOUS: "any (S) → sub_agent_mode_fixed" vs "completed/failed: user actions → conversation_finished".
        return reject('conversation_finished', 'sub_agent_mode_fixed');
      case 'user_trigger_continuation':
        return reject('conversation_finished', 'continuation_unavailable');
      default:
        return reject('conversation_finished');
    }
  }

  switch (event.type) {
    case 'user_message': {
      const empty = isEmpty(event);
      const delivery = event.delivery ?? 'reject';
      if (S) return empty ? reject('sub_agent_driven_by_parent', 'empty_message') : reject('sub_agent_driven_by_parent');
      let code: RejectionCode | null = null;
      if (p.kind === 'awaiting_continuation') code = 'agent_busy';
      else if (BUSY_KINDS.includes(p.kind)) code = delivery === 'reject' ? 'agent_busy' : null;
      else if (p.kind === 'cancelling') code = delivery === 'reject' ? 'cancellation_in_progress' : null;
      else if (p.kind === 'context_exhausted') code = 'context_exhausted';
      if (code !== null) return empty ? reject(code, 'empty_message') : reject(code); // AMBIGUOUS order with empty_message
      if (empty) return reject('empty_message');
      if (p.kind === 'idle' || p.kind === 'error') {
        const x = d().emit('persist:user');
        x.toLlm();
        return [x.done()];
      }
      // Busy or cancelling with delivery queue, steer or interrupt: the message waits.
      if (s.pending.length >= MAX_PENDING_MESSAGES) return reject('queue_full');
      const x = d();
      x.pending.push({ id: `${ctx.conversationId}/q/${x.seq}`, delivery: delivery as ModelPending['delivery'] });
      // interrupt: then a cancel, as user_cancel (already under way when cancelling).
      if (delivery === 'interrupt' && p.kind !== 'cancelling') cancelTurn(x, p, freshTimerId);
      return [x.done()];
    }

    case 'user_cancel_queued': {
      if (S) return reject('sub_agent_driven_by_parent');
      if (p.kind === 'context_exhausted') return reject('context_exhausted');
      if (!s.pending.some((m) => m.id === event.queuedId)) return reject('not_queued');
      const x = d();
      x.pending = x.pending.filter((m) => m.id !== event.queuedId);
      return [x.done()];
    }

    case 'sub_agent_start': {
      if (!S || p.kind !== 'idle' || !s.fresh) return [NOOP];
      const x = d().emit('persist:user');
      x.toLlm();
      return [x.done()];
    }

    case 'user_cancel': {
      if (S) return stopSubAgent(d(), p);
      switch (p.kind) {
        case 'idle':
        case 'error':
          return reject('nothing_to_cancel');
        case 'context_exhausted':
          return EXHAUSTED_USER_ACTION;
        case 'cancelling':
          return [NOOP];
        case 'llm_requesting':
        case 'tool_executing':
        case 'awaiting_sub_agents':
        case 'awaiting_mode_approval': {
          const x = d();
          cancelTurn(x, p, freshTimerId);
          return [x.done()];
        }
        case 'awaiting_continuation': {
          const x = d().emit(p.retryTimer === null ? 'abort_llm' : 'cancel_timer', 'persist:continuation', 'notify:context_exhausted');
          x.phase = { kind: 'context_exhausted' };
          return [x.done()];
        }
        default:
          return [NOOP];
      }
    }

    case 'sub_agent_stop':
      if (!S) return [NOOP];
      return stopSubAgent(d(), p);

    case 'user_approve_upgrade':
    case 'user_deny_upgrade': {
      if (S) return reject('no_pending_upgrade', 'sub_agent_mode_fixed', 'sub_agent_driven_by_parent'); // AMBIGUOUS
      if (p.kind === 'context_exhausted') return EXHAUSTED_USER_ACTION;
      if (p.kind !== 'awaiting_mode_approval') return reject('no_pending_upgrade');
      const x = d();
      x.persistResult(p.toolUseId);
      if (event.type === 'user_approve_upgrade') {
        x.mode = 'unrestricted';
        x.emit('persist:system', 'notify:mode_changed');
      } else {
        x.mode = 'restricted';
      }
      x.runCalls(p.remaining);
      return [x.done()];
    }

    case 'user_request_downgrade': {
      if (S) return reject('sub_agent_mode_fixed');
      if (p.kind === 'context_exhausted') return EXHAUSTED_USER_ACTION;
      if (!ctx.sandboxAvailable) return reject('sandbox_unavailable');
      if (s.mode === 'restricted') return reject('already_restricted');
      const x = d().emit('persist:system', 'notify:mode_changed');
      x.mode = 'restricted';
      return [x.done()];
    }

    case 'user_trigger_continuation': {
      if (S) return reject('continuation_unavailable');
      if (p.kind === 'context_exhausted') return EXHAUSTED_USER_ACTION;
      if (p.kind === 'cancelling') return reject('continuation_unavailable', 'cancellation_in_progress'); // AMBIGUOUS: cancelling is not in the busy list
      if (p.kind !== 'idle' && p.kind !== 'error') return reject('continuation_unavailable');
      const x = d();
      if (x.budgetSpent()) {
        x.stopForBudget();
        return [x.done()];
      }
      x.emit('request_llm');
      x.phase = { kind: 'awaiting_continuation', requestId: x.nextRequestId(), attempt: 1, retryTimer: null };
      return [x.done()];
    }

    case 'llm_response': {
      if (p.kind === 'cancelling' && event.requestId === p.requestId) {
        const x = d().emit('cancel_timer');
        // Issue 28: the text the user saw stream is kept, as a cancelled answer.
        if (event.content.some((b) => b.type === 'text' && b.text.trim())) x.emit('persist:agent');
        x.phase = { kind: 'idle' };
        return [x.done()];
      }
      if (p.kind === 'awaiting_continuation' && p.retryTimer === null && event.requestId === p.requestId) {
        const x = d().emit('persist:continuation', 'notify:context_exhausted');
        x.phase = { kind: 'context_exhausted' };
        return [x.done()];
      }
      if (p.kind !== 'llm_requesting' || p.retryTimer !== null || event.requestId !== p.requestId) return [NOOP];
      return [onResponse(d(), p, event)];
    }

    case 'llm_error': {
      if (p.kind === 'cancelling' && event.requestId === p.requestId) {
        const x = d().emit('cancel_timer');
        if (event.aborted && event.partialText?.trim()) x.emit('persist:agent');
        x.phase = { kind: 'idle' };
        return [x.done()];
      }
      if ((p.kind !== 'llm_requesting' && p.kind !== 'awaiting_continuation') || p.retryTimer !== null || event.requestId !== p.requestId) {
        return [NOOP];
      }
      const x = d();
      if (event.retryable && p.attempt < ctx.policy.maxLlmAttempts) {
        x.emit('schedule_timer', 'notify:retry_scheduled');
        const requestId = x.nextRequestId();
        x.phase = { ...p, attempt: p.attempt + 1, requestId, retryTimer: freshTimerId };
        return [x.done()];
      }
      if (p.kind === 'awaiting_continuation') {
        x.emit('persist:continuation', 'notify:context_exhausted');
        x.phase = { kind: 'context_exhausted' };
        return [x.done()];
      }
      x.emit('persist:error', 'notify:error');
      if (S) x.fail(event.errorKind);
      else x.phase = { kind: 'error', errorKind: event.errorKind };
      return [x.done()];
    }

    case 'timer_fired': {
      if ((p.kind === 'llm_requesting' || p.kind === 'awaiting_continuation') && p.retryTimer === event.timerId) {
        const x = d();
        if (x.budgetSpent()) x.stopForBudget();
        else {
          x.emit('request_llm');
          x.phase = { ...p, retryTimer: null };
        }
        return [x.done()];
      }
      if (p.kind === 'cancelling' && p.timerId === event.timerId) {
        // The doc lists no effect here; re-sending the (idempotent) abort is tolerated. REPORTED.
        const x = d().allow('abort_llm');
        x.phase = { kind: 'idle' };
        return [x.done()];
      }
      if (p.kind === 'awaiting_sub_agents' && p.timerId === event.timerId) {
        // "as last result": cancelling the timer that just fired is harmless either way.
        const x = d().allow('cancel_timer', 'notify:sub_agent_progress');
        for (let k = 0; k < p.pending.length; k++) x.emit('stop_sub_agent');
        x.persistResult(p.spawnToolUseId);
        x.runCalls(p.remaining);
        return [x.done()];
      }
      return [NOOP];
    }

    case 'tool_complete': {
      if (p.kind !== 'tool_executing' || event.result.toolUseId !== p.current.id) return [NOOP];
      const x = d();
      x.persistResult(p.current.id);
      x.runCalls(p.remaining);
      return [x.done()];
    }

    case 'sub_agent_result': {
      if (p.kind !== 'awaiting_sub_agents' || !p.pending.includes(event.outcome.agentId)) return [NOOP];
      const pending = p.pending.filter((a) => a !== event.outcome.agentId);
      const x = d();
      if (pending.length > 0) {
        x.emit('notify:sub_agent_progress');
        x.phase = { ...p, pending };
        return [x.done()];
      }
      x.emit('cancel_timer').allow('notify:sub_agent_progress');
      x.persistResult(p.spawnToolUseId);
      x.runCalls(p.remaining);
      return [x.done()];
    }

    case 'work_lost':
      return workLost(d, S, p);
  }
}

/** user_cancel of a parent's turn (llm_requesting, tool_executing, awaiting_sub_agents, awaiting_mode_approval). */
function cancelTurn(x: Draft, p: ModelPhase, freshTimerId: string): void {
  switch (p.kind) {
    case 'llm_requesting':
      if (p.retryTimer === null) {
        x.emit('abort_llm', 'schedule_timer');
        x.phase = { kind: 'cancelling', requestId: p.requestId, timerId: freshTimerId };
      } else {
        x.emit('cancel_timer');
        x.phase = { kind: 'idle' };
      }
      return;
    case 'tool_executing':
      x.emit('kill_tool');
      for (const id of [p.current.id, ...p.remaining.map((c) => c.id)]) x.persistResult(id);
      x.phase = { kind: 'idle' };
      return;
    case 'awaiting_sub_agents':
      x.emit('cancel_timer');
      for (let k = 0; k < p.pending.length; k++) x.emit('stop_sub_agent');
      for (const id of [p.spawnToolUseId, ...p.remaining.map((c) => c.id)]) x.persistResult(id);
      x.phase = { kind: 'idle' };
      return;
    case 'awaiting_mode_approval':
      for (const id of [p.toolUseId, ...p.remaining.map((c) => c.id)]) x.persistResult(id);
      x.phase = { kind: 'idle' };
      return;
    default:
      throw new Error(`cancelTurn from ${p.kind}`);
  }
}

function isEmpty(e: { readonly text: string; readonly images: readonly unknown[] }): boolean {
  return e.text.length === 0 && e.images.length === 0;
}

/** A non-terminal sub-agent cancelled by the user or stopped by its parent. */
function stopSubAgent(x: Draft, p: ModelPhase): ModelOutcome[] {
  if (TERMINAL_KINDS.includes(p.kind)) return [NOOP];
  if (p.kind === 'llm_requesting') x.emit(p.retryTimer === null ? 'abort_llm' : 'cancel_timer');
  if (p.kind === 'tool_executing') x.emit('kill_tool');
  // The doc does not say whether the pending calls get synthetic results here.
  if (p.kind === 'tool_executing') {
    x.resultsUnspecified = true;
    x.allow('persist:tool');
  }
  x.allow('notify:*', 'persist:error');
  x.fail('cancelled');
  return [x.done()];
}

function workLost(d: () => Draft, S: boolean, p: ModelPhase): ModelOutcome[] {
  const end = (x: Draft): void => {
    x.allow('notify:*');
    if (S) {
      x.phase = { kind: 'failed', errorKind: null };
      x.allow('notify_parent', 'persist:error');
    } else {
      x.phase = { kind: 'idle' };
    }
  };
  switch (p.kind) {
    case 'llm_requesting': {
      const x = d();
      if (p.retryTimer === null) x.emit('abort_llm');
      else x.allow('cancel_timer');
      end(x);
      return [x.done()];
    }
    case 'tool_executing': {
      const x = d().emit('kill_tool');
      for (const id of [p.current.id, ...p.remaining.map((c) => c.id)]) x.persistResult(id);
      end(x);
      return [x.done()];
    }
    case 'awaiting_sub_agents': {
      const x = d().allow('cancel_timer');
      for (let k = 0; k < p.pending.length; k++) x.emit('stop_sub_agent');
      for (const id of [p.spawnToolUseId, ...p.remaining.map((c) => c.id)]) x.persistResult(id);
      end(x);
      return [x.done()];
    }
    case 'awaiting_continuation': {
      const x = d().emit('persist:continuation').allow('notify:*');
      if (p.retryTimer === null) x.emit('abort_llm');
      else x.allow('cancel_timer');
      x.phase = { kind: 'context_exhausted' };
      return [x.done()];
    }
    case 'cancelling': {
      // AMBIGUOUS: cancelling is not in the busy list, and its own timer already bounds it.
      const x = d().allow('cancel_timer', 'abort_llm', 'notify:*');
      x.phase = { kind: 'idle' };
      return [NOOP, x.done()];
    }
    default:
      // idle, error, terminal phases, and awaiting_mode_approval (survives restarts).
      return [NOOP];
  }
}
