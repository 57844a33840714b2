/**
 * The next state under construction (`Draft`) and what every handler of the transition
 * shares: the outcome of a handler (`NOOP`, a rejection or done) and small result helpers.
 */
import type {
  ContentBlock,
  ConversationContext,
  ConversationEvent,
  ConversationState,
  Effect,
  MessageType,
  Mode,
  NewMessage,
  Notification,
  PendingMessage,
  Phase,
  Rejection,
  ToolResult,
  Usage,
} from './types.ts';

type EffectBody = Effect extends infer E ? (E extends Effect ? Omit<E, 'id'> : never) : never;

/**
 * Speed: the hot paths copy a few objects field by field instead of with a spread
 * (`{ ...phase, retry }`, `{ type, ...result }`). The objects reaching them have many shapes
 * (made by different code paths, or parsed from storage and events), and V8 runs such spreads
 * on a generic slow path; a literal is several times faster (docs/state-machine.md,
 * "Performance"). Fields are written in the types' order, so the stored JSON is unchanged.
 * `Copies<T, K>` is `true` only if K names every field of T: each written-out copy has a
 * `_…Copied` constant of it, beside the copy, so a field added to T later fails to compile
 * there instead of being dropped silently (a spread would have copied it).
 */
export type Copies<T, K extends keyof T> = [Exclude<keyof T, K>] extends [never] ? true : never;
type Mutable<T> = { -readonly [K in keyof T]: T[K] };
type ToolResultBlock = Extract<ContentBlock, { type: 'tool_result' }>;
const _toolResultCopied: Copies<ToolResult, 'toolUseId' | 'content' | 'isError' | 'cancelled' | 'display'> = true;

export const NOOP = Symbol('noop');
export type Outcome = typeof NOOP | Rejection | void;

const NO_PENDING: readonly PendingMessage[] = [];

/** The next state under construction, and the effects it asks for. */
export class Draft {
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

export type LlmResponseEvent = Extract<ConversationEvent, { type: 'llm_response' }>;
export type LlmErrorEvent = Extract<ConversationEvent, { type: 'llm_error' }>;

/** The end of an exhaustive `switch`: a member added to the union fails to compile at the call. */
export function unhandled(event: never): never {
  throw new Error(`no transition handles the event ${JSON.stringify(event)}`);
}

export function synthetic(toolUseId: string, content: string): ToolResult {
  return { toolUseId, content, isError: true, cancelled: true };
}

export function errorResult(toolUseId: string, content: string): ToolResult {
  return { toolUseId, content, isError: true };
}

export function textOf(content: readonly ContentBlock[]): string {
  return content.map((b) => (b.type === 'text' ? b.text : '')).join('');
}
