/**
 * Shared helpers of the property tests (src/core/properties*.test.ts): the runs per property, and
 * reading a run: the states it visits, its effects, persisted messages and tool results, and
 * failing with its event trace.
 */
import type { ConversationState, Effect, NewMessage, TransitionResult } from '../../src/core/index.ts';
import { describeRun, runChoices } from './scenario-runs.ts';
import type { Run, Scenario } from './scenario-runs.ts';

/** Runs per property: each properties*.test.ts file stays well under 25 s. */
export const RUNS = 200;
export const opts = { numRuns: RUNS };

export function run(sc: Scenario): Run {
  return runChoices(sc.ctx, sc.choices);
}

export function effectsOf(r: TransitionResult): readonly Effect[] {
  return r.ok ? r.effects : [];
}

export function persisted(effects: readonly Effect[]): NewMessage[] {
  return effects.flatMap((e) => (e.type === 'persist_message' ? [e.message] : []));
}

/** Every state a run visits, the initial one included. */
export function statesOf(r: Run): ConversationState[] {
  return [r.initial, ...r.steps.filter((s) => s.result.ok && s.after !== s.before).map((s) => s.after)];
}

/**
 * The state without its waiting messages. The properties of a turn below hold as they are only
 * while nothing waits (a waiting message is delivered when the turn comes to rest, so "idle"
 * becomes the next turn); the delivery properties cover the rest.
 */
export function bare(state: ConversationState): ConversationState {
  if (!state.pending) return state;
  const { pending: _waiting, ...rest } = state;
  return rest;
}

/** The steps of a run up to the first one taken while messages waited (see `bare`). */
export function stepsWithoutWaiting(r: Run): Run['steps'] {
  const i = r.steps.findIndex((s) => (s.before.pending?.length ?? 0) > 0);
  return i < 0 ? r.steps : r.steps.slice(0, i);
}

/** A deep copy made in this realm (jest's structuredClone gives objects of another realm's prototypes). States, events and contexts are JSON by design. */
export function clone<T>(value: T): T {
  return JSON.parse(JSON.stringify(value)) as T;
}

export function fail(r: Run, why: string): never {
  throw new Error(`${why}\n${describeRun(r)}`);
}

export function toolResults(messages: readonly NewMessage[]) {
  return messages.flatMap((m) => m.content.flatMap((b) => (b.type === 'tool_result' ? [b] : [])));
}
