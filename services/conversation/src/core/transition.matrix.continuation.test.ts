/**
 * Transition matrix, spec 000 "State Transition Matrix Additions" (continuation): one case per
 * row (runner: test/core-support/matrix-rows.ts).
 */
import { describe, it, expect } from '@jest/globals';
import { CONTINUATION_CANCELLED_SUMMARY, CONTINUATION_FALLBACK_SUMMARY, NOT_EXECUTED_CONTEXT, addUsage } from './index.ts';
import {
  type Conv,
  CID,
  PARENT_ID,
  bash,
  llmError,
  patch,
  response,
  subAgentResult,
  subAgentStart,
  subAgentStop,
  subCtx,
  timerFired,
  toolComplete,
  triggerContinuation,
  usage,
  userCancel,
  userMessage,
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
} from '../../test/core-support/matrix-rows.ts';

// =============================================================================================
// spec 000, "State Transition Matrix Additions" (continuation; 8 rows, the no-op row over several events)

const SPEC_000_CONTINUATION: Row[] = [
  {
    label:
      '000+ #1 LlmRequesting + LlmResponse(>= 90%, ThresholdBased) → AwaitingContinuation | PersistMessage, PersistState, RequestContinuation',
    setup: (c) => c.toLlm(),
    event: (c) => response(c.requestId, { text: 'about to run', calls: [bash('t1'), patch('t2')], tokens: 950 }),
    expect: {
      phase: 'awaiting_continuation',
      effects: ['persist_message', 'persist_message', 'persist_message', 'request_llm'],
      check: (r) => {
        const p = phase(r.state, 'awaiting_continuation');
        expect(p.attempt).toBe(1);
        expect(p.retry).toBeNull();
        expect(p.rejectedToolCalls.map((x) => x.id)).toEqual(['t1', 't2']);
        expect(p.triggerUsage).toEqual(usage(950));
        expect(effectsOf(r, 'request_llm')[0]).toMatchObject({
          requestId: p.requestId,
          purpose: 'continuation',
          toolNames: P_TOOLS,
          maxTokens: 0,
          attempt: 1,
        });
        expect(effectsOf(r, 'request_llm')[0]!.rejectedToolCalls.map((x) => x.id)).toEqual(['t1', 't2']);
        expect(results(r)).toEqual([
          { toolUseId: 't1', content: NOT_EXECUTED_CONTEXT, isError: true, cancelled: true },
          { toolUseId: 't2', content: NOT_EXECUTED_CONTEXT, isError: true, cancelled: true },
        ]);
      },
    },
  },
  {
    label: '000+ #1 (exactly 90%) LlmResponse → AwaitingContinuation',
    setup: (c) => c.toLlm(),
    event: (c) => response(c.requestId, { text: 'x', tokens: 900 }),
    expect: { phase: 'awaiting_continuation', effects: ['persist_message', 'request_llm'] },
  },
  {
    label: '000+ #1 (stop_reason model_context_window_exceeded, low usage) → AwaitingContinuation',
    setup: (c) => c.toLlm(),
    event: (c) => response(c.requestId, { text: 'x', tokens: 10, stopReason: 'model_context_window_exceeded' }),
    expect: { phase: 'awaiting_continuation', effects: ['persist_message', 'request_llm'] },
  },
  {
    label: '000+ #2 LlmRequesting + LlmResponse(>= 90%, Unhandled: sub-agent) → Failed | NotifyParent',
    ctx: subCtx,
    setup: (c) => c.toLlm(),
    event: (c) => response(c.requestId, { text: 'hmm', calls: [bash('t1')], tokens: 950 }),
    expect: {
      phase: 'failed',
      effects: ['persist_message', 'persist_message', 'notify_parent'],
      check: (r) => {
        expect(phase(r.state, 'failed')).toMatchObject({ error: 'Context window exhausted', errorKind: 'context_exhausted' });
        expect(effectsOf(r, 'notify_parent')[0]).toMatchObject({
          parentId: PARENT_ID,
          outcome: { success: false, errorKind: 'context_exhausted' },
        });
        expect(resultFor(r, 't1').content).toBe(NOT_EXECUTED_CONTEXT);
      },
    },
  },
  {
    label: '000+ #3 AwaitingContinuation + ContinuationResponse → ContextExhausted | PersistMessage, PersistState, NotifyContextExhausted',
    setup: (c) => c.toLlm().respond({ text: 'big', tokens: 950 }),
    event: (c) => response(c.requestId, { text: 'the summary', tokens: 40 }),
    expect: {
      phase: 'context_exhausted',
      effects: ['persist_message', 'notify'],
      check: (r) => {
        expect(phase(r.state, 'context_exhausted')).toEqual({
          kind: 'context_exhausted',
          summary: 'the summary',
          finalUsage: addUsage(usage(950), usage(40)),
        });
        expect(textOf(persisted(r, 'continuation')[0]!)).toBe('the summary');
        expect(notes(r)[0]).toEqual({ kind: 'context_exhausted', summary: 'the summary' });
      },
    },
  },
  {
    label: '000+ #3 (manual trigger) AwaitingContinuation + ContinuationResponse → ContextExhausted{finalUsage = last usage + response}',
    setup: (c) => c.toLlm().respond({ text: 'hi', tokens: 820 }).toContinuation(),
    event: (c) => response(c.requestId, { text: 'summary', tokens: 40 }),
    expect: {
      phase: 'context_exhausted',
      effects: ['persist_message', 'notify'],
      check: (r) => expect(phase(r.state, 'context_exhausted').finalUsage).toEqual(addUsage(usage(820), usage(40))),
    },
  },
  {
    label:
      '000+ #4 AwaitingContinuation + ContinuationFailed (non-retryable) → ContextExhausted | PersistMessage(fallback), NotifyContextExhausted',
    setup: (c) => c.toContinuation(),
    event: (c) => llmError(c.requestId, { retryable: false }),
    expect: {
      phase: 'context_exhausted',
      effects: ['persist_message', 'notify'],
      check: (r) => {
        expect(phase(r.state, 'context_exhausted').summary).toBe(CONTINUATION_FALLBACK_SUMMARY);
        expect(textOf(persisted(r, 'continuation')[0]!)).toBe(CONTINUATION_FALLBACK_SUMMARY);
        expect(notes(r)[0]).toEqual({ kind: 'context_exhausted', summary: CONTINUATION_FALLBACK_SUMMARY });
      },
    },
  },
  {
    label: '000+ #4 AwaitingContinuation{3} + ContinuationFailed (retries exhausted) → ContextExhausted(fallback)',
    setup: (c) => {
      c.toContinuation();
      for (let i = 0; i < 2; i++) {
        c.ok(llmError(c.requestId));
        c.ok(timerFired(c.timer('retry')));
      }
    },
    event: (c) => llmError(c.requestId),
    expect: {
      phase: 'context_exhausted',
      effects: ['persist_message', 'notify'],
      check: (r) => expect(phase(r.state, 'context_exhausted').summary).toBe(CONTINUATION_FALLBACK_SUMMARY),
    },
  },
  {
    label: '000+ #5 AwaitingContinuation + UserCancel → ContextExhausted | PersistMessage(cancelled), NotifyContextExhausted',
    setup: (c) => c.toContinuation(),
    event: () => userCancel,
    expect: {
      phase: 'context_exhausted',
      effects: ['abort_llm', 'persist_message', 'notify'],
      check: (r, _c, before) => {
        expect(phase(r.state, 'context_exhausted').summary).toBe(CONTINUATION_CANCELLED_SUMMARY);
        expect(effectsOf(r, 'abort_llm')[0]!.requestId).toBe(phase(before, 'awaiting_continuation').requestId);
        expect(textOf(persisted(r, 'continuation')[0]!)).toBe(CONTINUATION_CANCELLED_SUMMARY);
      },
    },
  },
  {
    label: '000+ #6 ContextExhausted + UserMessage → REJECT "context exhausted"',
    setup: (c) => c.toExhausted(),
    event: () => userMessage(),
    expect: { reject: 'context_exhausted' },
  },
  ...(
    [
      ['late llm_response', (_c: Conv) => response(`${CID}/llm/1`, { text: 'late' })],
      ['late llm_error', () => llmError(`${CID}/llm/1`)],
      ['timer_fired', () => timerFired(`${CID}/timer/1`)],
      ['tool_complete', () => toolComplete('t1')],
      ['sub_agent_result', () => subAgentResult(`${CID}--s1--0`)],
      ['work_lost', () => workLost],
      ['sub_agent_start', () => subAgentStart()],
      ['sub_agent_stop', () => subAgentStop],
    ] as const
  ).map(([name, ev]): Row => ({
    label: `000+ #7 ContextExhausted + * (${name}) → ContextExhausted | no-op`,
    setup: (c) => c.toExhausted(),
    event: ev,
    expect: { noop: true },
  })),
  {
    label: '000+ #8 Idle + UserTriggerContinuation → AwaitingContinuation | PersistState, RequestContinuation',
    setup: (c) => c.toLlm().respond({ text: 'hi', tokens: 820 }),
    event: () => triggerContinuation,
    expect: {
      phase: 'awaiting_continuation',
      effects: ['request_llm'],
      check: (r) => {
        const p = phase(r.state, 'awaiting_continuation');
        expect(p).toMatchObject({ attempt: 1, retry: null, rejectedToolCalls: [] });
        // spec 000: trigger_usage = the last usage.
        expect(p.triggerUsage).toEqual(usage(820));
        expect(effectsOf(r, 'request_llm')[0]).toMatchObject({
          requestId: p.requestId,
          purpose: 'continuation',
          toolNames: P_TOOLS,
          rejectedToolCalls: [],
          attempt: 1,
        });
      },
    },
  },
];

describe('spec 000 State Transition Matrix Additions (continuation)', () => {
  it.each(cases(SPEC_000_CONTINUATION))('%s', (_l, row) => runRow(row));
});
