/**
 * Test helpers for the state-machine tests (matrix and model-based): contexts, event
 * builders, and a driver that reaches states by sending events from `initialState`, so the
 * tests do not hand-write internal state. Pure (this folder is linted as pure).
 */
import { initialState, makeContext, transition, step, type ContextInit } from '../../src/core/index.ts';
import type {
  ContentBlock,
  ConversationContext,
  ConversationEvent,
  ConversationState,
  DeliveryMode,
  Effect,
  ErrorKind,
  StopReason,
  ToolCall,
  TransitionResult,
  Usage,
} from '../../src/core/types.ts';

export const CID = 'conv1';
export const PARENT_ID = 'parent1';
/** A small window so token counts read as per-mille: 800 = 80%, 900 = 90%. */
export const WINDOW = 1000;

export function parentCtx(over: Partial<ContextInit> = {}): ConversationContext {
  return makeContext({ conversationId: CID, contextWindow: WINDOW, maxOutputTokens: OUTPUT_LIMIT, ...over });
}
export function noSandboxCtx(over: Partial<ContextInit> = {}): ConversationContext {
  return makeContext({ conversationId: CID, contextWindow: WINDOW, maxOutputTokens: OUTPUT_LIMIT, sandboxAvailable: false, ...over });
}
export function subCtx(over: Partial<ContextInit> = {}): ConversationContext {
  return makeContext({
    conversationId: CID,
    contextWindow: WINDOW,
    maxOutputTokens: OUTPUT_LIMIT,
    isSubAgent: true,
    parentId: PARENT_ID,
    ...over,
  });
}

/** The model's output limit in these contexts (max_tokens of a request asked at the limit). */
export const OUTPUT_LIMIT = 8000;
/** What the gateway sends by default in these tests (below the limit). */
export const DEFAULT_MAX_TOKENS = 4000;

/**
 * Usage totalling `tokens`, spread over the four counts context usage adds up; a third of the
 * output was thinking (part of the output count, not added to the total).
 */
export function usage(tokens: number, server: { searches?: number; fetches?: number } = {}): Usage {
  const input = Math.floor(tokens / 2);
  const cacheRead = Math.floor(tokens / 4);
  const cacheCreation = Math.floor(tokens / 8);
  const output = tokens - input - cacheRead - cacheCreation;
  return {
    inputTokens: input,
    cacheReadInputTokens: cacheRead,
    cacheCreationInputTokens: cacheCreation,
    // Every write at the 5-minute lifetime (a response's usage always carries the 1h part, 0 here).
    cacheCreation1hInputTokens: 0,
    outputTokens: output,
    thinkingTokens: Math.floor(output / 3),
    webSearchRequests: server.searches ?? 0,
    webFetchRequests: server.fetches ?? 0,
    // No compaction iterations (a response's usage always carries their total, 0 here).
    compactionTokens: 0,
  };
}

// ---- tool calls ----
export const call = (id: string, name: string, input: Record<string, unknown> = {}): ToolCall => ({ id, name, input });
export const bash = (id: string): ToolCall => call(id, 'bash', { command: 'ls' });
export const think = (id: string): ToolCall => call(id, 'think', { thoughts: 'hmm' });
export const search = (id: string): ToolCall => call(id, 'keyword_search', { query: 'q', search_terms: ['x'] });
export const patch = (id: string): ToolCall => call(id, 'patch', { path: 'a.txt', patches: [{ operation: 'overwrite', new_text: 'x' }] });
export const upgrade = (id: string, reason = 'need to write'): ToolCall => call(id, 'request_mode_upgrade', { reason });
export const spawn = (id: string, tasks: string[]): ToolCall => call(id, 'spawn_agents', { tasks: tasks.map((task) => ({ task })) });
export const submit = (id: string, result: string, success?: boolean): ToolCall =>
  call(id, 'submit_result', success === undefined ? { result } : { result, success });

// ---- events ----
export const userMessage = (
  text = 'hello',
  images: { mediaType: string; data: string }[] = [],
): Extract<ConversationEvent, { type: 'user_message' }> => ({
  type: 'user_message',
  text,
  images,
});
/** A message with a delivery mode (docs/state-machine.md, "Delivery modes"). */
export const deliver = (delivery: DeliveryMode, text = 'hello'): ConversationEvent => ({
  type: 'user_message',
  text,
  images: [],
  delivery,
});
export const cancelQueued = (queuedId: string): ConversationEvent => ({ type: 'user_cancel_queued', queuedId });
export const userCancel: ConversationEvent = { type: 'user_cancel' };
export const approve: ConversationEvent = { type: 'user_approve_upgrade' };
export const deny: ConversationEvent = { type: 'user_deny_upgrade' };
export const downgrade: ConversationEvent = { type: 'user_request_downgrade' };
export const triggerContinuation: ConversationEvent = { type: 'user_trigger_continuation' };
export const workLost: ConversationEvent = { type: 'work_lost', reason: 'worker crashed' };
export const subAgentStart = (task = 'do the thing'): ConversationEvent => ({ type: 'sub_agent_start', task });
export const subAgentStop: ConversationEvent = { type: 'sub_agent_stop', reason: 'parent cancelled' };
export const timerFired = (timerId: string): ConversationEvent => ({ type: 'timer_fired', timerId });

// ---- the model's blocks ----
export const thinkingBlock = (thinking = 'Let me think.', signature = 'sig-1'): ContentBlock => ({ type: 'thinking', thinking, signature });
export const redactedBlock = (data = 'ZW5jcnlwdGVk'): ContentBlock => ({ type: 'redacted_thinking', data });
/** A web search and its result, as the provider returns them (blocks verbatim as JSON). */
export function searchBlocks(id = 'srvtoolu_1'): ContentBlock[] {
  return [
    {
      type: 'server_tool',
      blockType: 'server_tool_use',
      json: JSON.stringify({ type: 'server_tool_use', id, name: 'web_search', input: { query: 'q' } }),
    },
    {
      type: 'server_tool',
      blockType: 'web_search_tool_result',
      json: JSON.stringify({
        type: 'web_search_tool_result',
        tool_use_id: id,
        content: [{ type: 'web_search_result', url: 'https://example.com', title: 'Example' }],
      }),
    },
  ];
}

export interface ResponseOptions {
  text?: string;
  calls?: readonly ToolCall[];
  stopReason?: StopReason;
  tokens?: number;
  /** Blocks before the text (thinking, server-tool blocks), verbatim. */
  before?: readonly ContentBlock[];
  /** Calls the output limit cut (left out of the content). */
  cut?: readonly string[];
  /** The max_tokens the gateway reports it sent; default DEFAULT_MAX_TOKENS. */
  maxTokens?: number;
  explanation?: string;
}

export function response(requestId: string, opts: ResponseOptions = {}): ConversationEvent {
  const content: ContentBlock[] = [...(opts.before ?? [])];
  if (opts.text !== undefined && opts.text !== '') content.push({ type: 'text', text: opts.text });
  for (const c of opts.calls ?? []) content.push({ type: 'tool_use', id: c.id, name: c.name, input: c.input });
  return {
    type: 'llm_response',
    requestId,
    content,
    stopReason: opts.stopReason ?? ((opts.calls ?? []).length > 0 ? 'tool_use' : 'end_turn'),
    usage: usage(opts.tokens ?? 100),
    maxTokens: opts.maxTokens ?? DEFAULT_MAX_TOKENS,
    cutToolNames: opts.cut ?? [],
    stopExplanation: opts.explanation ?? '',
  };
}

export function llmError(
  requestId: string,
  opts: {
    retryable?: boolean;
    errorKind?: ErrorKind;
    message?: string;
    retryAfterMs?: number;
    aborted?: boolean;
    partialText?: string;
  } = {},
): ConversationEvent {
  const retryable = opts.retryable ?? true;
  return {
    type: 'llm_error',
    requestId,
    errorKind: opts.errorKind ?? (retryable ? 'server' : 'auth'),
    retryable,
    message: opts.message ?? (retryable ? 'overloaded' : 'invalid api key'),
    retryAfterMs: opts.retryAfterMs ?? 0,
    aborted: opts.aborted ?? false,
    ...(opts.partialText !== undefined ? { partialText: opts.partialText } : {}),
  };
}

export const toolComplete = (toolUseId: string, content = 'ok', isError = false): ConversationEvent => ({
  type: 'tool_complete',
  result: { toolUseId, content, isError },
});

export const subAgentResult = (agentId: string, success = true, result = 'done', task = 'task'): ConversationEvent => ({
  type: 'sub_agent_result',
  outcome: success ? { agentId, task, success, result } : { agentId, task, success, result, errorKind: 'unknown' },
});

/** The pending LLM request id of a phase that has one. */
export function requestIdOf(state: ConversationState): string {
  const p = state.phase;
  if (p.kind === 'llm_requesting' || p.kind === 'awaiting_continuation' || p.kind === 'cancelling') return p.requestId;
  throw new Error(`no request id in phase ${p.kind}`);
}

/**
 * A conversation driven by events. `send` applies `transition` (or `step`) and keeps the new
 * state on success; `ok` also asserts acceptance. Every effect is recorded.
 */
export class Conv {
  state: ConversationState;
  readonly effects: Effect[] = [];
  readonly log: ConversationEvent[] = [];

  constructor(readonly ctx: ConversationContext) {
    this.state = initialState(ctx);
  }

  send(event: ConversationEvent): TransitionResult {
    this.log.push(event);
    const r = transition(this.state, this.ctx, event);
    if (r.ok) {
      this.state = r.state;
      this.effects.push(...r.effects);
    }
    return r;
  }

  /** Sends and requires acceptance; returns the effects. */
  ok(event: ConversationEvent): readonly Effect[] {
    const r = this.send(event);
    if (!r.ok) throw new Error(`${event.type} rejected in ${this.state.phase.kind}: ${r.rejection.code}`);
    return r.effects;
  }

  /** One matrix step (no internal begin_llm_request). */
  step(event: ConversationEvent | { type: 'begin_llm_request' }): TransitionResult {
    const r = step(this.state, this.ctx, event);
    if (r.ok) {
      this.state = r.state;
      this.effects.push(...r.effects);
    }
    return r;
  }

  get requestId(): string {
    return requestIdOf(this.state);
  }

  /** The id of the last timer scheduled for `purpose`. */
  timer(purpose: 'retry' | 'cancel_timeout' | 'sub_agent_timeout'): string {
    for (let i = this.effects.length - 1; i >= 0; i--) {
      const e = this.effects[i]!;
      if (e.type === 'schedule_timer' && e.purpose === purpose) return e.timerId;
    }
    throw new Error(`no ${purpose} timer scheduled`);
  }

  /** Sub-agent ids spawned so far, in order. */
  get spawned(): string[] {
    return this.effects.flatMap((e) => (e.type === 'spawn_sub_agent' ? [e.agentId] : []));
  }

  // ---- state builders ----
  /** P: user message → llm_requesting{1}. S: sub_agent_start. */
  toLlm(): this {
    this.ok(this.ctx.isSubAgent ? subAgentStart() : userMessage());
    return this;
  }
  respond(opts: Parameters<typeof response>[1]): this {
    this.ok(response(this.requestId, opts));
    return this;
  }
  toTools(calls: readonly ToolCall[]): this {
    return this.toLlm().respond({ text: 'let me', calls });
  }
  retryPending(): this {
    this.toLlm().ok(llmError(this.requestId));
    return this;
  }
  toCancelling(): this {
    this.toLlm().ok(userCancel);
    return this;
  }
  toError(): this {
    this.toLlm().ok(llmError(this.requestId, { retryable: false }));
    return this;
  }
  toContinuation(): this {
    this.ok(triggerContinuation);
    return this;
  }
  toExhausted(): this {
    this.toContinuation().ok(response(this.requestId, { text: 'summary', tokens: 50 }));
    return this;
  }
  toUnrestricted(): this {
    if (this.state.mode === 'unrestricted') return this;
    this.toTools([upgrade('up0')]).ok(approve);
    this.ok(response(this.requestId, { text: 'ok' }));
    return this;
  }
}
