/**
 * The row runner of the transition-matrix tests (src/core/transition.matrix.*.test.ts): a Row
 * reaches its state from `initialState` (matrix-fixtures.ts), sends one event and asserts the next
 * phase and the multiset of effect types; plus the effect helpers and constants the rows share.
 */
import { expect } from '@jest/globals';
import { toolSetFor } from '@bedrock/contracts/tools';
import {
  REJECTION_MESSAGES,
  step,
  transition,
  type ConversationContext,
  type ConversationEvent,
  type ConversationState,
  type Effect,
  type EffectType,
  type NewMessage,
  type Notification,
  type PhaseKind,
  type RejectionCode,
  type ToolResult,
} from '../../src/core/index.ts';
import { Conv, llmError, parentCtx, timerFired } from './matrix-fixtures.ts';

export type Ok = Extract<ReturnType<typeof transition>, { ok: true }>;
type StepEvent = ConversationEvent | { type: 'begin_llm_request' };

/**
 * What a row expects. Spec effects map to ours as docs/state-machine.md says: PersistState = the
 * state changed (seq increases, a new object); NotifyClient = a state change or a `notify` effect;
 * AwaitingLlm rows use `step`; "Idle + SpawnSubAgents" is the spawn_agents tool call
 * (docs/design.md resolution 4); "LlmRequesting + UserCancel → Cancelling" then
 * "Cancelling + LlmResponse → Idle".
 */
export type Expectation =
  | {
      readonly phase: PhaseKind;
      readonly effects: readonly EffectType[];
      /** Effect types the doc leaves open (may appear or not). */
      readonly optional?: readonly EffectType[];
      readonly check?: (r: Ok, c: Conv, before: ConversationState) => void;
    }
  | { readonly reject: RejectionCode }
  | { readonly noop: true };

export interface Row {
  readonly label: string;
  readonly ctx?: () => ConversationContext;
  readonly setup: (c: Conv) => unknown;
  readonly event: (c: Conv) => StepEvent;
  /** Use `step` (a single matrix step) instead of `transition`. */
  readonly step?: boolean;
  readonly expect: Expectation;
}

// ---- helpers over effects ----
export const persisted = (r: Ok, type?: NewMessage['type']): NewMessage[] =>
  r.effects.flatMap((e) => (e.type === 'persist_message' && (type === undefined || e.message.type === type) ? [e.message] : []));
export const notes = (r: Ok): Notification[] => r.effects.flatMap((e) => (e.type === 'notify' ? [e.notification] : []));
export const effectsOf = <T extends EffectType>(r: Ok, type: T): Extract<Effect, { type: T }>[] =>
  r.effects.filter((e): e is Extract<Effect, { type: T }> => e.type === type);
/** The tool results persisted by a transition, each in its own `tool` message. */
export function results(r: Ok): ToolResult[] {
  return persisted(r, 'tool').map((m) => {
    expect(m.content).toHaveLength(1);
    const b = m.content[0]!;
    if (b.type !== 'tool_result') throw new Error(`tool message holds ${b.type}`);
    const { type: _type, ...result } = b;
    return result;
  });
}
export const resultFor = (r: Ok, id: string): ToolResult => {
  const found = results(r).filter((x) => x.toolUseId === id);
  expect(found).toHaveLength(1);
  return found[0]!;
};
export const textOf = (m: NewMessage): string => m.content.flatMap((b) => (b.type === 'text' ? [b.text] : [])).join('');
export const phase = <K extends PhaseKind>(s: ConversationState, kind: K): Extract<ConversationState['phase'], { kind: K }> => {
  expect(s.phase.kind).toBe(kind);
  return s.phase as Extract<ConversationState['phase'], { kind: K }>;
};
export const P_TOOLS = toolSetFor({ isSubAgent: false, sandboxAvailable: true });

export function runRow(row: Row): void {
  const c = new Conv((row.ctx ?? parentCtx)());
  row.setup(c);
  const before = c.state;
  const snapshot = JSON.stringify(before);
  const event = row.event(c);
  const r =
    row.step === true
      ? step(before, c.ctx, event)
      : event.type === 'begin_llm_request'
        ? (() => {
            throw new Error('begin_llm_request needs step');
          })()
        : transition(before, c.ctx, event);
  // Purity: the input state is never mutated.
  expect(JSON.stringify(before)).toBe(snapshot);
  const exp = row.expect;
  if ('reject' in exp) {
    expect(r).toEqual({ ok: false, rejection: { code: exp.reject, message: REJECTION_MESSAGES[exp.reject] } });
    return;
  }
  if (!r.ok) throw new Error(`rejected: ${r.rejection.code}`);
  if ('noop' in exp) {
    expect(r.effects).toEqual([]);
    expect(r.state).toBe(before);
    return;
  }
  expect(r.state.phase.kind).toBe(exp.phase);
  const optional = exp.optional ?? [];
  expect(
    r.effects
      .map((e) => e.type)
      .filter((t) => !optional.includes(t))
      .sort(),
  ).toEqual(
    exp.effects
      .filter((t) => !optional.includes(t))
      .slice()
      .sort(),
  );
  for (const t of exp.effects) if (optional.includes(t)) expect(r.effects.map((e) => e.type)).toContain(t);
  // PersistState: the state changed and the transition counted.
  expect(r.state).not.toBe(before);
  expect(r.state.seq).toBeGreaterThan(before.seq);
  if (row.step !== true) expect(r.state.phase.kind).not.toBe('awaiting_llm');
  exp.check?.(r, c, before);
}

export const cases = (rows: readonly Row[]): [string, Row][] => rows.map((r) => [r.label, r]);

// Reaching a state with several calls answered.
export const toThirdAttempt = (c: Conv): void => {
  c.toLlm();
  for (let i = 0; i < 2; i++) {
    c.ok(llmError(c.requestId));
    c.ok(timerFired(c.timer('retry')));
  }
};
export const IMG = { mediaType: 'image/png', data: 'iVBORw0KGgo=' };
export const CITED = {
  type: 'text',
  text: 'Per the docs,',
  citations: '[{"type":"web_search_result_location","url":"https://example.com"}]',
} as const;

/** The waiting messages as `delivery:text`. */
export const waiting = (s: ConversationState): string[] => (s.pending ?? []).map((m) => `${m.delivery}:${m.text}`);
