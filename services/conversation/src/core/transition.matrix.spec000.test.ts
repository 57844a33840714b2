/**
 * Transition matrix, spec 000 "State Transition Matrix": one case per row. Each case reaches its
 * starting state by sending events from `initialState` and asserts the next phase kind and the
 * exact multiset of effect types (runner: test/core-support/matrix-rows.ts).
 */
import { describe, it, expect } from '@jest/globals';
import { CANCELLED_CURRENT, CANCELLED_SKIPPED } from './index.ts';
import {
  CID,
  bash,
  llmError,
  response,
  search,
  spawn,
  subAgentResult,
  think,
  timerFired,
  toolComplete,
  usage,
  userCancel,
  userMessage,
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
  IMG,
} from '../../test/core-support/matrix-rows.ts';

// =============================================================================================
// spec 000, "State Transition Matrix" (20 rows)

const SPEC_000: Row[] = [
  {
    label: '000 #1 Idle + UserMessage → AwaitingLlm | PersistMessage, PersistState (step)',
    setup: () => {},
    event: () => userMessage('look at this', [IMG]),
    step: true,
    expect: {
      phase: 'awaiting_llm',
      effects: ['persist_message'],
      check: (r) => {
        const [m] = persisted(r, 'user');
        expect(m!.content).toEqual([
          { type: 'text', text: 'look at this' },
          { type: 'image', mediaType: IMG.mediaType, data: IMG.data },
        ]);
      },
    },
  },
  {
    label: '000 #2 AwaitingLlm + (internal) → LlmRequesting{1} | RequestLlm (step)',
    setup: (c) => c.step(userMessage()),
    event: () => ({ type: 'begin_llm_request' }),
    step: true,
    expect: {
      phase: 'llm_requesting',
      effects: ['request_llm'],
      check: (r) => {
        const p = phase(r.state, 'llm_requesting');
        expect(p.attempt).toBe(1);
        expect(p.retry).toBeNull();
        const [req] = effectsOf(r, 'request_llm');
        expect(req).toMatchObject({
          requestId: p.requestId,
          attempt: 1,
          purpose: 'turn',
          toolNames: P_TOOLS,
          rejectedToolCalls: [],
          maxTokens: 0,
        });
        expect(p.maxTokens).toBe(0);
        expect(p.requestId).toBe(`${CID}/llm/1`);
      },
    },
  },
  {
    label: '000 #3 LlmRequesting + LlmResponse(end_turn, no tools) → Idle | PersistMessage, NotifyClient',
    setup: (c) => c.toLlm(),
    event: (c) => response(c.requestId, { text: 'all done', tokens: 120 }),
    expect: {
      phase: 'idle',
      effects: ['persist_message'],
      check: (r) => {
        const [m] = persisted(r, 'agent');
        expect(textOf(m!)).toBe('all done');
        expect(m!.stopReason).toBe('end_turn');
        expect(m!.usage).toEqual(usage(120));
        expect(r.state.lastUsage).toEqual(usage(120));
        expect(r.state.totalUsage).toEqual(usage(120));
      },
    },
  },
  {
    label: '000 #4 LlmRequesting + LlmResponse(tools) → ToolExecuting | PersistMessage, ExecuteTool(first)',
    setup: (c) => c.toLlm(),
    event: (c) => response(c.requestId, { text: 'running', calls: [bash('t1'), think('t2')] }),
    expect: {
      phase: 'tool_executing',
      effects: ['persist_message', 'execute_tool'],
      check: (r) => {
        expect(effectsOf(r, 'execute_tool')[0]).toMatchObject({
          toolUseId: 't1',
          name: 'bash',
          input: { command: 'ls' },
          mode: 'restricted',
        });
        const p = phase(r.state, 'tool_executing');
        expect(p.current.id).toBe('t1');
        expect(p.remaining.map((x) => x.id)).toEqual(['t2']);
        expect(p.total).toBe(2);
        const agent = persisted(r, 'agent')[0]!;
        expect(agent.content.filter((b) => b.type === 'tool_use').map((b) => (b.type === 'tool_use' ? b.id : ''))).toEqual(['t1', 't2']);
      },
    },
  },
  {
    label: '000 #5 LlmRequesting{1} + LlmError(retryable) → LlmRequesting{2} | ScheduleRetry, NotifyClient',
    setup: (c) => c.toLlm(),
    event: (c) => llmError(c.requestId),
    expect: {
      phase: 'llm_requesting',
      effects: ['schedule_timer', 'notify'],
      check: (r, _c, before) => {
        const p = phase(r.state, 'llm_requesting');
        expect(p.attempt).toBe(2);
        const [t] = effectsOf(r, 'schedule_timer');
        expect(t).toMatchObject({ purpose: 'retry', delayMs: 1000 });
        expect(p.retry).toEqual({ timerId: t!.timerId, delayMs: 1000 });
        expect(p.requestId).not.toBe(phase(before, 'llm_requesting').requestId);
        // DESIGN in spec 000: NotifyClient { "retrying", attempt: 2 }.
        expect(notes(r)[0]).toMatchObject({ kind: 'retry_scheduled', attempt: 2, maxAttempts: 3, delayMs: 1000, errorKind: 'server' });
      },
    },
  },
  {
    label: '000 #5 LlmRequesting{2} + LlmError(retryable) → LlmRequesting{3} | ScheduleRetry (2 s), NotifyClient',
    setup: (c) => {
      c.retryPending();
      c.ok(timerFired(c.timer('retry')));
    },
    event: (c) => llmError(c.requestId),
    expect: {
      phase: 'llm_requesting',
      effects: ['schedule_timer', 'notify'],
      check: (r) => {
        expect(phase(r.state, 'llm_requesting').attempt).toBe(3);
        expect(effectsOf(r, 'schedule_timer')[0]).toMatchObject({ purpose: 'retry', delayMs: 2000 });
      },
    },
  },
  {
    label: '000 #6 LlmRequesting{n} + RetryTimeout → LlmRequesting{n} | RequestLlm',
    setup: (c) => c.retryPending(),
    event: (c) => timerFired(c.timer('retry')),
    expect: {
      phase: 'llm_requesting',
      effects: ['request_llm'],
      check: (r, _c, before) => {
        const p = phase(r.state, 'llm_requesting');
        expect(p.attempt).toBe(2);
        expect(p.retry).toBeNull();
        const [req] = effectsOf(r, 'request_llm');
        expect(req).toMatchObject({ requestId: p.requestId, attempt: 2, purpose: 'turn' });
        expect(p.requestId).not.toBe(`${CID}/llm/1`);
        expect(p.requestId).toBe(phase(before, 'llm_requesting').requestId);
      },
    },
  },
  {
    label: '000 #7 LlmRequesting{3} + LlmError(retryable) → Error | NotifyClient',
    setup: toThirdAttempt,
    event: (c) => llmError(c.requestId, { errorKind: 'rate_limit', message: 'slow down' }),
    expect: {
      phase: 'error',
      effects: ['persist_message', 'notify'],
      check: (r) => {
        const p = phase(r.state, 'error');
        expect(p.errorKind).toBe('rate_limit');
        expect(p.message.startsWith('Failed after 3 attempts: ')).toBe(true);
        expect(p.message).toContain('slow down');
        expect(persisted(r, 'error')).toHaveLength(1);
        expect(notes(r)[0]).toMatchObject({ kind: 'error', errorKind: 'rate_limit' });
      },
    },
  },
  {
    label: '000 #8 LlmRequesting + LlmError(non-retryable) → Error | NotifyClient',
    setup: (c) => c.toLlm(),
    event: (c) => llmError(c.requestId, { retryable: false, errorKind: 'auth', message: 'invalid api key' }),
    expect: {
      phase: 'error',
      effects: ['persist_message', 'notify'],
      check: (r) => {
        const p = phase(r.state, 'error');
        expect(p.errorKind).toBe('auth');
        expect(p.message).toContain('invalid api key');
        expect(notes(r)[0]).toMatchObject({ kind: 'error', errorKind: 'auth' });
      },
    },
  },
  {
    label: '000 #9 LlmRequesting + UserCancel → Cancelling | PersistState (abort_llm + ack timeout)',
    setup: (c) => c.toLlm(),
    event: () => userCancel,
    expect: {
      phase: 'cancelling',
      effects: ['abort_llm', 'schedule_timer'],
      check: (r, _c, before) => {
        const p = phase(r.state, 'cancelling');
        const id = phase(before, 'llm_requesting').requestId;
        expect(p.requestId).toBe(id);
        expect(effectsOf(r, 'abort_llm')[0]!.requestId).toBe(id);
        const [t] = effectsOf(r, 'schedule_timer');
        expect(t).toMatchObject({ purpose: 'cancel_timeout', delayMs: 5000, timerId: p.timerId });
      },
    },
  },
  {
    label: '000 #10 LlmRequesting + UserMessage → REJECT "agent is busy"',
    setup: (c) => c.toLlm(),
    event: () => userMessage(),
    expect: { reject: 'agent_busy' },
  },
  {
    label: '000 #11 ToolExecuting(last) + ToolComplete → AwaitingLlm | PersistMessage (step)',
    setup: (c) => c.toTools([bash('t1')]),
    event: () => toolComplete('t1', 'files'),
    step: true,
    expect: {
      phase: 'awaiting_llm',
      effects: ['persist_message'],
      check: (r) => expect(resultFor(r, 't1')).toMatchObject({ content: 'files', isError: false }),
    },
  },
  {
    label: '000 #11 ToolExecuting(last) + ToolComplete → (transition) LlmRequesting{1} | PersistMessage, RequestLlm',
    setup: (c) => c.toTools([bash('t1')]),
    event: () => toolComplete('t1', 'files'),
    expect: {
      phase: 'llm_requesting',
      effects: ['persist_message', 'request_llm'],
      check: (r) => {
        expect(phase(r.state, 'llm_requesting').attempt).toBe(1);
        expect(effectsOf(r, 'request_llm')[0]).toMatchObject({ purpose: 'turn', attempt: 1, toolNames: P_TOOLS });
      },
    },
  },
  {
    label: '000 #12 ToolExecuting + ToolComplete → ToolExecuting(next) | PersistMessage, ExecuteTool(next)',
    setup: (c) => c.toTools([bash('t1'), search('t2'), think('t3')]),
    event: () => toolComplete('t1'),
    expect: {
      phase: 'tool_executing',
      effects: ['persist_message', 'execute_tool'],
      check: (r) => {
        expect(effectsOf(r, 'execute_tool')[0]).toMatchObject({ toolUseId: 't2', name: 'keyword_search' });
        const p = phase(r.state, 'tool_executing');
        expect([p.current.id, p.remaining.map((x) => x.id)]).toEqual(['t2', ['t3']]);
        expect(p.completed.map((x) => x.toolUseId)).toEqual(['t1']);
        expect(resultFor(r, 't1').content).toBe('ok');
      },
    },
  },
  {
    label: '000 #13 ToolExecuting + UserCancel → Idle | PersistMessage(synthetic), NotifyClient',
    setup: (c) => c.toTools([bash('t1'), think('t2'), bash('t3')]),
    event: () => userCancel,
    expect: {
      phase: 'idle',
      effects: ['persist_message', 'persist_message', 'persist_message', 'kill_tool'],
      check: (r) => {
        expect(results(r)).toEqual([
          { toolUseId: 't1', content: CANCELLED_CURRENT, isError: true, cancelled: true },
          { toolUseId: 't2', content: CANCELLED_SKIPPED, isError: true, cancelled: true },
          { toolUseId: 't3', content: CANCELLED_SKIPPED, isError: true, cancelled: true },
        ]);
        expect(effectsOf(r, 'kill_tool')[0]!.toolUseId).toBe('t1');
      },
    },
  },
  {
    // Amended (issue 28): what the running tool printed, as the service read it from the stream, is
    // kept above the marker; the tools after it were never started and have nothing to keep.
    label: '000 #13 ToolExecuting + UserCancel with the tool output seen → its result keeps that output, marked cancelled',
    setup: (c) => c.toTools([bash('t1'), bash('t2')]),
    event: () => ({ type: 'user_cancel', toolOutput: { toolUseId: 't1', text: 'start\nstep 2\n' } }),
    expect: {
      phase: 'idle',
      effects: ['persist_message', 'persist_message', 'kill_tool'],
      check: (r) => {
        expect(results(r)).toEqual([
          { toolUseId: 't1', content: `start\nstep 2\n\n${CANCELLED_CURRENT}`, isError: true, cancelled: true },
          { toolUseId: 't2', content: CANCELLED_SKIPPED, isError: true, cancelled: true },
        ]);
      },
    },
  },
  {
    // The output was read while t1 ran; t1 ended before the cancel applied: t2's result does not take it.
    label: "000 #13 ToolExecuting + UserCancel with another call's output → the running call's result is the marker alone",
    setup: (c) => c.toTools([bash('t1'), bash('t2')]),
    event: () => ({ type: 'user_cancel', toolOutput: { toolUseId: 't0', text: 'of an earlier call' } }),
    expect: {
      phase: 'idle',
      effects: ['persist_message', 'persist_message', 'kill_tool'],
      check: (r) => {
        expect(results(r)[0]).toEqual({ toolUseId: 't1', content: CANCELLED_CURRENT, isError: true, cancelled: true });
      },
    },
  },
  {
    label: '000 #13 ToolExecuting + UserMessage(interrupt) with the tool output seen → the output kept, the message sent',
    setup: (c) => c.toTools([bash('t1')]),
    event: () => ({
      type: 'user_message',
      text: 'stop that',
      images: [],
      delivery: 'interrupt',
      toolOutput: { toolUseId: 't1', text: 'half done' },
    }),
    expect: {
      phase: 'llm_requesting',
      effects: ['kill_tool', 'persist_message', 'persist_message', 'request_llm'],
      check: (r) => {
        expect(results(r)[0]).toEqual({ toolUseId: 't1', content: `half done\n\n${CANCELLED_CURRENT}`, isError: true, cancelled: true });
      },
    },
  },
  {
    label: '000 #14 ToolExecuting + UserMessage → REJECT "agent is busy"',
    setup: (c) => c.toTools([bash('t1')]),
    event: () => userMessage(),
    expect: { reject: 'agent_busy' },
  },
  {
    // Amended (issue 28): the text the user saw stream is kept, marked cancelled; its tool calls are not.
    label: '000 #15 Cancelling + LlmResponse → Idle | NotifyClient (its text kept as a cancelled answer, no tool call)',
    setup: (c) => c.toCancelling(),
    event: (c) => response(c.requestId, { text: 'partial answer', calls: [bash('t9')] }),
    expect: {
      phase: 'idle',
      effects: ['cancel_timer', 'persist_message'],
      check: (r, c) => {
        expect(effectsOf(r, 'cancel_timer')[0]!.timerId).toBe(c.timer('cancel_timeout'));
        expect(effectsOf(r, 'persist_message')[0]!.message).toEqual({
          type: 'agent',
          content: [{ type: 'text', text: 'partial answer' }],
          stopReason: 'cancelled',
        });
      },
    },
  },
  {
    label: '000 #16 Cancelling + UserMessage → REJECT "cancellation in progress"',
    setup: (c) => c.toCancelling(),
    event: () => userMessage(),
    expect: { reject: 'cancellation_in_progress' },
  },
  {
    label: '000 #17 Error + UserMessage → AwaitingLlm | PersistMessage, PersistState (step)',
    setup: (c) => c.toError(),
    event: () => userMessage('try again'),
    step: true,
    expect: {
      phase: 'awaiting_llm',
      effects: ['persist_message'],
      check: (r) => expect(textOf(persisted(r, 'user')[0]!)).toBe('try again'),
    },
  },
  {
    label: '000 #18 Idle + SpawnSubAgents (res. 4: spawn_agents call) → AwaitingSubAgents | SpawnSubAgent×N',
    setup: (c) => c.toLlm(),
    event: (c) => response(c.requestId, { text: 'fan out', calls: [spawn('s1', ['alpha', 'beta'])] }),
    expect: {
      phase: 'awaiting_sub_agents',
      effects: ['persist_message', 'spawn_sub_agent', 'spawn_sub_agent', 'schedule_timer'],
      check: (r) => {
        const spawns = effectsOf(r, 'spawn_sub_agent');
        expect(spawns.map((s) => [s.agentId, s.task, s.mode, s.spawnToolUseId, s.index])).toEqual([
          [`${CID}--s1--0`, 'alpha', 'restricted', 's1', 0],
          [`${CID}--s1--1`, 'beta', 'restricted', 's1', 1],
        ]);
        const p = phase(r.state, 'awaiting_sub_agents');
        expect([...p.pending].sort()).toEqual([`${CID}--s1--0`, `${CID}--s1--1`]);
        const [t] = effectsOf(r, 'schedule_timer');
        expect(t).toMatchObject({ purpose: 'sub_agent_timeout', delayMs: 600_000, timerId: p.timerId });
      },
    },
  },
  {
    label: '000 #19 AwaitingSubAgents + SubAgentResult(last) → AwaitingLlm | PersistMessage (step)',
    setup: (c) => c.toTools([spawn('s1', ['alpha'])]),
    event: () => subAgentResult(`${CID}--s1--0`, true, 'found it', 'alpha'),
    step: true,
    expect: {
      phase: 'awaiting_llm',
      effects: ['cancel_timer', 'persist_message'],
      optional: ['notify'],
      check: (r, c) => {
        expect(effectsOf(r, 'cancel_timer')[0]!.timerId).toBe(c.timer('sub_agent_timeout'));
        const res = resultFor(r, 's1');
        expect(res.content).toContain('alpha');
        expect(res.content).toContain('found it');
      },
    },
  },
  {
    label: '000 #20 AwaitingSubAgents + UserMessage → REJECT "agent is busy"',
    setup: (c) => c.toTools([spawn('s1', ['alpha'])]),
    event: () => userMessage(),
    expect: { reject: 'agent_busy' },
  },
];

describe('spec 000 State Transition Matrix', () => {
  it.each(cases(SPEC_000))('%s', (_l, row) => runRow(row));
});
