/**
 * fast-check arbitraries for property tests of the conversation state machine: contexts and the
 * abstract *choices* a scenario is made of (event-driver.ts turns a choice into an event,
 * scenario-runs.ts runs scenarios). Test helper only: no clock and no Math.random — every random
 * decision comes from fast-check, so a failure replays from its seed.
 */
import fc, { type Arbitrary } from 'fast-check';
import { makeContext } from '../../src/core/index.ts';
import type { ConversationContext, ErrorKind, StopReason } from '../../src/core/index.ts';

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

/** Shapes restricted to parents / sub-agents / sandbox availability. */
export function shapeWith(overrides: Partial<Pick<ContextShape, 'isSubAgent' | 'sandboxAvailable'>>): Arbitrary<ContextShape> {
  return contextShapeArb.map((s) => ({ ...s, ...overrides }));
}

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

/**
 * A scenario is a context plus a list of abstract *choices*. The driver turns each choice into a
 * concrete event by reading the current state: most choices answer what the phase waits for
 * (the right request id, tool_use id, timer id, pending sub-agent id), the rest are noise (stale
 * ids, duplicates of earlier events, user actions at any time, work_lost, ...). Because the
 * choices are plain data, fast-check shrinks a failing scenario to a short one, and the events
 * are re-derived from the shrunk choices.
 */
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
