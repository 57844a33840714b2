/**
 * Which conversation states are at rest: the one list that the conversation service's SQL (the recovery
 * sweeper's scan of busy conversations), the web UI and the CLI read. A conversation at rest has nothing in
 * flight — no model call, tool run, timer, sub-agent or cancellation that could be lost — and waits for the
 * user (or is finished); every other state is busy.
 */
import { StateKind } from './gen/bedrock/v1/types_pb.ts';

/**
 * The resting states by the conversation core's phase names (its `PhaseKind`), which are also the
 * values of the `conversations.state_kind` column; in the order of migration 001's partial index
 * `conversations_busy_idx`, whose predicate a test keeps equal to this list.
 */
export const RESTING_STATE_NAMES = ['idle', 'error', 'context_exhausted', 'completed', 'failed'] as const;
export type RestingStateName = (typeof RESTING_STATE_NAMES)[number];

/** The finished states (read-only from now on), a subset of the resting ones. */
export const FINISHED_STATE_NAMES = ['context_exhausted', 'completed', 'failed'] as const satisfies readonly RestingStateName[];
export type FinishedStateName = (typeof FINISHED_STATE_NAMES)[number];

/** The phase name of a public StateKind ('STATE_KIND_AWAITING_LLM' → 'awaiting_llm'); '' for UNSPECIFIED. */
export function stateKindName(kind: StateKind): string {
  return kind === StateKind.UNSPECIFIED ? '' : (StateKind[kind] ?? '').toLowerCase();
}

const RESTING = new Set<string>(RESTING_STATE_NAMES);
const FINISHED = new Set<string>(FINISHED_STATE_NAMES);

/**
 * Whether a state (a public StateKind or a phase name) is at rest: nothing in flight, the user may act.
 * Awaiting mode approval is busy in this sense (the run holds its place and the user is asked); a client
 * that stops following when the user must act adds it itself.
 */
export function isResting(kind: StateKind | string): boolean {
  return RESTING.has(typeof kind === 'string' ? kind : stateKindName(kind));
}

/** Whether a state is finished: a conversation that has ended and is read-only. */
export function isFinished(kind: StateKind | string): boolean {
  return FINISHED.has(typeof kind === 'string' ? kind : stateKindName(kind));
}
