/**
 * An independent reference model of the conversation state machine, written from
 * docs/state-machine.md (not from transition.ts), for the model-based test.
 *
 * It keeps only what the rules depend on: the phase kind and the ids each phase waits for,
 * the mode, the attempt, the pending tool calls and sub-agents, and which tool_use /
 * tool_result ids were persisted. For each event it returns the outcomes the doc allows:
 * usually exactly one; several where the doc is ambiguous (each such place is marked
 * AMBIGUOUS and reported). Effects are compared as tags: the effect type, refined by the
 * message type for `persist_message` (`persist:tool`) and the notification kind for `notify`
 * (`notify:retry_scheduled`).
 *
 * Id conventions the model predicts itself (docs/state-machine.md, "Conventions"): LLM request
 * ids `${conversationId}/llm/${n}` with n = ++llmRequests, allocated when the phase starts to
 * hold the id (a retry allocates the id of the next attempt when it is scheduled), and
 * sub-agent ids `${conversationId}--${spawnToolUseId}--${index}` (index from 0). Timer ids
 * depend on `seq`, whose count through the internal begin_llm_request step the doc leaves
 * open, so the model is handed the id of the timer the implementation scheduled
 * (`freshTimerId`) and checks only that the timer is then honoured.
 *
 * Pure: no I/O, no clocks, no randomness (this folder is linted as pure).
 */
import { toolSetFor } from '@bedrock/contracts/tools';
import { CONTINUATION_THRESHOLD, MAX_PENDING_MESSAGES, WARNING_THRESHOLD } from '../../src/core/constants.ts';
import type {
  ConversationContext,
  ConversationEvent,
  ErrorKind,
  Mode,
  PhaseKind,
  RejectionCode,
  ToolCall,
  Usage,
} from '../../src/core/types.ts';

export type ModelPhase =
  | { readonly kind: 'idle' }
  | { readonly kind: 'error'; readonly errorKind: ErrorKind }
  | { readonly kind: 'context_exhausted' }
  | { readonly kind: 'completed' }
  /** errorKind null: the doc does not fix it. */
  | { readonly kind: 'failed'; readonly errorKind: ErrorKind | null }
  | {
      readonly kind: 'llm_requesting';
      readonly requestId: string;
      readonly attempt: number;
      /** The retry timer while a retry waits; null while the request is in flight. */
      readonly retryTimer: string | null;
      readonly autoContinuations: number;
      /** max_tokens asked for; 0: the default. */
      readonly maxTokens: number;
    }
  | { readonly kind: 'awaiting_continuation'; readonly requestId: string; readonly attempt: number; readonly retryTimer: string | null }
  | { readonly kind: 'cancelling'; readonly requestId: string; readonly timerId: string }
  | { readonly kind: 'tool_executing'; readonly current: ToolCall; readonly remaining: readonly ToolCall[] }
  | {
      readonly kind: 'awaiting_sub_agents';
      readonly spawnToolUseId: string;
      readonly pending: readonly string[];
      readonly timerId: string;
      readonly remaining: readonly ToolCall[];
    }
  | { readonly kind: 'awaiting_mode_approval'; readonly toolUseId: string; readonly remaining: readonly ToolCall[] };

/** A waiting message (docs/state-machine.md, "Delivery modes"): its id and how it is delivered. */
export interface ModelPending {
  readonly id: string;
  readonly delivery: 'queue' | 'steer' | 'interrupt';
}

export interface ModelState {
  readonly phase: ModelPhase;
  readonly mode: Mode;
  /** No transition accepted yet (seq 0): a sub-agent waits for sub_agent_start. */
  readonly fresh: boolean;
  readonly llmRequests: number;
  readonly contextWarned: boolean;
  /** Persisted tool_use ids (agent messages) and tool_result ids (tool messages), in order. */
  readonly toolUses: readonly string[];
  readonly toolResults: readonly string[];
  /** Set once the doc leaves the persisted results of a transition open (sub-agent stopped). */
  readonly resultsUnspecified: boolean;
  /** Accepted transitions so far (pending message ids derive from it). */
  readonly seq: number;
  /** Messages waiting, in arrival order. */
  readonly pending: readonly ModelPending[];
  /** Ids of the waiting messages persisted as user messages, in the order they were. */
  readonly delivered: readonly string[];
}

export type ModelOutcome =
  | { readonly kind: 'noop' }
  /** code '*': any rejection code is acceptable here. */
  | { readonly kind: 'rejected'; readonly code: RejectionCode | '*' }
  | {
      readonly kind: 'accepted';
      readonly next: ModelState;
      /** Effect tags that must appear, as a multiset. */
      readonly effects: readonly string[];
      /** Tags (or prefixes ending in '*') that may appear any number of times. */
      readonly optional: readonly string[];
    };

/** The comparable projection of a state (model or implementation). */
export interface AbstractState {
  readonly phase: PhaseKind;
  readonly mode: Mode;
  readonly attempt: number | null;
  readonly retryPending: boolean;
  /** The LLM request the phase waits for (in flight, aborting, or the next retry's). */
  readonly requestId: string | null;
  /** llm_requesting: the max_tokens it asks for (0: the default). */
  readonly maxTokens: number | null;
  readonly pendingToolIds: readonly string[];
  readonly pendingSubAgents: readonly string[];
  readonly errorKind: ErrorKind | null;
  /** Waiting messages as `delivery:id`, in order. */
  readonly pending: readonly string[];
}

export function initialModel(ctx: ConversationContext): ModelState {
  return {
    phase: { kind: 'idle' },
    mode: ctx.sandboxAvailable ? 'restricted' : 'unrestricted',
    fresh: true,
    llmRequests: 0,
    contextWarned: false,
    toolUses: [],
    toolResults: [],
    resultsUnspecified: false,
    seq: 0,
    pending: [],
    delivered: [],
  };
}

export function abstractModel(s: ModelState): AbstractState {
  const p = s.phase;
  const base = {
    phase: p.kind,
    mode: s.mode,
    attempt: null as number | null,
    retryPending: false,
    requestId: null as string | null,
    maxTokens: null as number | null,
    pendingToolIds: [] as string[],
    pendingSubAgents: [] as string[],
    errorKind: null as ErrorKind | null,
    pending: s.pending.map((m) => `${m.delivery}:${m.id}`),
  };
  switch (p.kind) {
    case 'llm_requesting':
      return { ...base, attempt: p.attempt, retryPending: p.retryTimer !== null, requestId: p.requestId, maxTokens: p.maxTokens };
    case 'awaiting_continuation':
      return { ...base, attempt: p.attempt, retryPending: p.retryTimer !== null, requestId: p.requestId };
    case 'cancelling':
      return { ...base, requestId: p.requestId };
    case 'tool_executing':
      return { ...base, pendingToolIds: [p.current.id, ...p.remaining.map((c) => c.id)] };
    case 'awaiting_sub_agents':
      return { ...base, pendingToolIds: [p.spawnToolUseId, ...p.remaining.map((c) => c.id)], pendingSubAgents: [...p.pending].sort() };
    case 'awaiting_mode_approval':
      return { ...base, pendingToolIds: [p.toolUseId, ...p.remaining.map((c) => c.id)] };
    case 'error':
      return { ...base, errorKind: p.errorKind };
    case 'failed':
      return { ...base, errorKind: p.errorKind };
    default:
      return base;
  }
}

export const BUSY_KINDS: readonly PhaseKind[] = [
  'awaiting_llm',
  'llm_requesting',
  'tool_executing',
  'awaiting_sub_agents',
  'awaiting_mode_approval',
  'awaiting_continuation',
];

const TERMINAL_KINDS: readonly PhaseKind[] = ['context_exhausted', 'completed', 'failed'];
const RUNNER_TOOLS: readonly string[] = ['bash', 'patch', 'keyword_search', 'think'];

export function requestIdOf(ctx: ConversationContext, n: number): string {
  return `${ctx.conversationId}/llm/${n}`;
}

export function subAgentIdOf(ctx: ConversationContext, spawnToolUseId: string, index: number): string {
  return `${ctx.conversationId}--${spawnToolUseId}--${index}`;
}

export function usageTokens(u: Usage): number {
  return u.inputTokens + u.outputTokens + u.cacheCreationInputTokens + u.cacheReadInputTokens;
}

/** The tasks of a valid spawn_agents input (schema: 1..8 objects with a non-empty task), or null. */
export function spawnTasks(input: Readonly<Record<string, unknown>>): string[] | null {
  const tasks = input['tasks'];
  if (!Array.isArray(tasks) || tasks.length < 1 || tasks.length > 8) return null;
  const out: string[] = [];
  for (const t of tasks as unknown[]) {
    if (typeof t !== 'object' || t === null) return null;
    const task = (t as Record<string, unknown>)['task'];
    if (typeof task !== 'string' || task.length === 0) return null;
    out.push(task);
  }
  return out;
}

/** A mutable draft of one accepted transition. */
class Draft {
  phase: ModelPhase;
  mode: Mode;
  llmRequests: number;
  contextWarned: boolean;
  toolUses: string[];
  toolResults: string[];
  resultsUnspecified: boolean;
  pending: ModelPending[];
  delivered: string[];
  readonly seq: number;
  readonly effects: string[] = [];
  readonly optional: string[] = [];

  constructor(
    readonly ctx: ConversationContext,
    s: ModelState,
    readonly freshTimerId: string,
  ) {
    this.phase = s.phase;
    this.mode = s.mode;
    this.llmRequests = s.llmRequests;
    this.contextWarned = s.contextWarned;
    this.toolUses = [...s.toolUses];
    this.toolResults = [...s.toolResults];
    this.resultsUnspecified = s.resultsUnspecified;
    this.pending = [...s.pending];
    this.delivered = [...s.delivered];
    this.seq = s.seq + 1;
  }

  /** Persists the waiting steer and interrupt messages, in order; false when there was none. */
  deliverUrgent(): boolean {
    const urgent = this.pending.filter((m) => m.delivery !== 'queue');
    for (const m of urgent) {
      this.emit('persist:user');
      this.delivered.push(m.id);
    }
    this.pending = this.pending.filter((m) => m.delivery === 'queue');
    return urgent.length > 0;
  }

  emit(...tags: string[]): this {
    this.effects.push(...tags);
    return this;
  }

  allow(...tags: string[]): this {
    this.optional.push(...tags);
    return this;
  }

  nextRequestId(): string {
    this.llmRequests += 1;
    return requestIdOf(this.ctx, this.llmRequests);
  }

  persistResult(id: string): void {
    this.toolResults.push(id);
    this.emit('persist:tool');
  }

  /** The owner's budget is spent (the shell's figure in the context): no LLM request may go out. */
  budgetSpent(): boolean {
    const remaining = this.ctx.remainingBudgetMicros;
    return remaining !== null && remaining <= 0;
  }

  /** "Budget": instead of the request, an error message and notification; error budget_exhausted (S: failed). */
  stopForBudget(): void {
    this.emit('persist:error', 'notify:error');
    if (this.ctx.isSubAgent) this.fail('budget_exhausted');
    else this.phase = { kind: 'error', errorKind: 'budget_exhausted' };
  }

  /** → LLM: llm_requesting{attempt 1} + request_llm; with the budget spent, the turn stops instead. */
  toLlm(autoContinuations = 0, maxTokens = 0): void {
    if (this.budgetSpent()) return this.stopForBudget();
    this.phase = { kind: 'llm_requesting', requestId: this.nextRequestId(), attempt: 1, retryTimer: null, autoContinuations, maxTokens };
    this.emit('request_llm');
  }

  /** Starts the calls in order: immediate results are persisted and the next one starts at once. */
  runCalls(calls: readonly ToolCall[]): void {
    const tools: readonly string[] = toolSetFor(this.ctx);
    for (let i = 0; i < calls.length; i++) {
      const call = calls[i]!;
      const rest = calls.slice(i + 1);
      if (!tools.includes(call.name)) {
        this.persistResult(call.id);
        continue;
      }
      if (call.name === 'patch' && this.mode === 'restricted') {
        this.persistResult(call.id);
        continue;
      }
      if (RUNNER_TOOLS.includes(call.name)) {
        this.emit('execute_tool');
        this.phase = { kind: 'tool_executing', current: call, remaining: rest };
        return;
      }
      if (call.name === 'request_mode_upgrade') {
        if (this.mode === 'unrestricted') {
          this.persistResult(call.id);
          continue;
        }
        this.emit('notify:mode_upgrade_requested');
        this.phase = { kind: 'awaiting_mode_approval', toolUseId: call.id, remaining: rest };
        return;
      }
      if (call.name === 'spawn_agents') {
        const tasks = spawnTasks(call.input);
        if (tasks === null) {
          this.persistResult(call.id);
          continue;
        }
        for (let k = 0; k < tasks.length; k++) this.emit('spawn_sub_agent');
        this.emit('schedule_timer');
        this.phase = {
          kind: 'awaiting_sub_agents',
          spawnToolUseId: call.id,
          pending: tasks.map((_, k) => subAgentIdOf(this.ctx, call.id, k)),
          timerId: this.freshTimerId,
          remaining: rest,
        };
        return;
      }
      if (call.name === 'submit_result') {
        this.persistResult(call.id);
        for (const r of rest) this.persistResult(r.id);
        this.emit('notify_parent');
        this.phase = { kind: 'completed' };
        return;
      }
      // A name in the tool set that none of the rows covers: not reachable with contracts' tools.
      this.persistResult(call.id);
    }
    // A tool boundary: steering messages join the user turn of the results.
    this.deliverUrgent();
    this.toLlm();
  }

  /** A sub-agent fails: P never gets here. */
  fail(errorKind: ErrorKind | null): void {
    this.phase = { kind: 'failed', errorKind };
    this.emit('notify_parent');
  }

  done(): ModelOutcome {
    // At rest with messages waiting: the urgent ones together, else the first queued one (not
    // while the budget is spent: they wait).
    if (
      !this.ctx.isSubAgent &&
      (this.phase.kind === 'idle' || this.phase.kind === 'error') &&
      this.pending.length > 0 &&
      !this.budgetSpent()
    ) {
      if (!this.deliverUrgent()) {
        this.emit('persist:user');
        this.delivered.push(this.pending.shift()!.id);
      }
      this.toLlm();
    }
    return {
      kind: 'accepted',
      next: {
        phase: this.phase,
        mode: this.mode,
        fresh: false,
        llmRequests: this.llmRequests,
        contextWarned: this.contextWarned,
        toolUses: this.toolUses,
        toolResults: this.toolResults,
        resultsUnspecified: this.resultsUnspecified,
        seq: this.seq,
        pending: this.pending,
        delivered: this.delivered,
      },
      effects: this.effects,
      optional: this.optional,
    };
  }
}

const NOOP: ModelOutcome = { kind: 'noop' };
const reject = (...codes: (RejectionCode | '*')[]): ModelOutcome[] => codes.map((code) => ({ kind: 'rejected', code }));
/** AMBIGUOUS: context_exhausted is "absorbing: anything else is a no-op", yet user actions elsewhere reject. */
const EXHAUSTED_USER_ACTION: ModelOutcome[] = [NOOP, { kind: 'rejected', code: '*' }];

function isUserAction(type: ConversationEvent['type']): boolean {
  return type.startsWith('user_');
}

/**
 * Every outcome the doc allows for `event` in model state `s`. `freshTimerId` is the id of the
 * timer the implementation scheduled in this transition, if any (see the header).
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

function onResponse(
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
