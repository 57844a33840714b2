/**
 * The implementation side of the model-based test (src/core/model-based.test.ts): effect tags,
 * the abstract projection of a ConversationState (compared with the reference model's), effect
 * matching against the model's tags, checks of effect payloads, and the persisted tool ids.
 */
import { toolSetFor } from '@bedrock/contracts/tools';
import type { ConversationContext, ConversationState, Effect } from '../../src/core/types.ts';
import type { AbstractState } from './reference-model-state.ts';

export function tagOf(e: Effect): string {
  if (e.type === 'persist_message') return `persist:${e.message.type}`;
  if (e.type === 'notify') return `notify:${e.notification.kind}`;
  return e.type;
}

export function abstractImpl(state: ConversationState): AbstractState {
  const p = state.phase;
  const base: AbstractState = {
    phase: p.kind,
    mode: state.mode,
    attempt: null,
    retryPending: false,
    requestId: null,
    maxTokens: null,
    pendingToolIds: [],
    pendingSubAgents: [],
    errorKind: null,
    pending: (state.pending ?? []).map((m) => `${m.delivery}:${m.id}`),
  };
  switch (p.kind) {
    case 'llm_requesting':
      return { ...base, attempt: p.attempt, retryPending: p.retry !== null, requestId: p.requestId, maxTokens: p.maxTokens };
    case 'awaiting_continuation':
      return { ...base, attempt: p.attempt, retryPending: p.retry !== null, requestId: p.requestId };
    case 'cancelling':
      return { ...base, requestId: p.requestId };
    case 'tool_executing':
      return { ...base, pendingToolIds: [p.current.id, ...p.remaining.map((c) => c.id)] };
    case 'awaiting_sub_agents':
      return { ...base, pendingToolIds: [p.spawnToolUseId, ...p.remaining.map((c) => c.id)], pendingSubAgents: [...p.pending].sort() };
    case 'awaiting_mode_approval':
      return { ...base, pendingToolIds: [p.toolUseId, ...p.remaining.map((c) => c.id)] };
    case 'error':
    case 'failed':
      return { ...base, errorKind: p.errorKind };
    default:
      return base;
  }
}

/** Required tags must all be present (as a multiset); anything else must match an optional pattern. */
export function effectsMatch(actual: readonly string[], required: readonly string[], optional: readonly string[]): boolean {
  const rest = [...actual];
  for (const tag of required) {
    const i = rest.indexOf(tag);
    if (i < 0) return false;
    rest.splice(i, 1);
  }
  return rest.every((t) => optional.some((o) => (o.endsWith('*') ? t.startsWith(o.slice(0, -1)) : t === o)));
}

/** Checks the payloads of the effects against the states before and after (ids that tie them together). */
export function payloadProblems(
  ctx: ConversationContext,
  prev: ConversationState,
  next: ConversationState,
  effects: readonly Effect[],
): string[] {
  const problems: string[] = [];
  const pp = prev.phase;
  const np = next.phase;
  const prevTimers = [
    pp.kind === 'llm_requesting' || pp.kind === 'awaiting_continuation' ? pp.retry?.timerId : undefined,
    pp.kind === 'cancelling' || pp.kind === 'awaiting_sub_agents' ? pp.timerId : undefined,
  ].filter((t): t is string => t !== undefined);
  effects.forEach((e, i) => {
    if (e.id !== `${ctx.conversationId}/${next.seq}/${i}`)
      problems.push(`effect ${i} has id ${e.id}, expected ${ctx.conversationId}/${next.seq}/${i}`);
    switch (e.type) {
      case 'request_llm': {
        const purpose = np.kind === 'awaiting_continuation' ? 'continuation' : 'turn';
        const id = np.kind === 'llm_requesting' || np.kind === 'awaiting_continuation' ? np.requestId : null;
        if (e.requestId !== id || e.purpose !== purpose)
          problems.push(`request_llm ${e.requestId}/${e.purpose} but the phase is ${np.kind} ${id}`);
        if (np.kind === 'llm_requesting' || np.kind === 'awaiting_continuation') {
          if (e.attempt !== np.attempt) problems.push(`request_llm attempt ${e.attempt}, phase attempt ${np.attempt}`);
          if (np.retry !== null) problems.push('request_llm sent while a retry timer is pending');
        }
        // A continuation defines the tools too (the gateway forbids their use).
        if (JSON.stringify(e.toolNames) !== JSON.stringify(toolSetFor(ctx)))
          problems.push(`request_llm toolNames ${JSON.stringify(e.toolNames)}`);
        const maxTokens = np.kind === 'llm_requesting' ? np.maxTokens : 0;
        if (e.maxTokens !== maxTokens) problems.push(`request_llm maxTokens ${e.maxTokens}, phase ${maxTokens}`);
        break;
      }
      case 'abort_llm':
        if (
          !((pp.kind === 'llm_requesting' || pp.kind === 'awaiting_continuation') && pp.retry === null && pp.requestId === e.requestId) &&
          !(pp.kind === 'cancelling' && pp.requestId === e.requestId)
        ) {
          problems.push(`abort_llm ${e.requestId} does not abort the request in flight`);
        }
        break;
      case 'execute_tool':
        if (np.kind !== 'tool_executing' || np.current.id !== e.toolUseId)
          problems.push(`execute_tool ${e.toolUseId} is not the current call`);
        if (e.mode !== next.mode) problems.push(`execute_tool in mode ${e.mode}, conversation is ${next.mode}`);
        break;
      case 'kill_tool':
        if (pp.kind !== 'tool_executing' || pp.current.id !== e.toolUseId) problems.push(`kill_tool ${e.toolUseId} was not running`);
        break;
      case 'cancel_timer':
        if (!prevTimers.includes(e.timerId)) problems.push(`cancel_timer ${e.timerId} was not pending`);
        break;
      case 'schedule_timer': {
        const held = [
          np.kind === 'llm_requesting' || np.kind === 'awaiting_continuation' ? np.retry?.timerId : undefined,
          np.kind === 'cancelling' || np.kind === 'awaiting_sub_agents' ? np.timerId : undefined,
        ];
        if (!held.includes(e.timerId)) problems.push(`schedule_timer ${e.timerId} is not held by the phase`);
        if (e.timerId !== `${ctx.conversationId}/timer/${next.seq}`)
          problems.push(`timer id ${e.timerId}, expected ${ctx.conversationId}/timer/${next.seq}`);
        break;
      }
      case 'stop_sub_agent':
        if (pp.kind !== 'awaiting_sub_agents' || !pp.pending.includes(e.agentId))
          problems.push(`stop_sub_agent ${e.agentId} was not pending`);
        break;
      case 'spawn_sub_agent':
        if (np.kind !== 'awaiting_sub_agents' || !np.pending.includes(e.agentId))
          problems.push(`spawn_sub_agent ${e.agentId} is not pending`);
        if (e.mode !== (ctx.sandboxAvailable ? 'restricted' : 'unrestricted')) problems.push(`sub-agent spawned in mode ${e.mode}`);
        break;
      case 'notify_parent':
        if (e.parentId !== ctx.parentId || e.outcome.agentId !== ctx.conversationId)
          problems.push(`notify_parent to ${e.parentId} about ${e.outcome.agentId}`);
        break;
      default:
        break;
    }
  });
  return problems;
}

export function persistedIds(effects: readonly Effect[]): { uses: string[]; results: string[] } {
  const uses: string[] = [];
  const results: string[] = [];
  for (const e of effects) {
    if (e.type !== 'persist_message') continue;
    for (const b of e.message.content) {
      if (b.type === 'tool_use' && e.message.type === 'agent') uses.push(b.id);
      if (b.type === 'tool_result' && e.message.type === 'tool') results.push(b.toolUseId);
    }
  }
  return { uses, results };
}
