/**
 * Transition matrix, docs/state-machine.md transitions the spec tables do not cover
 * (runner: test/core-support/matrix-rows.ts).
 */
import { describe, it, expect } from '@jest/globals';
import { toolSetFor } from '@bedrock/contracts/tools';
import { CANCELLED_SKIPPED, CONTINUATION_FALLBACK_SUMMARY, LOST_RESULT } from './index.ts';
import {
  CID,
  PARENT_ID,
  approve,
  bash,
  llmError,
  parentCtx,
  spawn,
  subAgentResult,
  subAgentStart,
  subAgentStop,
  subCtx,
  think,
  timerFired,
  triggerContinuation,
  upgrade,
  userCancel,
  workLost,
} from '../../test/core-support/matrix-fixtures.ts';
import {
  type Row,
  persisted,
  notes,
  effectsOf,
  results,
  resultFor,
  textOf,
  phase,
  P_TOOLS,
  runRow,
  cases,
  toThirdAttempt,
} from '../../test/core-support/matrix-rows.ts';

const DOC_TRANSITIONS: Row[] = [
  {
    label: 'doc: S idle (seq 0) + sub_agent_start → LLM | persist user message with the task',
    ctx: subCtx,
    setup: () => {},
    event: () => subAgentStart('count the files'),
    expect: {
      phase: 'llm_requesting',
      effects: ['persist_message', 'request_llm'],
      check: (r) => {
        expect(textOf(persisted(r, 'user')[0]!)).toContain('count the files');
        expect(effectsOf(r, 'request_llm')[0]!.toolNames).toEqual(toolSetFor({ isSubAgent: true, sandboxAvailable: true }));
        expect(r.state.mode).toBe('restricted');
      },
    },
  },
  {
    label: 'doc: retry delay honours retry-after',
    setup: (c) => c.toLlm(),
    event: (c) => llmError(c.requestId, { retryAfterMs: 7000 }),
    expect: {
      phase: 'llm_requesting',
      effects: ['schedule_timer', 'notify'],
      check: (r) => expect(effectsOf(r, 'schedule_timer')[0]!.delayMs).toBe(7000),
    },
  },
  {
    label: 'doc: retry delay is capped by retryMaxDelayMs',
    ctx: () => parentCtx({ policy: { retryMaxDelayMs: 1500 } }),
    setup: (c) => c.toLlm(),
    event: (c) => llmError(c.requestId, { retryAfterMs: 7000 }),
    expect: {
      phase: 'llm_requesting',
      effects: ['schedule_timer', 'notify'],
      check: (r) => expect(effectsOf(r, 'schedule_timer')[0]!.delayMs).toBe(1500),
    },
  },
  {
    label: 'doc: llm_requesting (retry pending) + user_cancel → idle | cancel_timer',
    setup: (c) => c.retryPending(),
    event: () => userCancel,
    expect: {
      phase: 'idle',
      effects: ['cancel_timer'],
      check: (r, c) => expect(effectsOf(r, 'cancel_timer')[0]!.timerId).toBe(c.timer('retry')),
    },
  },
  {
    label: 'doc: cancelling + llm_error (abort acknowledgement) → idle | cancel_timer',
    setup: (c) => c.toCancelling(),
    event: (c) => llmError(c.requestId, { retryable: false, errorKind: 'cancelled', aborted: true }),
    expect: { phase: 'idle', effects: ['cancel_timer'] },
  },
  {
    label: 'doc: cancelling + llm_error (abort acknowledgement with the streamed text) → idle | cancel_timer, persist agent (cancelled)',
    setup: (c) => c.toCancelling(),
    event: (c) => llmError(c.requestId, { retryable: false, errorKind: 'cancelled', aborted: true, partialText: 'What the user saw' }),
    expect: {
      phase: 'idle',
      effects: ['cancel_timer', 'persist_message'],
      check: (r) =>
        expect(effectsOf(r, 'persist_message')[0]!.message).toEqual({
          type: 'agent',
          content: [{ type: 'text', text: 'What the user saw' }],
          stopReason: 'cancelled',
        }),
    },
  },
  {
    label: 'doc: S llm_requesting{3} + llm_error retryable → failed | persist error, notify error, notify_parent',
    ctx: subCtx,
    setup: toThirdAttempt,
    event: (c) => llmError(c.requestId),
    expect: {
      phase: 'failed',
      effects: ['persist_message', 'notify', 'notify_parent'],
      check: (r) => {
        expect(phase(r.state, 'failed').error.startsWith('Failed after 3 attempts: ')).toBe(true);
        expect(effectsOf(r, 'notify_parent')[0]).toMatchObject({ parentId: PARENT_ID, outcome: { success: false } });
      },
    },
  },
  {
    label: 'doc: S llm_requesting + llm_error not retryable → failed',
    ctx: subCtx,
    setup: (c) => c.toLlm(),
    event: (c) => llmError(c.requestId, { retryable: false }),
    expect: { phase: 'failed', effects: ['persist_message', 'notify', 'notify_parent'] },
  },
  {
    label: 'doc: awaiting_sub_agents + sub_agent_result (pending, not last) → same | notify sub_agent_progress',
    setup: (c) => c.toTools([spawn('s1', ['alpha', 'beta'])]),
    event: () => subAgentResult(`${CID}--s1--1`, false, 'could not', 'beta'),
    expect: {
      phase: 'awaiting_sub_agents',
      effects: ['notify'],
      check: (r) => {
        expect(notes(r)[0]).toMatchObject({
          kind: 'sub_agent_progress',
          agentId: `${CID}--s1--1`,
          success: false,
          finishedCount: 1,
          totalCount: 2,
        });
        expect(phase(r.state, 'awaiting_sub_agents').pending).toEqual([`${CID}--s1--0`]);
      },
    },
  },
  {
    label: 'doc: awaiting_sub_agents + last result → next tool; aggregated result lists every agent, failures included',
    setup: (c) => c.toTools([spawn('s1', ['alpha', 'beta']), bash('b1')]).ok(subAgentResult(`${CID}--s1--1`, false, 'could not', 'beta')),
    event: () => subAgentResult(`${CID}--s1--0`, true, 'found it', 'alpha'),
    expect: {
      phase: 'tool_executing',
      effects: ['cancel_timer', 'persist_message', 'execute_tool'],
      optional: ['notify'],
      check: (r) => {
        const res = resultFor(r, 's1');
        for (const s of ['alpha', 'beta', 'found it', 'could not']) expect(res.content).toContain(s);
        expect(effectsOf(r, 'execute_tool')[0]!.toolUseId).toBe('b1');
      },
    },
  },
  {
    label: 'doc: awaiting_sub_agents + timer_fired (matching) → as last result; pending count as failed; stop_sub_agent each',
    setup: (c) => c.toTools([spawn('s1', ['alpha', 'beta', 'gamma'])]).ok(subAgentResult(`${CID}--s1--0`, true, 'found it', 'alpha')),
    event: (c) => timerFired(c.timer('sub_agent_timeout')),
    expect: {
      phase: 'llm_requesting',
      effects: ['stop_sub_agent', 'stop_sub_agent', 'persist_message', 'request_llm'],
      optional: ['cancel_timer', 'notify'],
      check: (r) => {
        expect(
          effectsOf(r, 'stop_sub_agent')
            .map((e) => e.agentId)
            .sort(),
        ).toEqual([`${CID}--s1--1`, `${CID}--s1--2`]);
        const res = resultFor(r, 's1');
        for (const s of ['alpha', 'beta', 'gamma', 'found it']) expect(res.content).toContain(s);
      },
    },
  },
  {
    label: 'doc: awaiting_sub_agents + user_cancel → idle | stop_sub_agent × pending, cancel_timer, synthetic results',
    setup: (c) => c.toTools([spawn('s1', ['alpha', 'beta']), bash('b1')]).ok(subAgentResult(`${CID}--s1--0`)),
    event: () => userCancel,
    expect: {
      phase: 'idle',
      effects: ['stop_sub_agent', 'cancel_timer', 'persist_message', 'persist_message'],
      check: (r) => {
        expect(effectsOf(r, 'stop_sub_agent')[0]!.agentId).toBe(`${CID}--s1--1`);
        expect(resultFor(r, 's1')).toMatchObject({ isError: true, cancelled: true });
        expect(resultFor(r, 'b1')).toMatchObject({ content: CANCELLED_SKIPPED, isError: true, cancelled: true });
      },
    },
  },
  {
    label: 'doc: awaiting_mode_approval + user_approve_upgrade, nothing left → LLM',
    setup: (c) => c.toTools([upgrade('u1')]),
    event: () => approve,
    expect: {
      phase: 'llm_requesting',
      effects: ['persist_message', 'persist_message', 'notify', 'request_llm'],
      check: (r) => expect(r.state.mode).toBe('unrestricted'),
    },
  },
  {
    label: 'doc: awaiting_mode_approval + user_cancel → idle; synthetic results; mode unchanged',
    setup: (c) => c.toTools([upgrade('u1'), bash('b1')]),
    event: () => userCancel,
    expect: {
      phase: 'idle',
      effects: ['persist_message', 'persist_message'],
      check: (r) => {
        expect(r.state.mode).toBe('restricted');
        expect(resultFor(r, 'u1')).toMatchObject({ isError: true, cancelled: true });
        expect(resultFor(r, 'b1')).toMatchObject({ content: CANCELLED_SKIPPED, isError: true, cancelled: true });
      },
    },
  },
  {
    label: 'doc: error + user_trigger_continuation → awaiting_continuation',
    setup: (c) => c.toError(),
    event: () => triggerContinuation,
    expect: { phase: 'awaiting_continuation', effects: ['request_llm'] },
  },
  {
    label: 'doc: awaiting_continuation + llm_error retryable (attempt < max) → retry',
    setup: (c) => c.toContinuation(),
    event: (c) => llmError(c.requestId),
    expect: {
      phase: 'awaiting_continuation',
      effects: ['schedule_timer', 'notify'],
      check: (r) => {
        expect(phase(r.state, 'awaiting_continuation').attempt).toBe(2);
        expect(notes(r)[0]!.kind).toBe('retry_scheduled');
      },
    },
  },
  {
    label: 'doc: awaiting_continuation (retry pending) + timer_fired → request_llm (continuation)',
    setup: (c) => c.toContinuation().ok(llmError(c.requestId)),
    event: (c) => timerFired(c.timer('retry')),
    expect: {
      phase: 'awaiting_continuation',
      effects: ['request_llm'],
      check: (r) =>
        expect(effectsOf(r, 'request_llm')[0]).toMatchObject({ purpose: 'continuation', toolNames: P_TOOLS, maxTokens: 0, attempt: 2 }),
    },
  },
  {
    label: 'doc: awaiting_continuation (retry pending) + user_cancel → context_exhausted | cancel_timer, persist, notify',
    setup: (c) => c.toContinuation().ok(llmError(c.requestId)),
    event: () => userCancel,
    expect: { phase: 'context_exhausted', effects: ['cancel_timer', 'persist_message', 'notify'] },
  },
  {
    label: 'doc: S llm_requesting + user_cancel → failed{cancelled} | abort_llm, notify_parent',
    ctx: subCtx,
    setup: (c) => c.toLlm(),
    event: () => userCancel,
    expect: {
      phase: 'failed',
      effects: ['abort_llm', 'notify_parent'],
      check: (r) => {
        expect(phase(r.state, 'failed').errorKind).toBe('cancelled');
        expect(effectsOf(r, 'notify_parent')[0]).toMatchObject({
          parentId: PARENT_ID,
          outcome: { success: false, errorKind: 'cancelled' },
        });
      },
    },
  },
  {
    label: 'doc: S tool_executing + sub_agent_stop → failed{cancelled} | kill_tool, notify_parent',
    ctx: subCtx,
    setup: (c) => c.toTools([bash('b1'), think('t2')]),
    event: () => subAgentStop,
    expect: {
      phase: 'failed',
      effects: ['kill_tool', 'notify_parent'],
      optional: ['persist_message'],
      check: (r) => expect(phase(r.state, 'failed').errorKind).toBe('cancelled'),
    },
  },
  {
    label: 'doc: S llm_requesting (retry pending) + sub_agent_stop → failed | cancel_timer, notify_parent',
    ctx: subCtx,
    setup: (c) => c.retryPending(),
    event: () => subAgentStop,
    expect: { phase: 'failed', effects: ['cancel_timer', 'notify_parent'] },
  },
  {
    label: 'doc: P llm_requesting + work_lost → idle | abort_llm',
    setup: (c) => c.toLlm(),
    event: () => workLost,
    expect: { phase: 'idle', effects: ['abort_llm'], optional: ['notify'] },
  },
  {
    label: 'doc: P tool_executing + work_lost → idle | lost results for pending calls, kill_tool',
    setup: (c) => c.toTools([bash('b1'), think('t2')]),
    event: () => workLost,
    expect: {
      phase: 'idle',
      effects: ['persist_message', 'persist_message', 'kill_tool'],
      optional: ['notify'],
      check: (r) => {
        expect(results(r)).toEqual([
          { toolUseId: 'b1', content: LOST_RESULT, isError: true, cancelled: true },
          { toolUseId: 't2', content: LOST_RESULT, isError: true, cancelled: true },
        ]);
      },
    },
  },
  {
    label: 'doc: P tool_executing + work_lost at the current seq → idle | lost results',
    setup: (c) => c.toTools([bash('b1')]),
    event: (c) => ({ ...workLost, atSeq: c.state.seq }),
    expect: { phase: 'idle', effects: ['persist_message', 'kill_tool'], optional: ['notify'] },
  },
  {
    label: 'doc: P awaiting_sub_agents + work_lost → idle | stop_sub_agent, lost result',
    setup: (c) => c.toTools([spawn('s1', ['a'])]),
    event: () => workLost,
    expect: {
      phase: 'idle',
      effects: ['stop_sub_agent', 'persist_message'],
      optional: ['cancel_timer', 'notify'],
      check: (r) => expect(resultFor(r, 's1')).toMatchObject({ content: LOST_RESULT, isError: true, cancelled: true }),
    },
  },
  {
    label: 'doc: P awaiting_continuation + work_lost → context_exhausted{fallback}',
    setup: (c) => c.toContinuation(),
    event: () => workLost,
    expect: {
      phase: 'context_exhausted',
      effects: ['abort_llm', 'persist_message'],
      optional: ['notify'],
      check: (r) => expect(phase(r.state, 'context_exhausted').summary).toBe(CONTINUATION_FALLBACK_SUMMARY),
    },
  },
  {
    label: 'doc: S llm_requesting + work_lost → failed',
    ctx: subCtx,
    setup: (c) => c.toLlm(),
    event: () => workLost,
    expect: { phase: 'failed', effects: ['abort_llm'], optional: ['notify_parent', 'notify', 'persist_message'] },
  },
];

describe('docs/state-machine.md: transitions', () => {
  it.each(cases(DOC_TRANSITIONS))('%s', (_l, row) => runRow(row));
});
