/**
 * fast-check arbitraries and a "driver" for property tests of the conversation state machine.
 *
 * A scenario is a context plus a list of abstract *choices*. The driver turns each choice into a
 * concrete event by reading the current state: most choices answer what the phase waits for
 * (the right request id, tool_use id, timer id, pending sub-agent id), the rest are noise (stale
 * ids, duplicates of earlier events, user actions at any time, work_lost, ...). Because the
 * choices are plain data, fast-check shrinks a failing scenario to a short one, and the events
 * are re-derived from the shrunk choices.
 *
 * Test helper only: nothing here is used by the state machine itself. It uses no clock and no
 * Math.random — every random decision comes from fast-check, so a failure replays from its seed.
 */
import fc, { type Arbitrary } from 'fast-check';
import { makeContext, initialState, transition } from '../../src/core/index.ts';
import type {
  ContentBlock,
  ConversationContext,
  ConversationEvent,
  ConversationState,
  ErrorKind,
  StopReason,
  TransitionResult,
  Usage,
} from '../../src/core/index.ts';

// ---------------------------------------------------------------------------------------------
// Contexts

export const PARENT_ID = 'parent-conv';

export interface ContextShape {
  readonly conversationId: string;
  readonly isSubAgent: boolean;
  readonly sandboxAvailable: boolean;
  readonly contextWindow: number;
  /** Sometimes a low delay cap so that capped backoff is exercised. */
  readonly retryMaxDelayMs: number | null;
  /** Mostly the default 3; sometimes 5 so that backoff beyond the second retry is exercised. */
  readonly maxLlmAttempts: number;
  /** The default 3, or 1 so that the cap is reached often. */
  readonly maxAutoContinuations: number;
}

/** Windows where 80% and 90% are exact integers, so the boundaries are hit exactly. */
export const CONTEXT_WINDOWS = [1000, 4000, 10_000, 200_000] as const;

export const contextShapeArb: Arbitrary<ContextShape> = fc.record({
  conversationId: fc.constantFrom('c1', 'conv-7f3a'),
  isSubAgent: fc.boolean(),
  sandboxAvailable: fc.oneof({ weight: 3, arbitrary: fc.constant(true) }, { weight: 2, arbitrary: fc.constant(false) }),
  contextWindow: fc.constantFrom(...CONTEXT_WINDOWS),
  retryMaxDelayMs: fc.oneof({ weight: 4, arbitrary: fc.constant(null) }, { weight: 1, arbitrary: fc.constant(1500) }),
  maxLlmAttempts: fc.oneof({ weight: 3, arbitrary: fc.constant(3) }, { weight: 1, arbitrary: fc.constant(5) }),
  maxAutoContinuations: fc.oneof({ weight: 1, arbitrary: fc.constant(3) }, { weight: 1, arbitrary: fc.constant(1) }),
});

/** The model's output limit in generated contexts, and the max_tokens a request gets by default. */
export const OUTPUT_LIMIT = 8000;
export const DEFAULT_MAX_TOKENS = 4000;

export function contextFromShape(shape: ContextShape): ConversationContext {
  return makeContext({
    conversationId: shape.isSubAgent ? `${PARENT_ID}--toolu_spawn--${shape.conversationId}` : shape.conversationId,
    contextWindow: shape.contextWindow,
    maxOutputTokens: OUTPUT_LIMIT,
    isSubAgent: shape.isSubAgent,
    parentId: shape.isSubAgent ? PARENT_ID : null,
    sandboxAvailable: shape.sandboxAvailable,
    policy: {
      maxLlmAttempts: shape.maxLlmAttempts,
      maxAutoContinuations: shape.maxAutoContinuations,
      ...(shape.retryMaxDelayMs === null ? {} : { retryMaxDelayMs: shape.retryMaxDelayMs }),
    },
  });
}

export const contextArb: Arbitrary<ConversationContext> = contextShapeArb.map(contextFromShape);

// ---------------------------------------------------------------------------------------------
// Choices: the abstract, shrinkable description of one event.

export const ALL_STOP_REASONS: readonly StopReason[] = [
  'end_turn',
  'tool_use',
  'max_tokens',
  'stop_sequence',
  'pause_turn',
  'refusal',
  'model_context_window_exceeded',
  'unspecified',
];

/** Every registered tool and one the registry does not know. */
export const ALL_TOOL_NAMES = [
  'bash',
  'patch',
  'keyword_search',
  'think',
  'spawn_agents',
  'submit_result',
  'request_mode_upgrade',
  'frobnicate',
] as const;

/**
 * Context usage of a response, relative to the window: `tiny` far below, `below_warn` one token
 * under 80%, `at_warn` exactly 80%, `mid` between the thresholds, `below_cont` one under 90%,
 * `at_cont` exactly 90%, `over` above the window.
 */
export type UsageLevel = 'tiny' | 'below_warn' | 'at_warn' | 'mid' | 'below_cont' | 'at_cont' | 'over';

export interface UsageSpec {
  readonly level: UsageLevel;
  /** Tenths of the total that go to output, cache read and cache creation; input takes the rest. */
  readonly split: readonly [number, number, number];
}

export interface ToolSpec {
  readonly name: (typeof ALL_TOOL_NAMES)[number];
  /** Selects the input (spawn_agents: 0 = invalid input, else 1..3 tasks; submit_result: success flag). */
  readonly variant: number;
}

export interface ResponseSpec {
  /** null: no text block. */
  readonly text: string | null;
  readonly tools: readonly ToolSpec[];
  /** null: the natural one (tool_use with tools, end_turn without). */
  readonly stopReason: StopReason | null;
  readonly usage: UsageSpec;
  /** A thinking block first (sometimes with empty text: display omitted), and maybe a redacted one. */
  readonly thinking: 'none' | 'thinking' | 'omitted' | 'redacted';
  /** A web search and its result before the text (server-tool blocks). */
  readonly serverTools: boolean;
  /** Tool calls the output limit cut (left out of the content). */
  readonly cut: readonly string[];
  /** The max_tokens the gateway reports: its default, the model's limit, or none (0). */
  readonly maxTokens: 'default' | 'limit' | 'unreported';
  /** A refusal's explanation ('' none). */
  readonly explanation: string;
}

export interface ErrorSpec {
  readonly errorKind: ErrorKind;
  readonly retryable: boolean;
  readonly retryAfterMs: number;
}

export type NoiseKind =
  | 'user_message'
  | 'empty_message'
  | 'user_cancel'
  | 'approve'
  | 'deny'
  | 'downgrade'
  | 'trigger_continuation'
  | 'work_lost'
  | 'sub_agent_stop'
  | 'sub_agent_start'
  | 'duplicate'
  | 'stale_llm'
  | 'stale_tool'
  | 'stale_timer'
  | 'stale_sub_agent'
  /** A message with delivery queue / steer / interrupt (a busy agent keeps it). */
  | 'queue_message'
  | 'steer_message'
  | 'interrupt_message'
  /** Withdraws a waiting message (or one that is not waiting). */
  | 'cancel_queued';

export interface Choice {
  /** null: answer what the state waits for. */
  readonly noise: NoiseKind | null;
  /** Picks among alternatives (which answer, which pending agent, which past event, ...). */
  readonly pick: number;
  readonly response: ResponseSpec;
  readonly error: ErrorSpec;
  readonly toolIsError: boolean;
  readonly images: number;
}

const usageSpecArb: Arbitrary<UsageSpec> = fc.record({
  level: fc.oneof(
    { weight: 40, arbitrary: fc.constant<UsageLevel>('tiny') },
    { weight: 1, arbitrary: fc.constant<UsageLevel>('below_warn') },
    { weight: 1, arbitrary: fc.constant<UsageLevel>('at_warn') },
    { weight: 2, arbitrary: fc.constant<UsageLevel>('mid') },
    { weight: 1, arbitrary: fc.constant<UsageLevel>('below_cont') },
    { weight: 1, arbitrary: fc.constant<UsageLevel>('at_cont') },
    { weight: 1, arbitrary: fc.constant<UsageLevel>('over') },
  ),
  split: fc.tuple(fc.integer({ min: 0, max: 3 }), fc.integer({ min: 0, max: 3 }), fc.integer({ min: 0, max: 3 })),
});

const toolSpecArb: Arbitrary<ToolSpec> = fc.record({
  name: fc.oneof(
    { weight: 3, arbitrary: fc.constantFrom('bash', 'patch', 'keyword_search', 'think') },
    { weight: 1, arbitrary: fc.constantFrom('spawn_agents', 'submit_result', 'request_mode_upgrade', 'frobnicate') },
    { weight: 1, arbitrary: fc.constantFrom('spawn_agents', 'submit_result', 'request_mode_upgrade') },
  ),
  variant: fc.integer({ min: 0, max: 7 }),
});

const textArb: Arbitrary<string | null> = fc.oneof(
  { weight: 6, arbitrary: fc.constantFrom('Let me look.', 'Done.', 'Here is what I found: ...') },
  { weight: 2, arbitrary: fc.constant(null) },
  { weight: 1, arbitrary: fc.constant('') },
);

const thinkingArb = fc.oneof(
  { weight: 4, arbitrary: fc.constant<ResponseSpec['thinking']>('none') },
  { weight: 3, arbitrary: fc.constant<ResponseSpec['thinking']>('thinking') },
  { weight: 1, arbitrary: fc.constantFrom<ResponseSpec['thinking']>('omitted', 'redacted') },
);
const maxTokensArb = fc.oneof(
  { weight: 4, arbitrary: fc.constant<ResponseSpec['maxTokens']>('default') },
  { weight: 2, arbitrary: fc.constant<ResponseSpec['maxTokens']>('limit') },
  { weight: 1, arbitrary: fc.constant<ResponseSpec['maxTokens']>('unreported') },
);
const cutArb = fc.oneof(
  { weight: 2, arbitrary: fc.constant(['patch']) },
  { weight: 1, arbitrary: fc.constantFrom(['bash'], ['patch', 'bash']) },
);

export const responseSpecArb: Arbitrary<ResponseSpec> = fc.oneof(
  {
    weight: 6,
    arbitrary: fc.record({
      text: textArb,
      tools: fc.oneof(
        { weight: 7, arbitrary: fc.constant([]) },
        { weight: 6, arbitrary: fc.array(toolSpecArb, { minLength: 1, maxLength: 1 }) },
        { weight: 7, arbitrary: fc.array(toolSpecArb, { minLength: 2, maxLength: 4 }) },
      ),
      stopReason: fc.oneof({ weight: 5, arbitrary: fc.constant(null) }, { weight: 2, arbitrary: fc.constantFrom(...ALL_STOP_REASONS) }),
      usage: usageSpecArb,
      thinking: thinkingArb,
      serverTools: fc.oneof({ weight: 5, arbitrary: fc.constant(false) }, { weight: 1, arbitrary: fc.constant(true) }),
      cut: fc.constant([]),
      maxTokens: maxTokensArb,
      explanation: fc.constant(''),
    }),
  },
  {
    // A text response cut short, or paused (with or without server-tool blocks to resume):
    // the model is asked to continue (REQ-BED-003, end_turn = false).
    weight: 2,
    arbitrary: fc.record({
      text: textArb,
      tools: fc.constant([]),
      stopReason: fc.constantFrom<StopReason | null>('max_tokens', 'pause_turn'),
      usage: usageSpecArb,
      thinking: thinkingArb,
      serverTools: fc.boolean(),
      cut: fc.constant([]),
      maxTokens: maxTokensArb,
      explanation: fc.constant(''),
    }),
  },
  {
    // Tool calls cut by the output limit: asked again at the limit, else told (and complete calls run).
    weight: 2,
    arbitrary: fc.record({
      text: textArb,
      tools: fc.oneof(
        { weight: 2, arbitrary: fc.constant([]) },
        { weight: 1, arbitrary: fc.array(toolSpecArb, { minLength: 1, maxLength: 2 }) },
      ),
      stopReason: fc.constant<StopReason | null>('max_tokens'),
      usage: usageSpecArb,
      thinking: thinkingArb,
      serverTools: fc.constant(false),
      cut: cutArb,
      maxTokens: maxTokensArb,
      explanation: fc.constant(''),
    }),
  },
  {
    // The model declines.
    weight: 1,
    arbitrary: fc.record({
      text: fc.oneof(fc.constant(null), textArb),
      tools: fc.oneof(
        { weight: 3, arbitrary: fc.constant([]) },
        { weight: 1, arbitrary: fc.array(toolSpecArb, { minLength: 1, maxLength: 1 }) },
      ),
      stopReason: fc.constant<StopReason | null>('refusal'),
      usage: usageSpecArb,
      thinking: thinkingArb,
      serverTools: fc.constant(false),
      cut: fc.constant([]),
      maxTokens: fc.constant<ResponseSpec['maxTokens']>('default'),
      explanation: fc.constantFrom('', 'The request asks for something harmful.', 'Policy'),
    }),
  },
);

export const errorSpecArb: Arbitrary<ErrorSpec> = fc.oneof(
  {
    weight: 3,
    arbitrary: fc.record({
      errorKind: fc.constantFrom<ErrorKind>('rate_limit', 'network', 'server'),
      retryable: fc.constant(true),
      retryAfterMs: fc.oneof({ weight: 4, arbitrary: fc.constant(0) }, { weight: 1, arbitrary: fc.constantFrom(500, 1500, 5000, 120_000) }),
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      errorKind: fc.constantFrom<ErrorKind>('auth', 'invalid_request', 'unknown', 'server'),
      retryable: fc.constant(false),
      retryAfterMs: fc.constant(0),
    }),
  },
);

const noiseKindArb: Arbitrary<NoiseKind> = fc.oneof(
  { weight: 4, arbitrary: fc.constant<NoiseKind>('user_cancel') },
  { weight: 2, arbitrary: fc.constant<NoiseKind>('user_message') },
  { weight: 1, arbitrary: fc.constant<NoiseKind>('empty_message') },
  { weight: 1, arbitrary: fc.constant<NoiseKind>('approve') },
  { weight: 1, arbitrary: fc.constant<NoiseKind>('deny') },
  { weight: 2, arbitrary: fc.constant<NoiseKind>('downgrade') },
  { weight: 1, arbitrary: fc.constant<NoiseKind>('trigger_continuation') },
  { weight: 2, arbitrary: fc.constant<NoiseKind>('work_lost') },
  { weight: 1, arbitrary: fc.constant<NoiseKind>('sub_agent_stop') },
  { weight: 1, arbitrary: fc.constant<NoiseKind>('sub_agent_start') },
  { weight: 3, arbitrary: fc.constant<NoiseKind>('duplicate') },
  { weight: 2, arbitrary: fc.constant<NoiseKind>('stale_llm') },
  { weight: 2, arbitrary: fc.constant<NoiseKind>('stale_tool') },
  { weight: 2, arbitrary: fc.constant<NoiseKind>('stale_timer') },
  { weight: 1, arbitrary: fc.constant<NoiseKind>('stale_sub_agent') },
  { weight: 2, arbitrary: fc.constant<NoiseKind>('queue_message') },
  { weight: 2, arbitrary: fc.constant<NoiseKind>('steer_message') },
  { weight: 1, arbitrary: fc.constant<NoiseKind>('interrupt_message') },
  { weight: 1, arbitrary: fc.constant<NoiseKind>('cancel_queued') },
);

export const choiceArb: Arbitrary<Choice> = fc.record({
  noise: fc.oneof({ weight: 3, arbitrary: fc.constant(null) }, { weight: 1, arbitrary: noiseKindArb }),
  pick: fc.nat({ max: 9999 }),
  response: responseSpecArb,
  error: errorSpecArb,
  toolIsError: fc.boolean(),
  images: fc.oneof({ weight: 5, arbitrary: fc.constant(0) }, { weight: 1, arbitrary: fc.integer({ min: 1, max: 2 }) }),
});

export function choicesArb(maxLength = 40): Arbitrary<Choice[]> {
  return fc.array(choiceArb, { minLength: 1, maxLength, size: 'max' });
}

// ---------------------------------------------------------------------------------------------
// The driver: choice + state → event.

function pickWeighted<T>(pick: number, options: readonly (readonly [number, T])[]): T {
  const total = options.reduce((sum, [w]) => sum + w, 0);
  let at = pick % total;
  for (const [w, value] of options) {
    if (at < w) return value;
    at -= w;
  }
  return options[options.length - 1]![1];
}

export function usageFor(spec: UsageSpec, contextWindow: number): Usage {
  const warn = Math.ceil(contextWindow * 0.8);
  const cont = Math.ceil(contextWindow * 0.9);
  const total = {
    tiny: Math.floor(contextWindow / 20) + 7,
    below_warn: warn - 1,
    at_warn: warn,
    mid: Math.floor((warn + cont) / 2),
    below_cont: cont - 1,
    at_cont: cont,
    over: contextWindow + 50,
  }[spec.level];
  const [o, r, c] = spec.split;
  const outputTokens = Math.floor((total * o) / 10);
  const cacheReadInputTokens = Math.floor((total * r) / 10);
  const cacheCreationInputTokens = Math.floor((total * c) / 10);
  return {
    inputTokens: total - outputTokens - cacheReadInputTokens - cacheCreationInputTokens,
    outputTokens,
    cacheReadInputTokens,
    cacheCreationInputTokens,
    thinkingTokens: Math.floor(outputTokens / 2),
    webSearchRequests: 0,
    webFetchRequests: 0,
  };
}

/** A task text that cannot be a substring of another one (for the conservation property). */
export function taskText(step: number, toolIndex: number, agentIndex: number): string {
  return `[task ${step}-${toolIndex}-${agentIndex}]`;
}

export function toolUseId(step: number, index: number): string {
  return `toolu_${step}_${index}`;
}

function toolInput(spec: ToolSpec, step: number, index: number): Record<string, unknown> {
  switch (spec.name) {
    case 'bash':
      return { command: `echo step ${step}` };
    case 'patch':
      return { path: 'notes.txt', patches: [{ operation: 'append_eof', new_text: `line ${step}\n` }] };
    case 'keyword_search':
      return { query: 'where is the config', search_terms: ['config'] };
    case 'think':
      return { thoughts: 'planning' };
    case 'spawn_agents': {
      const n = spec.variant % 4;
      if (n === 0) return spec.variant % 8 === 0 ? {} : { tasks: [] };
      return { tasks: Array.from({ length: n }, (_, i) => ({ task: taskText(step, index, i) })) };
    }
    case 'submit_result':
      return spec.variant % 3 === 0 ? { result: `result ${step}`, success: false } : { result: `result ${step}`, success: true };
    case 'request_mode_upgrade':
      return { reason: 'I need to edit notes.txt' };
    case 'frobnicate':
      return { level: 11 };
  }
}

export function responseContent(spec: ResponseSpec, step: number, withTools: boolean): ContentBlock[] {
  const blocks: ContentBlock[] = [];
  if (spec.thinking === 'thinking') blocks.push({ type: 'thinking', thinking: `thinking at step ${step}`, signature: `sig-${step}` });
  if (spec.thinking === 'omitted') blocks.push({ type: 'thinking', thinking: '', signature: `sig-${step}` });
  if (spec.thinking === 'redacted') blocks.push({ type: 'redacted_thinking', data: `cmVkYWN0ZWQ${step}` });
  if (spec.serverTools) {
    const id = `srvtoolu_${step}`;
    blocks.push(
      {
        type: 'server_tool',
        blockType: 'server_tool_use',
        json: JSON.stringify({ type: 'server_tool_use', id, name: 'web_search', input: { query: 'bedrock' } }),
      },
      {
        type: 'server_tool',
        blockType: 'web_search_tool_result',
        json: JSON.stringify({ type: 'web_search_tool_result', tool_use_id: id, content: [] }),
      },
    );
  }
  if (spec.text !== null) {
    blocks.push(
      spec.serverTools && spec.text !== ''
        ? { type: 'text', text: spec.text, citations: '[{"type":"web_search_result_location","url":"https://example.com"}]' }
        : { type: 'text', text: spec.text },
    );
  }
  if (withTools) {
    spec.tools.forEach((tool, i) => {
      blocks.push({ type: 'tool_use', id: toolUseId(step, i), name: tool.name, input: toolInput(tool, step, i) });
    });
  }
  return blocks;
}

function llmResponse(requestId: string, spec: ResponseSpec, ctx: ConversationContext, step: number, withTools: boolean): ConversationEvent {
  const hasTools = withTools && spec.tools.length > 0;
  const u = usageFor(spec.usage, ctx.contextWindow);
  return {
    type: 'llm_response',
    requestId,
    content: responseContent(spec, step, withTools),
    stopReason: spec.stopReason ?? (hasTools ? 'tool_use' : 'end_turn'),
    usage: spec.serverTools ? { ...u, webSearchRequests: 1 } : u,
    maxTokens: { default: DEFAULT_MAX_TOKENS, limit: ctx.maxOutputTokens, unreported: 0 }[spec.maxTokens],
    cutToolNames: withTools ? spec.cut : [],
    stopExplanation: spec.explanation,
  };
}

function llmError(requestId: string, spec: ErrorSpec, aborted = false): ConversationEvent {
  return {
    type: 'llm_error',
    requestId,
    errorKind: aborted ? 'cancelled' : spec.errorKind,
    retryable: aborted ? false : spec.retryable,
    message: aborted ? 'Request aborted' : `${spec.errorKind} failure`,
    retryAfterMs: aborted ? 0 : spec.retryAfterMs,
    aborted,
  };
}

function userMessage(choice: Choice, step: number): Extract<ConversationEvent, { type: 'user_message' }> {
  return {
    type: 'user_message',
    text: `message ${step}`,
    images: Array.from({ length: choice.images }, (_, i) => ({ mediaType: 'image/png', data: `aW1n${step}${i}` })),
  };
}

function answer(state: ConversationState, ctx: ConversationContext, choice: Choice, past: readonly ConversationEvent[]): ConversationEvent {
  const step = past.length;
  const p = state.phase;
  switch (p.kind) {
    case 'idle':
      if (ctx.isSubAgent) return { type: 'sub_agent_start', task: `subtask for step ${step}` };
      return pickWeighted<ConversationEvent>(choice.pick, [
        [30, userMessage(choice, step)],
        [1, { type: 'user_trigger_continuation' }],
        [2, { type: 'user_request_downgrade' }],
      ]);
    case 'error':
      return pickWeighted<ConversationEvent>(choice.pick, [
        [20, userMessage(choice, step)],
        [1, { type: 'user_trigger_continuation' }],
      ]);
    case 'llm_requesting':
    case 'awaiting_continuation': {
      if (p.retry) return { type: 'timer_fired', timerId: p.retry.timerId };
      // The continuation request offers no tools, so its answer carries none.
      const withTools = p.kind === 'llm_requesting';
      return choice.pick % 10 < 6 ? llmResponse(p.requestId, choice.response, ctx, step, withTools) : llmError(p.requestId, choice.error);
    }
    case 'tool_executing':
      return {
        type: 'tool_complete',
        result: { toolUseId: p.current.id, content: `output of ${p.current.id}`, isError: choice.toolIsError },
      };
    case 'cancelling':
      return pickWeighted(choice.pick, [
        [3, llmError(p.requestId, choice.error, true)],
        [1, llmResponse(p.requestId, choice.response, ctx, step, true)],
        [1, { type: 'timer_fired', timerId: p.timerId }],
      ]);
    case 'awaiting_sub_agents': {
      if (p.pending.length === 0 || choice.pick % 8 === 0) return { type: 'timer_fired', timerId: p.timerId };
      const agentId = p.pending[choice.pick % p.pending.length]!;
      const task = p.agents.find((a) => a.agentId === agentId)?.task ?? '';
      const success = choice.pick % 5 !== 0;
      return {
        type: 'sub_agent_result',
        outcome: success
          ? { agentId, task, success, result: `result of ${agentId}` }
          : { agentId, task, success, result: `failure of ${agentId}`, errorKind: 'unknown' },
      };
    }
    case 'awaiting_mode_approval':
      return choice.pick % 2 === 0 ? { type: 'user_approve_upgrade' } : { type: 'user_deny_upgrade' };
    case 'awaiting_llm':
    case 'context_exhausted':
    case 'completed':
    case 'failed':
      return noise(state, ctx, { ...choice, noise: 'duplicate' }, past);
  }
}

function noise(state: ConversationState, ctx: ConversationContext, choice: Choice, past: readonly ConversationEvent[]): ConversationEvent {
  const step = past.length;
  const cid = ctx.conversationId;
  switch (choice.noise ?? 'user_cancel') {
    case 'user_message':
      return userMessage(choice, step);
    case 'empty_message':
      return { type: 'user_message', text: choice.pick % 2 === 0 ? '' : '   ', images: [] };
    case 'user_cancel':
      return { type: 'user_cancel' };
    case 'approve':
      return { type: 'user_approve_upgrade' };
    case 'deny':
      return { type: 'user_deny_upgrade' };
    case 'downgrade':
      return { type: 'user_request_downgrade' };
    case 'trigger_continuation':
      return { type: 'user_trigger_continuation' };
    case 'work_lost':
      return { type: 'work_lost', reason: 'worker restarted' };
    case 'sub_agent_stop':
      return { type: 'sub_agent_stop', reason: 'parent cancelled' };
    case 'sub_agent_start':
      return { type: 'sub_agent_start', task: `another task ${step}` };
    case 'duplicate':
      return past.length === 0 ? { type: 'user_cancel' } : past[choice.pick % past.length]!;
    case 'stale_llm': {
      const n = choice.pick % 3 === 0 ? 999 : Math.max(0, state.llmRequests - 1 - (choice.pick % 2));
      const requestId = `${cid}/llm/${n}`;
      return choice.pick % 2 === 0 ? llmResponse(requestId, choice.response, ctx, step, true) : llmError(requestId, choice.error);
    }
    case 'stale_tool': {
      const old = past.flatMap((e) => (e.type === 'llm_response' ? e.content.flatMap((b) => (b.type === 'tool_use' ? [b.id] : [])) : []));
      const id = old.length > 0 && choice.pick % 3 !== 0 ? old[choice.pick % old.length]! : 'toolu_never_asked';
      return { type: 'tool_complete', result: { toolUseId: id, content: 'late output', isError: choice.toolIsError } };
    }
    case 'stale_timer': {
      const n = choice.pick % 4 === 0 ? 9999 : Math.max(0, state.seq - 1 - (choice.pick % 3));
      return { type: 'timer_fired', timerId: `${cid}/timer/${n}` };
    }
    case 'queue_message':
      return { ...userMessage(choice, step), delivery: 'queue' };
    case 'steer_message':
      return { ...userMessage(choice, step), delivery: 'steer' };
    case 'interrupt_message':
      return { ...userMessage(choice, step), delivery: 'interrupt' };
    case 'cancel_queued': {
      const waiting = state.pending ?? [];
      const queuedId = waiting.length > 0 && choice.pick % 4 !== 0 ? waiting[choice.pick % waiting.length]!.id : `${cid}/q/${choice.pick}`;
      return { type: 'user_cancel_queued', queuedId };
    }
    case 'stale_sub_agent': {
      const old = past.flatMap((e) => (e.type === 'sub_agent_result' ? [e] : []));
      if (old.length > 0 && choice.pick % 2 === 0) return old[choice.pick % old.length]!;
      const agentId = `${cid}--toolu_never--${choice.pick % 3}`;
      return { type: 'sub_agent_result', outcome: { agentId, task: 'unknown', success: true, result: 'stray' } };
    }
  }
}

/** The driver: the next event for this state. `past` is every event sent so far (for duplicates and fresh ids). */
export function nextEvent(
  state: ConversationState,
  ctx: ConversationContext,
  choice: Choice,
  past: readonly ConversationEvent[],
): ConversationEvent {
  return choice.noise === null ? answer(state, ctx, choice, past) : noise(state, ctx, choice, past);
}

// ---------------------------------------------------------------------------------------------
// Running scenarios

export interface Step {
  readonly index: number;
  readonly before: ConversationState;
  readonly event: ConversationEvent;
  readonly result: TransitionResult;
  /** The state after the event (= before when rejected). */
  readonly after: ConversationState;
}

export interface Run {
  readonly ctx: ConversationContext;
  readonly initial: ConversationState;
  readonly steps: readonly Step[];
  readonly final: ConversationState;
}

/** Feeds the driver's events to `transition` from the initial state. */
export function runChoices(ctx: ConversationContext, choices: readonly Choice[], start?: ConversationState): Run {
  const initial = start ?? initialState(ctx);
  const steps: Step[] = [];
  const past: ConversationEvent[] = [];
  let state = initial;
  for (const choice of choices) {
    const event = nextEvent(state, ctx, choice, past);
    past.push(event);
    const result = transition(state, ctx, event);
    const after = result.ok ? result.state : state;
    steps.push({ index: steps.length, before: state, event, result, after });
    state = after;
  }
  return { ctx, initial, steps, final: state };
}

/** The events a run of these choices sends (for printing counterexamples). */
export function eventsOf(ctx: ConversationContext, choices: readonly Choice[]): ConversationEvent[] {
  return runChoices(ctx, choices).steps.map((s) => s.event);
}

function describeEvent(e: ConversationEvent): string {
  switch (e.type) {
    case 'llm_response': {
      const tools = e.content.flatMap((b) => (b.type === 'tool_use' ? [`${b.name}#${b.id}`] : []));
      const u = e.usage;
      const tokens = u.inputTokens + u.outputTokens + u.cacheReadInputTokens + u.cacheCreationInputTokens;
      const kinds = [
        ...new Set(
          e.content.flatMap((b) => (b.type === 'thinking' || b.type === 'redacted_thinking' || b.type === 'server_tool' ? [b.type] : [])),
        ),
      ];
      const cut = e.cutToolNames ?? [];
      return `llm_response(${e.requestId}, ${e.stopReason}, ${tokens} tokens, max_tokens ${e.maxTokens ?? 0}${tools.length ? `, tools [${tools.join(', ')}]` : ''}${cut.length ? `, cut [${cut.join(', ')}]` : ''}${kinds.length ? `, ${kinds.join('+')}` : ''})`;
    }
    case 'llm_error':
      return `llm_error(${e.requestId}, ${e.errorKind}, retryable=${e.retryable}${e.retryAfterMs ? `, retryAfter=${e.retryAfterMs}` : ''}${e.aborted ? ', aborted' : ''})`;
    case 'tool_complete':
      return `tool_complete(${e.result.toolUseId}${e.result.isError ? ', error' : ''})`;
    case 'timer_fired':
      return `timer_fired(${e.timerId})`;
    case 'sub_agent_result':
      return `sub_agent_result(${e.outcome.agentId}, ${e.outcome.success ? 'ok' : 'failed'})`;
    case 'user_message':
      return `user_message(${JSON.stringify(e.text)}${e.images.length ? `, ${e.images.length} images` : ''}${e.delivery ? `, ${e.delivery}` : ''})`;
    case 'user_cancel_queued':
      return `user_cancel_queued(${e.queuedId})`;
    default:
      return e.type;
  }
}

/** One line per event, with the phase it led to: a readable counterexample. */
export function describeRun(run: Run): string {
  const c = run.ctx;
  const head = `ctx{${c.conversationId}, ${c.isSubAgent ? 'sub-agent' : 'parent'}, sandbox=${c.sandboxAvailable}, window=${c.contextWindow}, retryMaxDelay=${c.policy.retryMaxDelayMs}, maxLlmAttempts=${c.policy.maxLlmAttempts}, maxAutoContinuations=${c.policy.maxAutoContinuations}}`;
  const lines = run.steps.map((s) => {
    const outcome = s.result.ok
      ? s.result.state === s.before
        ? 'no-op'
        : `${s.result.state.phase.kind}/${s.result.state.mode}`
      : `rejected ${s.result.rejection.code}`;
    return `  ${s.index}. [${s.before.phase.kind}] ${describeEvent(s.event)} -> ${outcome}`;
  });
  return [head, ...lines].join('\n');
}

export interface Scenario {
  readonly shape: ContextShape;
  readonly ctx: ConversationContext;
  readonly choices: readonly Choice[];
}

/**
 * A context and a choice list. Printed (in counterexamples) as the event trace it drives, so a
 * shrunk failure reads as a list of events rather than abstract choices.
 */
export function scenarioArb(opts: { maxLength?: number; shape?: Arbitrary<ContextShape> } = {}): Arbitrary<Scenario> {
  return fc.tuple(opts.shape ?? contextShapeArb, choicesArb(opts.maxLength ?? 40)).map(([shape, choices]) => {
    const ctx = contextFromShape(shape);
    return {
      shape,
      ctx,
      choices,
      [fc.toStringMethod]: () => {
        try {
          return `\n${describeRun(runChoices(ctx, choices))}\n`;
        } catch (error) {
          return `${JSON.stringify(shape)} (the run throws: ${String(error)})`;
        }
      },
    };
  });
}

/** Shapes restricted to parents / sub-agents / sandbox availability. */
export function shapeWith(overrides: Partial<Pick<ContextShape, 'isSubAgent' | 'sandboxAvailable'>>): Arbitrary<ContextShape> {
  return contextShapeArb.map((s) => ({ ...s, ...overrides }));
}

// ---------------------------------------------------------------------------------------------
// Probes: events to try on a reached state (for "every event" properties).

/** A broad set of events for one state: answers, stale answers and every user action. */
export function probeEvents(state: ConversationState, ctx: ConversationContext): ConversationEvent[] {
  const cid = ctx.conversationId;
  const lastRequest = `${cid}/llm/${state.llmRequests}`;
  const usage = usageFor({ level: 'tiny', split: [1, 1, 1] }, ctx.contextWindow);
  const spec: ErrorSpec = { errorKind: 'server', retryable: true, retryAfterMs: 0 };
  const events: ConversationEvent[] = [
    { type: 'user_message', text: 'hello', images: [] },
    { type: 'user_message', text: '', images: [] },
    { type: 'user_cancel' },
    { type: 'user_approve_upgrade' },
    { type: 'user_deny_upgrade' },
    { type: 'user_request_downgrade' },
    { type: 'user_trigger_continuation' },
    { type: 'user_message', text: 'queued', images: [], delivery: 'queue' },
    { type: 'user_message', text: 'steered', images: [], delivery: 'steer' },
    { type: 'user_message', text: 'interrupting', images: [], delivery: 'interrupt' },
    { type: 'user_cancel_queued', queuedId: state.pending?.[0]?.id ?? `${cid}/q/1` },
    { type: 'llm_response', requestId: lastRequest, content: [{ type: 'text', text: 'late' }], stopReason: 'end_turn', usage },
    {
      type: 'llm_response',
      requestId: lastRequest,
      content: [{ type: 'tool_use', id: 'toolu_probe', name: 'bash', input: { command: 'ls' } }],
      stopReason: 'tool_use',
      usage,
    },
    llmError(lastRequest, spec),
    llmError(lastRequest, { ...spec, retryable: false, errorKind: 'auth' }),
    llmError(lastRequest, spec, true),
    { type: 'tool_complete', result: { toolUseId: 'toolu_probe', content: 'x', isError: false } },
    { type: 'sub_agent_result', outcome: { agentId: `${cid}--toolu_probe--0`, task: 't', success: true, result: 'r' } },
    { type: 'sub_agent_start', task: 'probe task' },
    { type: 'sub_agent_stop', reason: 'probe' },
    { type: 'work_lost', reason: 'probe' },
  ];
  for (let s = Math.max(0, state.seq - 3); s <= state.seq; s++) events.push({ type: 'timer_fired', timerId: `${cid}/timer/${s}` });
  return events;
}

// ---------------------------------------------------------------------------------------------
// Small helpers shared by the tests and the benchmark.

/** Freezes an object graph, so that any mutation by the code under test throws (ESM is strict). */
export function deepFreeze<T>(value: T): T {
  if (value !== null && typeof value === 'object') {
    for (const key of Object.keys(value)) deepFreeze((value as Record<string, unknown>)[key]);
    Object.freeze(value);
  }
  return value;
}
