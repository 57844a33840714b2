/**
 * Running scenarios for property tests of the state machine: a run feeds the driver's events to
 * `transition` (runChoices) and prints as an event trace (describeRun); scenarioArb draws a context
 * and choices that print as that trace. Also deepFreeze, shared by the tests and the benchmark.
 */
import fc, { type Arbitrary } from 'fast-check';
import { initialState, transition } from '../../src/core/index.ts';
import type { ConversationContext, ConversationEvent, ConversationState, TransitionResult } from '../../src/core/index.ts';
import { choicesArb, contextFromShape, contextShapeArb } from './arbitraries.ts';
import type { Choice, ContextShape } from './arbitraries.ts';
import { nextEvent } from './event-driver.ts';

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
