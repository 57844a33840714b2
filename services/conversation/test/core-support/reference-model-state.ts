/**
 * The reference model's state, its outcomes, the abstract projection of a state that the
 * model-based test compares (model or implementation), and the ids the model predicts itself
 * (reference-model.ts holds the rules). Pure: no I/O, no clocks, no randomness (this folder is
 * linted as pure).
 */
import type { ConversationContext, ErrorKind, Mode, PhaseKind, RejectionCode, ToolCall, Usage } from '../../src/core/types.ts';

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

/**
 * The model keeps only what the rules depend on: the phase kind and the ids each phase waits for,
 * the mode, the attempt, the pending tool calls and sub-agents, and which tool_use /
 * tool_result ids were persisted.
 */
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

/**
 * For each event the model returns the outcomes the doc allows: usually exactly one; several
 * where the doc is ambiguous (each such place is marked AMBIGUOUS and reported). Effects are
 * compared as tags: the effect type, refined by the message type for `persist_message`
 * (`persist:tool`) and the notification kind for `notify` (`notify:retry_scheduled`).
 */
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

/**
 * Id conventions the model predicts itself (docs/state-machine.md, "Conventions"): LLM request
 * ids `${conversationId}/llm/${n}` with n = ++llmRequests, allocated when the phase starts to
 * hold the id (a retry allocates the id of the next attempt when it is scheduled), and
 * sub-agent ids `${conversationId}--${spawnToolUseId}--${index}` (index from 0).
 */
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
