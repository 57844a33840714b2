/**
 * The pure transition function (REQ-BED-001). docs/state-machine.md is its specification;
 * each handler below names the rows it implements.
 */
import {
  PATCH_RESTRICTED_ERROR,
  TOOLS,
  isConversationToolName,
  isToolName,
  toolSetFor,
  type ConversationToolName,
  type ToolName,
} from '@bedrock/contracts/tools';
import { isMcpToolName, mcpServerOf } from '@bedrock/contracts/mcp';
import {
  ALREADY_UNRESTRICTED,
  CANCELLED_CURRENT,
  CANCELLED_SKIPPED,
  CONTINUATION_CANCELLED_SUMMARY,
  BUDGET_EXHAUSTED_MESSAGE,
  CONTINUATION_FALLBACK_SUMMARY,
  CONTINUATION_THRESHOLD,
  LOST_RESULT,
  MAX_PENDING_IMAGE_CHARS,
  MAX_PENDING_MESSAGES,
  MAX_TOKENS_NOTICE,
  MODE_NOTICE_RESTRICTED,
  MODE_NOTICE_UNRESTRICTED,
  NOT_EXECUTED_CONTEXT,
  PAUSE_TURN_NOTICE,
  UPGRADE_APPROVED,
  UPGRADE_DENIED,
  WARNING_THRESHOLD,
  cutToolNotice,
  refusalMessage,
  rejection,
} from './constants.ts';
import { addUsage, contextTokens, ZERO_USAGE } from './usage.ts';
import type {
  ContentBlock,
  ConversationContext,
  ConversationEvent,
  ConversationState,
  DeliveryMode,
  Effect,
  ErrorKind,
  ImageInput,
  MessageType,
  Mode,
  NewMessage,
  Notification,
  PendingMessage,
  Phase,
  Rejection,
  SubAgentOutcome,
  ToolCall,
  ToolResult,
  TransitionResult,
  Usage,
} from './types.ts';

/** The matrix's internal "AwaitingLlm → LlmRequesting" step. */
export interface BeginLlmRequest {
  readonly type: 'begin_llm_request';
}
export type StepEvent = ConversationEvent | BeginLlmRequest;

type EffectBody = Effect extends infer E ? (E extends Effect ? Omit<E, 'id'> : never) : never;

/**
 * Speed: the hot paths copy a few objects field by field instead of with a spread
 * (`{ ...phase, retry }`, `{ type, ...result }`). The objects reaching them have many shapes
 * (made by different code paths, or parsed from storage and events), and V8 runs such spreads
 * on a generic slow path; a literal is several times faster (docs/state-machine.md,
 * "Performance"). Fields are written in the types' order, so the stored JSON is unchanged.
 * `Copies<T, K>` is `true` only if K names every field of T: each written-out copy has a
 * `_…Copied` constant of it, so a field added to T later fails to compile here instead of
 * being dropped silently (a spread would have copied it).
 */
type Copies<T, K extends keyof T> = [Exclude<keyof T, K>] extends [never] ? true : never;
type Mutable<T> = { -readonly [K in keyof T]: T[K] };
type ToolResultBlock = Extract<ContentBlock, { type: 'tool_result' }>;
type RequestPhase = Extract<Phase, { kind: 'llm_requesting' | 'awaiting_continuation' }>;
type AwaitingSubAgents = Extract<Phase, { kind: 'awaiting_sub_agents' }>;
const _toolResultCopied: Copies<ToolResult, 'toolUseId' | 'content' | 'isError' | 'cancelled' | 'display'> = true;
const _llmRequestingCopied: Copies<
  Extract<Phase, { kind: 'llm_requesting' }>,
  'kind' | 'requestId' | 'attempt' | 'retry' | 'autoContinuations' | 'maxTokens'
> = true;
const _awaitingContinuationCopied: Copies<
  Extract<Phase, { kind: 'awaiting_continuation' }>,
  'kind' | 'requestId' | 'attempt' | 'retry' | 'rejectedToolCalls' | 'triggerUsage'
> = true;
const _awaitingSubAgentsCopied: Copies<
  AwaitingSubAgents,
  'kind' | 'spawnToolUseId' | 'agents' | 'pending' | 'outcomes' | 'timerId' | 'remaining' | 'completed' | 'total'
> = true;

const NOOP = Symbol('noop');
type Outcome = typeof NOOP | Rejection | void;

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

const NO_PENDING: readonly PendingMessage[] = [];

/** The next state under construction, and the effects it asks for. */
class Draft {
  phase: Phase;
  mode: Mode;
  llmRequests: number;
  lastUsage: Usage | null;
  totalUsage: Usage;
  contextWarned: boolean;
  pending: readonly PendingMessage[];
  readonly seq: number;
  private readonly idPrefix: string;
  private readonly bodies: EffectBody[] = [];
  private timers = 0;

  constructor(
    readonly prev: ConversationState,
    readonly ctx: ConversationContext,
  ) {
    this.phase = prev.phase;
    this.mode = prev.mode;
    this.llmRequests = prev.llmRequests;
    this.lastUsage = prev.lastUsage;
    this.totalUsage = prev.totalUsage;
    this.contextWarned = prev.contextWarned;
    this.pending = prev.pending ?? NO_PENDING;
    this.seq = prev.seq + 1;
    this.idPrefix = `${ctx.conversationId}/${this.seq}/`;
  }

  /** `body` is always a literal made at the call site, so it becomes the effect itself (no copy). */
  emit(body: EffectBody): void {
    (body as { id?: string }).id = this.idPrefix + this.bodies.length;
    this.bodies.push(body);
  }
  notify(notification: Notification): void {
    this.emit({ type: 'notify', notification });
  }
  persist(type: MessageType, content: readonly ContentBlock[], usage?: Usage): void {
    this.emit({ type: 'persist_message', message: usage ? { type, content, usage } : { type, content } });
  }
  /** The model's response as an agent message, with why it ended (and a refusal's explanation). */
  persistAgent(event: LlmResponseEvent, stopExplanation = ''): void {
    const { content, usage, stopReason } = event;
    const message: NewMessage = stopExplanation
      ? { type: 'agent', content, usage, stopReason, stopExplanation }
      : { type: 'agent', content, usage, stopReason };
    this.emit({ type: 'persist_message', message });
  }
  notice(text: string): void {
    this.persist('system', [{ type: 'text', text }]);
  }
  /** `{ type: 'tool_result', ...result }` written out (see `Copies`); an optional field only when present. */
  persistResult(result: ToolResult): void {
    const { toolUseId, content, isError, cancelled, display } = result;
    const block: Mutable<ToolResultBlock> = { type: 'tool_result', toolUseId, content, isError };
    if (cancelled !== undefined) block.cancelled = cancelled;
    if (display !== undefined) block.display = display;
    this.persist('tool', [block]);
  }
  newRequestId(): string {
    this.llmRequests += 1;
    return `${this.ctx.conversationId}/llm/${this.llmRequests}`;
  }
  newTimerId(): string {
    const k = this.timers++;
    return `${this.ctx.conversationId}/timer/${this.seq}${k ? `.${k}` : ''}`;
  }
  state(): ConversationState {
    const state: Mutable<ConversationState> = {
      phase: this.phase,
      mode: this.mode,
      seq: this.seq,
      llmRequests: this.llmRequests,
      lastUsage: this.lastUsage,
      totalUsage: this.totalUsage,
      contextWarned: this.contextWarned,
    };
    // Only when something waits: the stored JSON of every other state is unchanged.
    if (this.pending.length > 0) state.pending = this.pending;
    return state;
  }
  effects(): Effect[] {
    return this.bodies as Effect[];
  }
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
      return onUserMessage(d, event.text, event.images, event.delivery ?? 'reject');
    case 'user_cancel_queued':
      return onCancelQueued(d, event.queuedId);
    case 'user_cancel':
      return onUserCancel(d);
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

function unhandled(event: never): never {
  throw new Error(`no transition handles the event ${JSON.stringify(event)}`);
}

// ---- user actions ----------------------------------------------------------------------

function onUserMessage(d: Draft, text: string, images: readonly ImageInput[], delivery: DeliveryMode): Outcome {
  if (d.ctx.isSubAgent) return rejection('sub_agent_driven_by_parent');
  if (text.trim() === '' && images.length === 0) return rejection('empty_message');
  switch (d.phase.kind) {
    case 'idle':
    case 'error':
      // At rest every delivery mode sends at once.
      persistUser(d, text, images);
      d.phase = { kind: 'awaiting_llm' };
      return;
    case 'cancelling':
      // A cancel is already under way: interrupt waits for it like the others.
      if (delivery === 'reject') return rejection('cancellation_in_progress');
      return enqueue(d, delivery, text, images);
    case 'awaiting_continuation':
      // The conversation ends in context_exhausted: a waiting message could never be delivered.
      return rejection('agent_busy');
    default: {
      if (delivery === 'reject') return rejection('agent_busy');
      const refused = enqueue(d, delivery, text, images);
      if (refused) return refused;
      // Cancel; when that leaves the conversation idle at once, run() delivers the message.
      if (delivery === 'interrupt') return onUserCancel(d);
      return;
    }
  }
}

function persistUser(d: Draft, text: string, images: readonly ImageInput[]): void {
  const content: ContentBlock[] = [];
  if (text.trim() !== '') content.push({ type: 'text', text });
  for (const image of images) content.push({ type: 'image', mediaType: image.mediaType, data: image.data });
  d.persist('user', content);
}

/** The id of the message a transition puts in the pending list. */
export function pendingMessageId(conversationId: string, seq: number): string {
  return `${conversationId}/q/${seq}`;
}

function enqueue(d: Draft, delivery: PendingMessage['delivery'], text: string, images: readonly ImageInput[]): Outcome {
  if (d.pending.length >= MAX_PENDING_MESSAGES) return rejection('queue_full');
  let chars = 0;
  for (const m of d.pending) for (const image of m.images) chars += image.data.length;
  for (const image of images) chars += image.data.length;
  if (images.length > 0 && chars > MAX_PENDING_IMAGE_CHARS) return rejection('queue_full');
  d.pending = [...d.pending, { id: pendingMessageId(d.ctx.conversationId, d.seq), delivery, text, images }];
  return;
}

function onCancelQueued(d: Draft, queuedId: string): Outcome {
  if (d.ctx.isSubAgent) return rejection('sub_agent_driven_by_parent');
  const rest = d.pending.filter((m) => m.id !== queuedId);
  if (rest.length === d.pending.length) return rejection('not_queued');
  d.pending = rest;
  return;
}

/**
 * The turn came to rest (idle or error) with messages waiting: the urgent ones (steer,
 * interrupt) go out together as the next user turn, in the order they arrived; else the first
 * queued message. What stays waits for the end of that turn.
 */
function deliverAtRest(d: Draft): void {
  if (!deliverUrgent(d)) {
    const [first, ...rest] = d.pending;
    persistUser(d, first!.text, first!.images);
    d.pending = rest;
  }
  d.phase = { kind: 'awaiting_llm' };
}

/** Persists every steer and interrupt message, in order; false when there was none. */
function deliverUrgent(d: Draft): boolean {
  let delivered = false;
  const kept: PendingMessage[] = [];
  for (const m of d.pending) {
    if (m.delivery === 'queue') {
      kept.push(m);
    } else {
      persistUser(d, m.text, m.images);
      delivered = true;
    }
  }
  if (delivered) d.pending = kept;
  return delivered;
}

function onUserCancel(d: Draft): Outcome {
  const phase = d.phase;
  if (d.ctx.isSubAgent) {
    // A person may stop a sub-agent; its parent then sees a failure it can handle.
    stopWork(d, CANCELLED_CURRENT, CANCELLED_SKIPPED);
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
      stopWork(d, CANCELLED_CURRENT, CANCELLED_SKIPPED);
      d.phase = { kind: 'idle' };
      return;
  }
}

function onUpgradeAnswer(d: Draft, approve: boolean): Outcome {
  const phase = d.phase;
  if (phase.kind !== 'awaiting_mode_approval') return rejection('no_pending_upgrade');
  // A denial is an answer, not a failure: the agent goes on in Restricted mode (REQ-BED-015).
  const answer: ToolResult = { toolUseId: phase.toolUseId, content: approve ? UPGRADE_APPROVED : UPGRADE_DENIED, isError: false };
  d.persistResult(answer);
  if (approve) changeMode(d, 'unrestricted');
  runTools(d, phase.remaining, [...phase.completed, answer], phase.total);
  return;
}

function onDowngrade(d: Draft): Outcome {
  if (d.ctx.isSubAgent) return rejection('sub_agent_mode_fixed');
  if (!d.ctx.sandboxAvailable) return rejection('sandbox_unavailable');
  if (d.mode === 'restricted') return rejection('already_restricted');
  changeMode(d, 'restricted');
  return;
}

function changeMode(d: Draft, mode: Mode): void {
  const notice = mode === 'unrestricted' ? MODE_NOTICE_UNRESTRICTED : MODE_NOTICE_RESTRICTED;
  d.mode = mode;
  d.persist('system', [{ type: 'text', text: notice }]);
  d.notify({ kind: 'mode_changed', mode, notice });
}

function onTriggerContinuation(d: Draft): Outcome {
  if (d.ctx.isSubAgent) return rejection('continuation_unavailable');
  if (d.phase.kind !== 'idle' && d.phase.kind !== 'error') return rejection('continuation_unavailable');
  requestContinuation(d, [], d.lastUsage ?? ZERO_USAGE);
  return;
}

// ---- LLM -------------------------------------------------------------------------------

/** A new request of the turn; `maxTokens` 0 asks for the service's default. */
function beginLlm(d: Draft, autoContinuations: number, maxTokens = 0): void {
  if (budgetSpent(d)) return stopForBudget(d);
  const requestId = d.newRequestId();
  d.phase = { kind: 'llm_requesting', requestId, attempt: 1, retry: null, autoContinuations, maxTokens };
  d.emit({ type: 'request_llm', requestId, attempt: 1, purpose: 'turn', toolNames: toolNames(d), rejectedToolCalls: [], maxTokens });
}

function toolNames(d: Draft): readonly ToolName[] {
  return toolSetFor({ isSubAgent: d.ctx.isSubAgent, sandboxAvailable: d.ctx.sandboxAvailable });
}

/**
 * `available.join(', ')`, joined once per tool set: toolSetFor returns one of a few constant
 * lists, and the model's calls to unknown tools are common enough to show in the profile.
 */
const toolLists = new Map<readonly ToolName[], string>();
function toolList(available: readonly ToolName[]): string {
  let list = toolLists.get(available);
  if (list === undefined) toolLists.set(available, (list = available.join(', ')));
  return list;
}

function requestContinuation(d: Draft, rejectedToolCalls: readonly ToolCall[], triggerUsage: Usage): void {
  if (budgetSpent(d)) return stopForBudget(d);
  const requestId = d.newRequestId();
  d.phase = { kind: 'awaiting_continuation', requestId, attempt: 1, retry: null, rejectedToolCalls, triggerUsage };
  d.emit({ type: 'request_llm', requestId, attempt: 1, purpose: 'continuation', toolNames: toolNames(d), rejectedToolCalls, maxTokens: 0 });
}

type LlmResponseEvent = Extract<ConversationEvent, { type: 'llm_response' }>;
type LlmErrorEvent = Extract<ConversationEvent, { type: 'llm_error' }>;

function inFlight(phase: Phase, requestId: string): boolean {
  return (
    (phase.kind === 'llm_requesting' || phase.kind === 'awaiting_continuation') && phase.requestId === requestId && phase.retry === null
  );
}

/**
 * Any answer to the request being cancelled (response, error or the abort acknowledgement)
 * ends Cancelling. REQ-BED-005: no tool it asked for runs and nothing the model would take for
 * a whole answer is kept — but the text the user already saw stream is: it is persisted as an
 * agent message of its text alone, stop reason `cancelled`, so every client shows it (marked
 * cancelled) rather than losing it. The abort acknowledgement carries that text; a response
 * that completed before the abort took effect gives its text blocks.
 */
function onCancelledAnswer(d: Draft, phase: Extract<Phase, { kind: 'cancelling' }>, event: LlmResponseEvent | LlmErrorEvent): Outcome {
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

function onLlmResponse(d: Draft, event: LlmResponseEvent): Outcome {
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

function onLlmError(d: Draft, event: LlmErrorEvent): Outcome {
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

function onTimer(d: Draft, timerId: string): Outcome {
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

// ---- tools -----------------------------------------------------------------------------

function onToolComplete(d: Draft, result: ToolResult): Outcome {
  const phase = d.phase;
  if (phase.kind !== 'tool_executing' || phase.current.id !== result.toolUseId) return NOOP;
  d.persistResult(result);
  runTools(d, phase.remaining, [...phase.completed, result], phase.total);
  return;
}

/**
 * Starts tool calls in order until one has to wait for someone else (a runner, the user,
 * sub-agents) or the conversation ends; when none is left the turn goes back to the model.
 * `done` is a new array the caller hands over (every caller builds it for this call): results
 * known at once are appended to it, and it becomes the next phase's `completed` without a copy.
 */
function runTools(d: Draft, calls: readonly ToolCall[], done: ToolResult[], total: number): void {
  for (let i = 0; i < calls.length; i++) {
    const call = calls[i]!;
    const remaining = calls.slice(i + 1);
    const immediate = startTool(d, call, remaining, done, total);
    if (immediate === null) return;
    d.persistResult(immediate);
    done.push(immediate);
  }
  // A tool boundary: steering messages join the user turn that carries the results.
  if (d.pending.length > 0) deliverUrgent(d);
  d.phase = { kind: 'awaiting_llm' };
}

/** Starts one call: returns its result when it is known at once, or null when the phase now waits. */
function startTool(
  d: Draft,
  call: ToolCall,
  remaining: readonly ToolCall[],
  completed: readonly ToolResult[],
  total: number,
): ToolResult | null {
  const available = toolNames(d);
  // An MCP tool (`mcp__<server>__<tool>`) runs on a tool-runner, which knows the server's tools
  // and decides, from their annotations and the mode, whether it may run (docs/mcp.md).
  if (isMcpToolName(call.name) && mcpServerOf(call.name) !== undefined) {
    d.emit({ type: 'execute_tool', toolUseId: call.id, name: call.name, input: call.input, mode: d.mode });
    d.phase = { kind: 'tool_executing', current: call, remaining, completed, total };
    return null;
  }
  if (!isToolName(call.name) || !available.includes(call.name)) {
    return errorResult(call.id, `Unknown tool: ${call.name}. Available tools: ${toolList(available)}.`);
  }
  if (isConversationToolName(call.name)) return answerHere(d, call.name, call, remaining, completed, total);
  if (call.name === 'patch' && d.mode === 'restricted') return errorResult(call.id, PATCH_RESTRICTED_ERROR);
  // Every other registry tool runs on a tool-runner.
  d.emit({ type: 'execute_tool', toolUseId: call.id, name: call.name, input: call.input, mode: d.mode });
  d.phase = { kind: 'tool_executing', current: call, remaining, completed, total };
  return null;
}

/** A tool the state machine answers itself (`executor: 'conversation'` in the registry). */
function answerHere(
  d: Draft,
  name: ConversationToolName,
  call: ToolCall,
  remaining: readonly ToolCall[],
  completed: readonly ToolResult[],
  total: number,
): ToolResult | null {
  switch (name) {
    case 'request_mode_upgrade': {
      if (d.mode === 'unrestricted') return errorResult(call.id, ALREADY_UNRESTRICTED);
      const reason = typeof call.input.reason === 'string' ? call.input.reason.trim() : '';
      if (!reason) return errorResult(call.id, 'request_mode_upgrade needs a non-empty "reason" string.');
      d.notify({ kind: 'mode_upgrade_requested', toolUseId: call.id, reason });
      d.phase = { kind: 'awaiting_mode_approval', toolUseId: call.id, reason, remaining, completed, total };
      return null;
    }
    case 'spawn_agents':
      return spawnAgents(d, call, remaining, completed, total);
    case 'submit_result': {
      const result = typeof call.input.result === 'string' ? call.input.result : JSON.stringify(call.input.result ?? '');
      const success = typeof call.input.success === 'boolean' ? call.input.success : true;
      d.persistResult({ toolUseId: call.id, content: 'Result submitted.', isError: false });
      for (const skipped of remaining) {
        d.persistResult(synthetic(skipped.id, 'Skipped: the result was already submitted.'));
      }
      d.phase = { kind: 'completed', result, success };
      d.emit({
        type: 'notify_parent',
        parentId: d.ctx.parentId ?? '',
        outcome: { agentId: d.ctx.conversationId, task: '', success, result },
      });
      return null;
    }
    default:
      // Every conversation tool is answered above: one added to the registry fails to compile here.
      return unhandled(name);
  }
}

function spawnAgents(
  d: Draft,
  call: ToolCall,
  remaining: readonly ToolCall[],
  completed: readonly ToolResult[],
  total: number,
): ToolResult | null {
  const tasks = parseTasks(call.input.tasks);
  if (typeof tasks === 'string') return errorResult(call.id, tasks);
  // REQ-BED-018 (docs/design.md resolution 1): Restricted whenever the sandbox exists.
  const mode: Mode = d.ctx.sandboxAvailable ? 'restricted' : 'unrestricted';
  const agents = tasks.map((task, index) => ({ agentId: `${d.ctx.conversationId}--${call.id}--${index}`, task }));
  agents.forEach((agent, index) =>
    d.emit({ type: 'spawn_sub_agent', agentId: agent.agentId, task: agent.task, mode, spawnToolUseId: call.id, index }),
  );
  const timerId = d.newTimerId();
  d.emit({ type: 'schedule_timer', timerId, delayMs: d.ctx.policy.subAgentTimeoutMs, purpose: 'sub_agent_timeout' });
  d.phase = {
    kind: 'awaiting_sub_agents',
    spawnToolUseId: call.id,
    agents,
    pending: agents.map((a) => a.agentId),
    outcomes: [],
    timerId,
    remaining,
    completed,
    total,
  };
  return null;
}

const MAX_SUB_AGENTS = TOOLS.spawn_agents.inputSchema.properties?.tasks?.maxItems ?? 8;

function parseTasks(value: unknown): string[] | string {
  const expected = `spawn_agents needs "tasks": a list of 1 to ${MAX_SUB_AGENTS} objects like {"task": "..."}.`;
  if (!Array.isArray(value) || value.length === 0 || value.length > MAX_SUB_AGENTS) return expected;
  const tasks: string[] = [];
  for (const item of value) {
    const task = typeof item === 'string' ? item : item && typeof item === 'object' ? (item as { task?: unknown }).task : undefined;
    if (typeof task !== 'string' || task.trim() === '') return expected;
    tasks.push(task);
  }
  return tasks;
}

function onSubAgentResult(d: Draft, outcome: SubAgentOutcome): Outcome {
  const phase = d.phase;
  if (phase.kind !== 'awaiting_sub_agents' || !phase.pending.includes(outcome.agentId)) return NOOP;
  const task = phase.agents.find((a) => a.agentId === outcome.agentId)?.task ?? outcome.task;
  // `{ ...outcome, task }` written out (see `Copies`).
  const { agentId, success, result, errorKind } = outcome;
  const outcomes = [
    ...phase.outcomes,
    errorKind === undefined ? { agentId, task, success, result } : { agentId, task, success, result, errorKind },
  ];
  const pending = phase.pending.filter((id) => id !== agentId);
  d.notify({
    kind: 'sub_agent_progress',
    agentId: outcome.agentId,
    task,
    success: outcome.success,
    result: outcome.result,
    finishedCount: outcomes.length,
    totalCount: phase.agents.length,
  });
  if (pending.length > 0) {
    // `{ ...phase, pending, outcomes }` written out (see `Copies`).
    const { spawnToolUseId, agents, timerId, remaining, completed, total } = phase;
    d.phase = { kind: 'awaiting_sub_agents', spawnToolUseId, agents, pending, outcomes, timerId, remaining, completed, total };
    return;
  }
  d.emit({ type: 'cancel_timer', timerId: phase.timerId });
  finishSubAgents(d, phase, outcomes);
  return;
}

/** Every spawned agent is accounted for: aggregate, answer spawn_agents, go on (REQ-BED-008). */
function finishSubAgents(d: Draft, phase: AwaitingSubAgents, outcomes: readonly SubAgentOutcome[]): void {
  const result: ToolResult = {
    toolUseId: phase.spawnToolUseId,
    content: formatOutcomes(phase.agents, outcomes),
    isError: outcomes.every((o) => !o.success),
  };
  d.persistResult(result);
  runTools(d, phase.remaining, [...phase.completed, result], phase.total);
}

export function formatOutcomes(agents: readonly { agentId: string; task: string }[], outcomes: readonly SubAgentOutcome[]): string {
  let failed = 0;
  for (const o of outcomes) if (!o.success) failed++;
  let text = `Sub-agent results: ${agents.length} spawned, ${agents.length - failed} succeeded, ${failed} failed.`;
  for (let i = 0; i < agents.length; i++) {
    const agent = agents[i]!;
    let outcome: SubAgentOutcome | undefined;
    for (const o of outcomes) {
      if (o.agentId === agent.agentId) {
        outcome = o;
        break;
      }
    }
    const status = !outcome ? 'NO RESULT' : outcome.success ? 'succeeded' : outcome.errorKind ? `FAILED (${outcome.errorKind})` : 'FAILED';
    text += `\n\n## Agent ${i + 1} (${agent.agentId}): ${status}\nTask: ${agent.task}\nResult: ${outcome ? outcome.result : ''}`;
  }
  return text;
}

// ---- cancellation, failure, recovery ---------------------------------------------------

/**
 * Stops whatever the phase has in flight and answers every tool call it still owes, so the
 * tool_use/tool_result chain stays valid (REQ-BED-005). Leaves the phase for the caller to set.
 */
function stopWork(d: Draft, currentText: string, skippedText: string): void {
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
    case 'tool_executing':
      d.emit({ type: 'kill_tool', toolUseId: phase.current.id });
      d.persistResult(synthetic(phase.current.id, currentText));
      for (const call of phase.remaining) d.persistResult(synthetic(call.id, skippedText));
      return;
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

function onWorkLost(d: Draft): Outcome {
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

function failSubAgent(d: Draft, error: string, errorKind: ErrorKind): void {
  d.phase = { kind: 'failed', error, errorKind };
  d.emit({
    type: 'notify_parent',
    parentId: d.ctx.parentId ?? '',
    outcome: { agentId: d.ctx.conversationId, task: '', success: false, result: error, errorKind },
  });
}

/** The owner's budget is spent (the shell's figure for this event): no LLM request may go out. */
function budgetSpent(d: Draft): boolean {
  const remaining = d.ctx.remainingBudgetMicros;
  return remaining !== null && remaining !== undefined && remaining <= 0;
}

/**
 * The boundary where a turn stops for its budget: instead of the next LLM request (every tool
 * of the turn is answered by then: requests are only made once the results are in). An error
 * message and notification, then `error` (budget_exhausted), or a failed sub-agent.
 */
function stopForBudget(d: Draft): void {
  d.persist('error', [{ type: 'text', text: BUDGET_EXHAUSTED_MESSAGE }]);
  d.notify({ kind: 'error', message: BUDGET_EXHAUSTED_MESSAGE, errorKind: 'budget_exhausted' });
  if (d.ctx.isSubAgent) failSubAgent(d, BUDGET_EXHAUSTED_MESSAGE, 'budget_exhausted');
  else d.phase = { kind: 'error', message: BUDGET_EXHAUSTED_MESSAGE, errorKind: 'budget_exhausted' };
}

function exhaust(d: Draft, summary: string, finalUsage: Usage): void {
  d.phase = { kind: 'context_exhausted', summary, finalUsage };
  d.persist('continuation', [{ type: 'text', text: summary }]);
  d.notify({ kind: 'context_exhausted', summary });
}

// ---- small helpers ---------------------------------------------------------------------

function synthetic(toolUseId: string, content: string): ToolResult {
  return { toolUseId, content, isError: true, cancelled: true };
}

function errorResult(toolUseId: string, content: string): ToolResult {
  return { toolUseId, content, isError: true };
}

function textOf(content: readonly ContentBlock[]): string {
  return content.map((b) => (b.type === 'text' ? b.text : '')).join('');
}
