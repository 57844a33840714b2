/**
 * Transition matrix, docs/state-machine.md "Delivery modes": every mode from every state, and the
 * other delivery rows (runner: test/core-support/matrix-rows.ts).
 */
import { describe, it, expect } from '@jest/globals';
import { MAX_PENDING_MESSAGES, type ConversationContext, type DeliveryMode, type EffectType, type PhaseKind } from './index.ts';
import {
  type Conv,
  CID,
  approve,
  bash,
  cancelQueued,
  deliver,
  llmError,
  response,
  spawn,
  subCtx,
  toolComplete,
  upgrade,
  userCancel,
  workLost,
} from '../../test/core-support/matrix-fixtures.ts';
import { type Ok, type Expectation, type Row, persisted, textOf, runRow, cases, waiting } from '../../test/core-support/matrix-rows.ts';

// ---- delivery modes (docs/state-machine.md, "Delivery modes"): every mode from every state ----

/** Texts of the user messages a transition persisted, in order. */
const userTexts = (r: Ok): string[] => persisted(r, 'user').map(textOf);

const STATES: readonly { readonly name: string; readonly setup: (c: Conv) => unknown; readonly ctx?: () => ConversationContext }[] = [
  { name: 'idle', setup: () => undefined },
  { name: 'error', setup: (c) => c.toError() },
  { name: 'llm_requesting (in flight)', setup: (c) => c.toLlm() },
  { name: 'llm_requesting (retry pending)', setup: (c) => c.retryPending() },
  { name: 'tool_executing', setup: (c) => c.toTools([bash('b1'), bash('b2')]) },
  { name: 'awaiting_sub_agents', setup: (c) => c.toTools([spawn('s1', ['a', 'b'])]) },
  { name: 'awaiting_mode_approval', setup: (c) => c.toTools([upgrade('u1'), bash('b2')]) },
  { name: 'cancelling', setup: (c) => c.toCancelling() },
  { name: 'awaiting_continuation', setup: (c) => c.toContinuation() },
  { name: 'context_exhausted', setup: (c) => c.toExhausted() },
];

/** What a message with `mode` does in each state (the table of the doc). */
function deliveryExpectation(state: string, mode: DeliveryMode): Expectation {
  const sendsNow: Expectation = {
    phase: 'llm_requesting',
    effects: ['persist_message', 'request_llm'],
    check: (r) => {
      expect(userTexts(r)).toEqual(['later']);
      expect(r.state.pending).toBeUndefined();
    },
  };
  const waits = (phase: PhaseKind): Expectation => ({
    phase,
    effects: [],
    check: (r, c, before) => {
      expect(waiting(r.state)).toEqual([`${mode}:later`]);
      expect(r.state.pending![0]!.id).toBe(`${CID}/q/${r.state.seq}`);
      expect(r.state.phase).toEqual(before.phase);
    },
  });
  switch (state) {
    case 'idle':
    case 'error':
      return sendsNow;
    case 'context_exhausted':
      return { reject: 'context_exhausted' };
    case 'awaiting_continuation':
      return { reject: 'agent_busy' };
    case 'cancelling':
      return mode === 'reject' ? { reject: 'cancellation_in_progress' } : waits('cancelling');
    default:
      break;
  }
  if (mode === 'reject') return { reject: 'agent_busy' };
  if (mode !== 'interrupt') return waits(state.split(' ')[0] as PhaseKind);
  // interrupt = cancel, then send: at once when the cancel leaves nothing in flight.
  if (state === 'llm_requesting (in flight)') {
    return {
      phase: 'cancelling',
      effects: ['abort_llm', 'schedule_timer'],
      check: (r) => expect(waiting(r.state)).toEqual(['interrupt:later']),
    };
  }
  const cancelEffects: Record<string, EffectType[]> = {
    'llm_requesting (retry pending)': ['cancel_timer'],
    tool_executing: ['kill_tool', 'persist_message', 'persist_message'],
    awaiting_sub_agents: ['stop_sub_agent', 'stop_sub_agent', 'cancel_timer', 'persist_message'],
    awaiting_mode_approval: ['persist_message', 'persist_message'],
  };
  return {
    phase: 'llm_requesting',
    effects: [...cancelEffects[state]!, 'persist_message', 'request_llm'],
    check: (r) => {
      expect(userTexts(r)).toEqual(['later']);
      // The cancel's synthetic results come first: the message follows the answered calls.
      const types = persisted(r).map((m) => m.type);
      expect(types.at(-1)).toBe('user');
      expect(r.state.pending).toBeUndefined();
    },
  };
}

const DOC_DELIVERY_EVERY_STATE: Row[] = STATES.flatMap((st) =>
  (['reject', 'queue', 'steer', 'interrupt'] as const).map((mode): Row => ({
    label: `${st.name} + user_message(${mode})`,
    setup: st.setup,
    event: () => deliver(mode, 'later'),
    expect: deliveryExpectation(st.name, mode),
  })),
);

const DOC_DELIVERY: Row[] = [
  ...(['queue', 'steer', 'interrupt', 'reject'] as const).map((mode): Row => ({
    label: `sub-agent + user_message(${mode}) → reject sub_agent_driven_by_parent`,
    ctx: subCtx,
    setup: (c) => c.toLlm(),
    event: () => deliver(mode, 'later'),
    expect: { reject: 'sub_agent_driven_by_parent' },
  })),
  {
    label: 'busy + blank user_message(queue) → reject empty_message',
    setup: (c) => c.toLlm(),
    event: () => deliver('queue', '  '),
    expect: { reject: 'empty_message' },
  },
  {
    label: `busy + user_message(queue) with ${MAX_PENDING_MESSAGES} waiting → reject queue_full`,
    setup: (c) => {
      c.toLlm();
      for (let i = 0; i < MAX_PENDING_MESSAGES; i++) c.ok(deliver('queue', `q${i}`));
    },
    event: () => deliver('steer', 'one more'),
    expect: { reject: 'queue_full' },
  },
  {
    label: 'tool boundary: the last tool_complete delivers the steering messages after the results; queued ones wait',
    setup: (c) => {
      c.toTools([bash('b1'), bash('b2')]);
      c.ok(deliver('queue', 'q1'));
      c.ok(deliver('steer', 's1'));
      c.ok(toolComplete('b1'));
      c.ok(deliver('steer', 's2'));
    },
    event: () => toolComplete('b2'),
    expect: {
      phase: 'llm_requesting',
      effects: ['persist_message', 'persist_message', 'persist_message', 'request_llm'],
      check: (r) => {
        expect(persisted(r).map((m) => m.type)).toEqual(['tool', 'user', 'user']);
        expect(userTexts(r)).toEqual(['s1', 's2']);
        expect(waiting(r.state)).toEqual(['queue:q1']);
      },
    },
  },
  {
    label: 'tool_executing + tool_complete with tools left: the steering message still waits',
    setup: (c) => {
      c.toTools([bash('b1'), bash('b2')]);
      c.ok(deliver('steer', 's1'));
    },
    event: () => toolComplete('b1'),
    expect: {
      phase: 'tool_executing',
      effects: ['persist_message', 'execute_tool'],
      check: (r) => expect(waiting(r.state)).toEqual(['steer:s1']),
    },
  },
  {
    label: 'awaiting_mode_approval + approve (last call): a tool boundary, the steering message joins the results',
    setup: (c) => {
      c.toTools([upgrade('u1')]);
      c.ok(deliver('steer', 's1'));
    },
    event: () => approve,
    expect: {
      phase: 'llm_requesting',
      effects: ['persist_message', 'persist_message', 'notify', 'persist_message', 'request_llm'],
      check: (r) => {
        expect(persisted(r).map((m) => m.type)).toEqual(['tool', 'system', 'user']);
        expect(r.state.pending).toBeUndefined();
      },
    },
  },
  {
    label: 'the turn ends (llm_response end_turn) with steering and queued messages: the steering ones are the next turn',
    setup: (c) => {
      c.toLlm();
      c.ok(deliver('queue', 'q1'));
      c.ok(deliver('steer', 's1'));
      c.ok(deliver('queue', 'q2'));
      c.ok(deliver('steer', 's2'));
    },
    event: (c) => response(c.requestId, { text: 'done' }),
    expect: {
      phase: 'llm_requesting',
      effects: ['persist_message', 'persist_message', 'persist_message', 'request_llm'],
      check: (r) => {
        expect(persisted(r).map((m) => m.type)).toEqual(['agent', 'user', 'user']);
        expect(userTexts(r)).toEqual(['s1', 's2']);
        expect(waiting(r.state)).toEqual(['queue:q1', 'queue:q2']);
      },
    },
  },
  {
    label: 'the turn ends with queued messages only: the first one is sent, the others wait, in order',
    setup: (c) => {
      c.toLlm();
      c.ok(deliver('queue', 'q1'));
      c.ok(deliver('queue', 'q2'));
    },
    event: (c) => response(c.requestId, { text: 'done' }),
    expect: {
      phase: 'llm_requesting',
      effects: ['persist_message', 'persist_message', 'request_llm'],
      check: (r) => {
        expect(userTexts(r)).toEqual(['q1']);
        expect(waiting(r.state)).toEqual(['queue:q2']);
      },
    },
  },
  {
    label: 'a turn that ends in error delivers the next queued message too (error is at rest)',
    setup: (c) => {
      c.toLlm();
      c.ok(deliver('queue', 'q1'));
    },
    event: (c) => llmError(c.requestId, { retryable: false }),
    expect: {
      phase: 'llm_requesting',
      effects: ['persist_message', 'notify', 'persist_message', 'request_llm'],
      check: (r) => {
        expect(persisted(r).map((m) => m.type)).toEqual(['error', 'user']);
        expect(r.state.pending).toBeUndefined();
      },
    },
  },
  {
    label: 'user_cancel keeps the queue: the cancel completes, then the first queued message is sent',
    setup: (c) => {
      c.toTools([bash('b1')]);
      c.ok(deliver('queue', 'q1'));
      c.ok(deliver('queue', 'q2'));
    },
    event: () => userCancel,
    expect: {
      phase: 'llm_requesting',
      effects: ['kill_tool', 'persist_message', 'persist_message', 'request_llm'],
      check: (r) => {
        expect(persisted(r).map((m) => m.type)).toEqual(['tool', 'user']);
        expect(userTexts(r)).toEqual(['q1']);
        expect(waiting(r.state)).toEqual(['queue:q2']);
      },
    },
  },
  {
    label: 'cancelling with an interrupting message + the abort acknowledgement → the message is sent',
    setup: (c) => {
      c.toLlm();
      c.ok(deliver('interrupt', 'i1'));
    },
    event: (c) => llmError(c.requestId, { retryable: false, errorKind: 'cancelled', aborted: true }),
    expect: {
      phase: 'llm_requesting',
      effects: ['cancel_timer', 'persist_message', 'request_llm'],
      check: (r) => {
        expect(userTexts(r)).toEqual(['i1']);
        expect(r.state.pending).toBeUndefined();
      },
    },
  },
  {
    label: 'work_lost with a waiting message: idle, then the message is sent',
    setup: (c) => {
      c.toTools([bash('b1')]);
      c.ok(deliver('steer', 's1'));
    },
    event: () => workLost,
    expect: {
      phase: 'llm_requesting',
      effects: ['kill_tool', 'persist_message', 'persist_message', 'request_llm'],
      check: (r) => expect(userTexts(r)).toEqual(['s1']),
    },
  },
  {
    label: 'user_cancel_queued (waiting) → removed, same phase, no effects',
    setup: (c) => {
      c.toLlm();
      c.ok(deliver('queue', 'q1'));
      c.ok(deliver('queue', 'q2'));
    },
    event: (c) => cancelQueued(c.state.pending![0]!.id),
    expect: { phase: 'llm_requesting', effects: [], check: (r) => expect(waiting(r.state)).toEqual(['queue:q2']) },
  },
  {
    label: 'user_cancel_queued (unknown or delivered) → reject not_queued',
    setup: (c) => c.toLlm(),
    event: () => cancelQueued(`${CID}/q/1`),
    expect: { reject: 'not_queued' },
  },
  {
    label: 'context_exhausted + user_cancel_queued → reject context_exhausted',
    setup: (c) => c.toExhausted(),
    event: () => cancelQueued(`${CID}/q/1`),
    expect: { reject: 'context_exhausted' },
  },
  {
    label: 'sub-agent + user_cancel_queued → reject sub_agent_driven_by_parent',
    ctx: subCtx,
    setup: (c) => c.toLlm(),
    event: () => cancelQueued(`${CID}/q/1`),
    expect: { reject: 'sub_agent_driven_by_parent' },
  },
];

describe('docs/state-machine.md: delivery modes from every state', () => {
  it.each(cases(DOC_DELIVERY_EVERY_STATE))('%s', (_l, row) => runRow(row));
});
describe('docs/state-machine.md: delivery modes', () => {
  it.each(cases(DOC_DELIVERY))('%s', (_l, row) => runRow(row));
});
