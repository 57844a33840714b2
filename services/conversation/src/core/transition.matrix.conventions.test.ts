/**
 * docs/state-machine.md conventions (initial state, effect, timer and request ids, determinism),
 * and cancelling + timer_fired.
 */
import { describe, it, expect } from '@jest/globals';
import { initialState, transition, type Effect } from './index.ts';
import {
  CID,
  Conv,
  bash,
  llmError,
  noSandboxCtx,
  parentCtx,
  response,
  spawn,
  subCtx,
  timerFired,
  toolComplete,
  userCancel,
  userMessage,
} from '../../test/core-support/matrix-fixtures.ts';
import { runRow } from '../../test/core-support/matrix-rows.ts';

describe('docs/state-machine.md: conventions', () => {
  it('initialState: idle, seq 0, Restricted with a sandbox, Unrestricted without (parents and sub-agents)', () => {
    expect(initialState(parentCtx())).toMatchObject({
      phase: { kind: 'idle' },
      mode: 'restricted',
      seq: 0,
      llmRequests: 0,
      lastUsage: null,
      contextWarned: false,
    });
    expect(initialState(noSandboxCtx()).mode).toBe('unrestricted');
    expect(initialState(subCtx()).mode).toBe('restricted');
    expect(initialState(subCtx({ sandboxAvailable: false })).mode).toBe('unrestricted');
  });

  it('effect ids are `${conversationId}/${seq}/${i}` and timer ids `${conversationId}/timer/${seq}`', () => {
    const c = new Conv(parentCtx());
    const check = (effects: readonly Effect[]): void => {
      effects.forEach((e, i) => expect(e.id).toBe(`${CID}/${c.state.seq}/${i}`));
      for (const e of effects) if (e.type === 'schedule_timer') expect(e.timerId).toBe(`${CID}/timer/${c.state.seq}`);
    };
    check(c.ok(userMessage()));
    check(c.ok(llmError(c.requestId)));
    check(c.ok(timerFired(c.timer('retry'))));
    check(c.ok(response(c.requestId, { calls: [bash('b1'), bash('b2')] })));
    check(c.ok(toolComplete('b1')));
    check(c.ok(userCancel));
    const ids = c.effects.map((e) => e.id);
    expect(new Set(ids).size).toBe(ids.length);
  });

  it('LLM request ids are `${conversationId}/llm/${n}`, a new one per attempt', () => {
    const c = new Conv(parentCtx());
    c.ok(userMessage());
    c.ok(llmError(c.requestId));
    c.ok(timerFired(c.timer('retry')));
    c.ok(response(c.requestId, { text: 'x' }));
    c.ok(userMessage());
    const requested = c.effects.flatMap((e) => (e.type === 'request_llm' ? [e.requestId] : []));
    expect(requested).toEqual([`${CID}/llm/1`, `${CID}/llm/2`, `${CID}/llm/3`]);
    expect(c.state.llmRequests).toBe(3);
  });

  it('transition is deterministic: the same input gives the same output', () => {
    const c = new Conv(parentCtx()).toTools([bash('b1'), spawn('s1', ['a'])]);
    const ev = toolComplete('b1');
    expect(transition(c.state, c.ctx, ev)).toEqual(transition(c.state, c.ctx, ev));
  });
});

// The acknowledgement timed out: the abort is sent again in case the first signal was lost
// (docs/state-machine.md), and nothing is persisted.
describe('docs/state-machine.md: cancelling + timer_fired', () => {
  it('cancelling + timer_fired (matching) → idle, abort_llm sent again', () => {
    runRow({
      label: 'cancelling + timer_fired',
      setup: (c) => c.toCancelling(),
      event: (c) => timerFired(c.timer('cancel_timeout')),
      expect: { phase: 'idle', effects: ['abort_llm'] },
    });
  });
  it('cancelling + timer_fired (matching) → idle, nothing persisted', () => {
    runRow({
      label: 'cancelling + timer_fired',
      setup: (c) => c.toCancelling(),
      event: (c) => timerFired(c.timer('cancel_timeout')),
      expect: { phase: 'idle', effects: [], optional: ['abort_llm'] },
    });
  });
});
