/**
 * Table tests of the state machine: one case per row of the spec-000 transition matrix, of the
 * continuation additions (spec 000), of the mode table (spec 002 "Key Transitions"), and of
 * every line of docs/state-machine.md the spec tables do not cover. Each case reaches its
 * starting state by sending events from `initialState` (see test/core-support/matrix-fixtures.ts) and asserts
 * the next phase kind and the exact multiset of effect types (plus row-specific checks).
 *
 * Spec effects map to ours as docs/state-machine.md says: PersistState = the state changed
 * (seq increases, a new object); NotifyClient = a state change or a `notify` effect;
 * AwaitingLlm rows use `step`; "Idle + SpawnSubAgents" is the spawn_agents tool call
 * (docs/design.md resolution 4); "LlmRequesting + UserCancel → Cancelling" then
 * "Cancelling + LlmResponse → Idle".
 */
import { describe, it, expect } from '@jest/globals';
import { toolSetFor, PATCH_RESTRICTED_ERROR } from '@bedrock/contracts/tools';
import {
  ALREADY_UNRESTRICTED,
  BUDGET_EXHAUSTED_MESSAGE,
  CANCELLED_CURRENT,
  CANCELLED_SKIPPED,
  CONTINUATION_CANCELLED_SUMMARY,
  CONTINUATION_FALLBACK_SUMMARY,
  LOST_RESULT,
  MAX_TOKENS_NOTICE,
  MODE_NOTICE_RESTRICTED,
  MODE_NOTICE_UNRESTRICTED,
  MAX_PENDING_MESSAGES,
  NOT_EXECUTED_CONTEXT,
  PAUSE_TURN_NOTICE,
  REJECTION_MESSAGES,
  UPGRADE_APPROVED,
  UPGRADE_DENIED,
  addUsage,
  cutToolNotice,
  initialState,
  step,
  transition,
  type ConversationContext,
  type ConversationEvent,
  type ConversationState,
  type DeliveryMode,
  type Effect,
  type EffectType,
  type NewMessage,
  type Notification,
  type PhaseKind,
  type RejectionCode,
  type ToolResult,
} from './index.ts';
import {
  CID,
  Conv,
  DEFAULT_MAX_TOKENS,
  OUTPUT_LIMIT,
  PARENT_ID,
  approve,
  bash,
  call,
  cancelQueued,
  deliver,
  deny,
  downgrade,
  llmError,
  noSandboxCtx,
  parentCtx,
  patch,
  redactedBlock,
  response,
  search,
  searchBlocks,
  spawn,
  subAgentResult,
  subAgentStart,
  subAgentStop,
  subCtx,
  submit,
  think,
  thinkingBlock,
  timerFired,
  toolComplete,
  triggerContinuation,
  upgrade,
  usage,
  userCancel,
  userMessage,
  workLost,
} from '../../test/core-support/matrix-fixtures.ts';

type Ok = Extract<ReturnType<typeof transition>, { ok: true }>;
type StepEvent = ConversationEvent | { type: 'begin_llm_request' };

type Expectation =
  | {
      readonly phase: PhaseKind;
      readonly effects: readonly EffectType[];
      /** Effect types the doc leaves open (may appear or not). */
      readonly optional?: readonly EffectType[];
      readonly check?: (r: Ok, c: Conv, before: ConversationState) => void;
    }
  | { readonly reject: RejectionCode }
  | { readonly noop: true };

interface Row {
  readonly label: string;
  readonly ctx?: () => ConversationContext;
  readonly setup: (c: Conv) => unknown;
  readonly event: (c: Conv) => StepEvent;
  /** Use `step` (a single matrix step) instead of `transition`. */
  readonly step?: boolean;
  readonly expect: Expectation;
}

// ---- helpers over effects ----
const persisted = (r: Ok, type?: NewMessage['type']): NewMessage[] =>
  r.effects.flatMap((e) => (e.type === 'persist_message' && (type === undefined || e.message.type === type) ? [e.message] : []));
const notes = (r: Ok): Notification[] => r.effects.flatMap((e) => (e.type === 'notify' ? [e.notification] : []));
const effectsOf = <T extends EffectType>(r: Ok, type: T): Extract<Effect, { type: T }>[] =>
  r.effects.filter((e): e is Extract<Effect, { type: T }> => e.type === type);
/** The tool results persisted by a transition, each in its own `tool` message. */
function results(r: Ok): ToolResult[] {
  return persisted(r, 'tool').map((m) => {
    expect(m.content).toHaveLength(1);
    const b = m.content[0]!;
    if (b.type !== 'tool_result') throw new Error(`tool message holds ${b.type}`);
    const { type: _type, ...result } = b;
    return result;
  });
}
const resultFor = (r: Ok, id: string): ToolResult => {
  const found = results(r).filter((x) => x.toolUseId === id);
  expect(found).toHaveLength(1);
  return found[0]!;
};
const textOf = (m: NewMessage): string => m.content.flatMap((b) => (b.type === 'text' ? [b.text] : [])).join('');
const phase = <K extends PhaseKind>(s: ConversationState, kind: K): Extract<ConversationState['phase'], { kind: K }> => {
  expect(s.phase.kind).toBe(kind);
  return s.phase as Extract<ConversationState['phase'], { kind: K }>;
};
const P_TOOLS = toolSetFor({ isSubAgent: false, sandboxAvailable: true });

function runRow(row: Row): void {
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

const cases = (rows: readonly Row[]): [string, Row][] => rows.map((r) => [r.label, r]);

// Reaching a state with several calls answered.
const toThirdAttempt = (c: Conv): void => {
  c.toLlm();
  for (let i = 0; i < 2; i++) {
    c.ok(llmError(c.requestId));
    c.ok(timerFired(c.timer('retry')));
  }
};
const IMG = { mediaType: 'image/png', data: 'iVBORw0KGgo=' };
const CITED = {
  type: 'text',
  text: 'Per the docs,',
  citations: '[{"type":"web_search_result_location","url":"https://example.com"}]',
} as const;

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

// =============================================================================================
// spec 002, "Key Transitions" (4 rows, the downgrade row in three phases)

const SPEC_002_MODES: Row[] = [
  {
    label: '002 #1 ToolExecuting(request_mode_upgrade) + ModeUpgradeRequested → AwaitingModeApproval | NotifyClient, PersistState',
    setup: (c) => c.toTools([bash('t1'), upgrade('u1', 'to fix the bug')]),
    event: () => toolComplete('t1'),
    expect: {
      phase: 'awaiting_mode_approval',
      effects: ['persist_message', 'notify'],
      check: (r) => {
        expect(notes(r)[0]).toEqual({ kind: 'mode_upgrade_requested', toolUseId: 'u1', reason: 'to fix the bug' });
        expect(phase(r.state, 'awaiting_mode_approval')).toMatchObject({ toolUseId: 'u1', reason: 'to fix the bug', remaining: [] });
        expect(r.state.mode).toBe('restricted');
      },
    },
  },
  {
    label:
      '002 #2 AwaitingModeApproval + UserApproveUpgrade → ToolExecuting (continue) | SetMode(Unrestricted), InjectMessage, NotifyClient',
    setup: (c) => c.toTools([upgrade('u1'), patch('p1')]),
    event: () => approve,
    expect: {
      phase: 'tool_executing',
      effects: ['persist_message', 'persist_message', 'notify', 'execute_tool'],
      check: (r) => {
        expect(r.state.mode).toBe('unrestricted');
        expect(resultFor(r, 'u1')).toMatchObject({ content: UPGRADE_APPROVED, isError: false });
        expect(textOf(persisted(r, 'system')[0]!)).toBe(MODE_NOTICE_UNRESTRICTED);
        expect(notes(r)[0]).toEqual({ kind: 'mode_changed', mode: 'unrestricted', notice: MODE_NOTICE_UNRESTRICTED });
        expect(effectsOf(r, 'execute_tool')[0]).toMatchObject({ toolUseId: 'p1', name: 'patch', mode: 'unrestricted' });
      },
    },
  },
  {
    label: '002 #3 AwaitingModeApproval + UserDenyUpgrade → ToolExecuting (continue) | ToolResult(denied), NotifyClient',
    setup: (c) => c.toTools([upgrade('u1'), bash('b1')]),
    event: () => deny,
    expect: {
      phase: 'tool_executing',
      effects: ['persist_message', 'execute_tool'],
      check: (r) => {
        expect(r.state.mode).toBe('restricted');
        expect(resultFor(r, 'u1')).toMatchObject({ content: UPGRADE_DENIED, isError: false });
        expect(effectsOf(r, 'execute_tool')[0]).toMatchObject({ toolUseId: 'b1', mode: 'restricted' });
      },
    },
  },
  ...(
    [
      ['Idle', (c: Conv) => c.toUnrestricted(), 'idle'],
      ['ToolExecuting', (c: Conv) => c.toUnrestricted().toTools([bash('b1')]), 'tool_executing'],
      ['LlmRequesting', (c: Conv) => c.toUnrestricted().toLlm(), 'llm_requesting'],
    ] as const
  ).map(([name, setup, kind]): Row => ({
    label: `002 #4 Any (${name}) + UserRequestDowngrade → Same | SetMode(Restricted), InjectMessage, NotifyClient`,
    setup,
    event: () => downgrade,
    expect: {
      phase: kind,
      effects: ['persist_message', 'notify'],
      check: (r, _c, before) => {
        expect(before.mode).toBe('unrestricted');
        expect(r.state.mode).toBe('restricted');
        expect(textOf(persisted(r, 'system')[0]!)).toBe(MODE_NOTICE_RESTRICTED);
        expect(notes(r)[0]).toEqual({ kind: 'mode_changed', mode: 'restricted', notice: MODE_NOTICE_RESTRICTED });
        // The phase itself is untouched.
        expect(r.state.phase).toEqual(before.phase);
      },
    },
  })),
];

// =============================================================================================
// docs/state-machine.md lines the spec tables do not cover

const DOC_REJECTIONS: Row[] = [
  {
    label: 'doc: idle + user_message with no text and no images → reject empty_message',
    setup: () => {},
    event: () => userMessage(''),
    expect: { reject: 'empty_message' },
  },
  {
    label: 'doc: idle + user_message with only an image → LLM',
    setup: () => {},
    event: () => userMessage('', [IMG]),
    expect: { phase: 'llm_requesting', effects: ['persist_message', 'request_llm'] },
  },
  {
    label: 'doc: llm_requesting (retry pending) + user_message → agent_busy',
    setup: (c) => c.retryPending(),
    event: () => userMessage(),
    expect: { reject: 'agent_busy' },
  },
  {
    label: 'doc: awaiting_mode_approval + user_message → agent_busy',
    setup: (c) => c.toTools([upgrade('u1')]),
    event: () => userMessage(),
    expect: { reject: 'agent_busy' },
  },
  {
    label: 'doc: awaiting_continuation + user_message → agent_busy',
    setup: (c) => c.toContinuation(),
    event: () => userMessage(),
    expect: { reject: 'agent_busy' },
  },
  {
    label: 'doc: S idle + user_message → sub_agent_driven_by_parent',
    ctx: subCtx,
    setup: () => {},
    event: () => userMessage(),
    expect: { reject: 'sub_agent_driven_by_parent' },
  },
  {
    label: 'doc: S llm_requesting + user_message → sub_agent_driven_by_parent',
    ctx: subCtx,
    setup: (c) => c.toLlm(),
    event: () => userMessage(),
    expect: { reject: 'sub_agent_driven_by_parent' },
  },
  {
    label: 'doc: S completed + user_message → conversation_finished',
    ctx: subCtx,
    setup: (c) => c.toTools([submit('r1', 'answer')]),
    event: () => userMessage(),
    expect: { reject: 'conversation_finished' },
  },
  {
    label: 'doc: S failed + user_message → conversation_finished',
    ctx: subCtx,
    setup: (c) => c.toLlm().ok(userCancel),
    event: () => userMessage(),
    expect: { reject: 'conversation_finished' },
  },
  {
    label: 'doc: S completed + user_cancel → conversation_finished',
    ctx: subCtx,
    setup: (c) => c.toTools([submit('r1', 'a')]),
    event: () => userCancel,
    expect: { reject: 'conversation_finished' },
  },
  {
    label: 'doc: S failed + user_approve_upgrade → conversation_finished',
    ctx: subCtx,
    setup: (c) => c.toLlm().ok(userCancel),
    event: () => approve,
    expect: { reject: 'conversation_finished' },
  },
  {
    label: 'doc: idle + user_cancel → nothing_to_cancel',
    setup: () => {},
    event: () => userCancel,
    expect: { reject: 'nothing_to_cancel' },
  },
  {
    label: 'doc: error + user_cancel → nothing_to_cancel',
    setup: (c) => c.toError(),
    event: () => userCancel,
    expect: { reject: 'nothing_to_cancel' },
  },
  {
    label: 'doc: idle + user_approve_upgrade → no_pending_upgrade',
    setup: () => {},
    event: () => approve,
    expect: { reject: 'no_pending_upgrade' },
  },
  {
    label: 'doc: tool_executing + user_deny_upgrade → no_pending_upgrade',
    setup: (c) => c.toTools([bash('b1')]),
    event: () => deny,
    expect: { reject: 'no_pending_upgrade' },
  },
  {
    label: 'doc: P restricted + user_request_downgrade → already_restricted',
    setup: () => {},
    event: () => downgrade,
    expect: { reject: 'already_restricted' },
  },
  {
    label: 'doc: P no sandbox + user_request_downgrade → sandbox_unavailable',
    ctx: noSandboxCtx,
    setup: () => {},
    event: () => downgrade,
    expect: { reject: 'sandbox_unavailable' },
  },
  {
    label: 'doc: S + user_request_downgrade → sub_agent_mode_fixed',
    ctx: subCtx,
    setup: (c) => c.toLlm(),
    event: () => downgrade,
    expect: { reject: 'sub_agent_mode_fixed' },
  },
  {
    label: 'doc: llm_requesting + user_trigger_continuation → continuation_unavailable',
    setup: (c) => c.toLlm(),
    event: () => triggerContinuation,
    expect: { reject: 'continuation_unavailable' },
  },
  {
    label: 'doc: tool_executing + user_trigger_continuation → continuation_unavailable',
    setup: (c) => c.toTools([bash('b1')]),
    event: () => triggerContinuation,
    expect: { reject: 'continuation_unavailable' },
  },
  {
    label: 'doc: S + user_trigger_continuation → continuation_unavailable',
    ctx: subCtx,
    setup: () => {},
    event: () => triggerContinuation,
    expect: { reject: 'continuation_unavailable' },
  },
];

const DOC_NOOPS: Row[] = [
  {
    label: 'doc no-op: S llm_requesting + sub_agent_start (not seq 0)',
    ctx: subCtx,
    setup: (c) => c.toLlm(),
    event: () => subAgentStart(),
    expect: { noop: true },
  },
  { label: 'doc no-op: P idle + sub_agent_start', setup: () => {}, event: () => subAgentStart(), expect: { noop: true } },
  {
    label: 'doc no-op: llm_requesting + llm_response for another request',
    setup: (c) => c.toLlm(),
    event: () => response(`${CID}/llm/99`, { text: 'x' }),
    expect: { noop: true },
  },
  {
    label: 'doc no-op: llm_requesting (retry pending) + late llm_response to the failed attempt',
    setup: (c) => c.retryPending(),
    event: () => response(`${CID}/llm/1`, { text: 'late' }),
    expect: { noop: true },
  },
  {
    label: 'doc no-op: llm_requesting (retry pending) + llm_response to the next attempt (nothing in flight)',
    setup: (c) => c.retryPending(),
    event: (c) => response(c.requestId, { text: 'early' }),
    expect: { noop: true },
  },
  {
    label: 'doc no-op: llm_requesting (retry pending) + late llm_error to the failed attempt',
    setup: (c) => c.retryPending(),
    event: () => llmError(`${CID}/llm/1`),
    expect: { noop: true },
  },
  {
    label: 'doc no-op: llm_requesting (retry pending) + timer_fired not matching',
    setup: (c) => c.retryPending(),
    event: () => timerFired(`${CID}/timer/999`),
    expect: { noop: true },
  },
  {
    label: 'doc no-op: llm_requesting (in flight) + the retry timer fired again (duplicate)',
    setup: (c) => {
      c.retryPending();
      c.ok(timerFired(c.timer('retry')));
    },
    event: (c) => timerFired(c.timer('retry')),
    expect: { noop: true },
  },
  { label: 'doc no-op: cancelling + user_cancel', setup: (c) => c.toCancelling(), event: () => userCancel, expect: { noop: true } },
  {
    label: 'doc no-op: cancelling + llm_response for another request',
    setup: (c) => c.toCancelling(),
    event: () => response(`${CID}/llm/99`, { text: 'x' }),
    expect: { noop: true },
  },
  {
    label: 'doc no-op: cancelling + timer_fired not matching',
    setup: (c) => c.toCancelling(),
    event: () => timerFired(`${CID}/timer/999`),
    expect: { noop: true },
  },
  {
    label: 'doc no-op: tool_executing + tool_complete for a later call (out of order)',
    setup: (c) => c.toTools([bash('t1'), bash('t2')]),
    event: () => toolComplete('t2'),
    expect: { noop: true },
  },
  {
    label: 'doc no-op: tool_executing + duplicate tool_complete of a finished call',
    setup: (c) => c.toTools([bash('t1'), bash('t2')]).ok(toolComplete('t1')),
    event: () => toolComplete('t1'),
    expect: { noop: true },
  },
  {
    label: 'doc no-op: idle + tool_complete (stale)',
    setup: (c) => c.toTools([bash('t1')]).ok(userCancel),
    event: () => toolComplete('t1'),
    expect: { noop: true },
  },
  {
    label: 'doc no-op: awaiting_sub_agents + sub_agent_result from an unknown agent',
    setup: (c) => c.toTools([spawn('s1', ['a', 'b'])]),
    event: () => subAgentResult(`${CID}--s9--0`),
    expect: { noop: true },
  },
  {
    label: 'doc no-op: awaiting_sub_agents + duplicate sub_agent_result',
    setup: (c) => c.toTools([spawn('s1', ['a', 'b'])]).ok(subAgentResult(`${CID}--s1--0`)),
    event: () => subAgentResult(`${CID}--s1--0`),
    expect: { noop: true },
  },
  {
    label: 'doc no-op: awaiting_sub_agents + timer_fired not matching',
    setup: (c) => c.toTools([spawn('s1', ['a'])]),
    event: () => timerFired(`${CID}/timer/999`),
    expect: { noop: true },
  },
  {
    label: 'doc no-op: awaiting_mode_approval + work_lost (survives restarts)',
    setup: (c) => c.toTools([upgrade('u1')]),
    event: () => workLost,
    expect: { noop: true },
  },
  { label: 'doc no-op: idle + work_lost', setup: () => {}, event: () => workLost, expect: { noop: true } },
  { label: 'doc no-op: error + work_lost', setup: (c) => c.toError(), event: () => workLost, expect: { noop: true } },
  {
    label: 'doc no-op: tool_executing + work_lost whose atSeq is not the state seq (an answer arrived after recovery looked)',
    setup: (c) => c.toTools([bash('b1'), bash('b2')]),
    event: (c) => ({ ...workLost, atSeq: c.state.seq - 1 }),
    expect: { noop: true },
  },
  {
    label: 'doc no-op: S completed + llm_response',
    ctx: subCtx,
    setup: (c) => c.toTools([submit('r1', 'a')]),
    event: () => response(`${CID}/llm/1`, { text: 'x' }),
    expect: { noop: true },
  },
  {
    label: 'doc no-op: S failed + timer_fired',
    ctx: subCtx,
    setup: (c) => c.retryPending().ok(subAgentStop),
    event: (c) => timerFired(c.timer('retry')),
    expect: { noop: true },
  },
  {
    label: 'doc no-op: S failed + sub_agent_stop',
    ctx: subCtx,
    setup: (c) => c.toLlm().ok(subAgentStop),
    event: () => subAgentStop,
    expect: { noop: true },
  },
  { label: 'doc no-op: P + sub_agent_stop', setup: (c) => c.toLlm(), event: () => subAgentStop, expect: { noop: true } },
];

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

// Starting a tool (docs/state-machine.md, "Starting a tool").
const DOC_TOOL_START: Row[] = [
  {
    label: 'tool start: unknown tool → immediate error "Unknown tool: X. Available tools: …"; next tool',
    setup: (c) => c.toLlm(),
    event: (c) => response(c.requestId, { calls: [call('f1', 'frobnicate'), bash('b1')] }),
    expect: {
      phase: 'tool_executing',
      effects: ['persist_message', 'persist_message', 'execute_tool'],
      check: (r) => {
        const res = resultFor(r, 'f1');
        expect(res.isError).toBe(true);
        expect(res.content.startsWith('Unknown tool: frobnicate. Available tools: ')).toBe(true);
        for (const t of P_TOOLS) expect(res.content).toContain(t);
        expect(effectsOf(r, 'execute_tool')[0]!.toolUseId).toBe('b1');
      },
    },
  },
  {
    label: 'tool start: spawn_agents in a sub-agent (not in its tool set) → Unknown tool',
    ctx: subCtx,
    setup: (c) => c.toLlm(),
    event: (c) => response(c.requestId, { calls: [spawn('s1', ['x']), bash('b1')] }),
    expect: {
      phase: 'tool_executing',
      effects: ['persist_message', 'persist_message', 'execute_tool'],
      check: (r) => expect(resultFor(r, 's1').content.startsWith('Unknown tool: spawn_agents.')).toBe(true),
    },
  },
  {
    label: 'tool start: submit_result in a parent → Unknown tool; none left → LLM in the same transition',
    setup: (c) => c.toLlm(),
    event: (c) => response(c.requestId, { calls: [submit('r1', 'x')] }),
    expect: {
      phase: 'llm_requesting',
      effects: ['persist_message', 'persist_message', 'request_llm'],
      check: (r) => expect(resultFor(r, 'r1').content.startsWith('Unknown tool: submit_result.')).toBe(true),
    },
  },
  {
    label: 'tool start: request_mode_upgrade without a sandbox (not in the tool set) → Unknown tool',
    ctx: noSandboxCtx,
    setup: (c) => c.toLlm(),
    event: (c) => response(c.requestId, { calls: [upgrade('u1')] }),
    expect: {
      phase: 'llm_requesting',
      effects: ['persist_message', 'persist_message', 'request_llm'],
      check: (r) => expect(resultFor(r, 'u1').content.startsWith('Unknown tool: request_mode_upgrade.')).toBe(true),
    },
  },
  {
    label: 'tool start: patch in Restricted → PATCH_RESTRICTED_ERROR without a runner; next tool',
    setup: (c) => c.toLlm(),
    event: (c) => response(c.requestId, { calls: [patch('p1'), bash('b1')] }),
    expect: {
      phase: 'tool_executing',
      effects: ['persist_message', 'persist_message', 'execute_tool'],
      check: (r) => {
        expect(resultFor(r, 'p1')).toMatchObject({ content: PATCH_RESTRICTED_ERROR, isError: true });
        expect(effectsOf(r, 'execute_tool').map((e) => e.toolUseId)).toEqual(['b1']);
      },
    },
  },
  {
    label: 'tool start: patch after a downgrade mid-turn → PATCH_RESTRICTED_ERROR',
    setup: (c) =>
      c
        .toUnrestricted()
        .toTools([bash('b1'), patch('p1')])
        .ok(downgrade),
    event: () => toolComplete('b1'),
    expect: {
      phase: 'llm_requesting',
      effects: ['persist_message', 'persist_message', 'request_llm'],
      check: (r) => expect(resultFor(r, 'p1').content).toBe(PATCH_RESTRICTED_ERROR),
    },
  },
  {
    label: 'tool start: patch in Unrestricted → execute_tool{mode unrestricted}',
    ctx: noSandboxCtx,
    setup: (c) => c.toLlm(),
    event: (c) => response(c.requestId, { calls: [patch('p1')] }),
    expect: {
      phase: 'tool_executing',
      effects: ['persist_message', 'execute_tool'],
      check: (r) => expect(effectsOf(r, 'execute_tool')[0]).toMatchObject({ name: 'patch', mode: 'unrestricted' }),
    },
  },
  {
    label: 'tool start: request_mode_upgrade in Unrestricted → "Already in Unrestricted mode"; next tool',
    setup: (c) => c.toUnrestricted().toLlm(),
    event: (c) => response(c.requestId, { calls: [upgrade('u1'), bash('b1')] }),
    expect: {
      phase: 'tool_executing',
      effects: ['persist_message', 'persist_message', 'execute_tool'],
      check: (r) => expect(resultFor(r, 'u1')).toMatchObject({ content: ALREADY_UNRESTRICTED, isError: true }),
    },
  },
  {
    label: 'tool start: request_mode_upgrade in Restricted → awaiting_mode_approval | notify mode_upgrade_requested',
    setup: (c) => c.toLlm(),
    event: (c) => response(c.requestId, { calls: [upgrade('u1', 'write tests'), bash('b1')] }),
    expect: {
      phase: 'awaiting_mode_approval',
      effects: ['persist_message', 'notify'],
      check: (r) => {
        expect(notes(r)[0]).toEqual({ kind: 'mode_upgrade_requested', toolUseId: 'u1', reason: 'write tests' });
        expect(phase(r.state, 'awaiting_mode_approval').remaining.map((x) => x.id)).toEqual(['b1']);
      },
    },
  },
  ...(
    [
      ['no tasks field', {}],
      ['empty task list', { tasks: [] }],
      ['empty task', { tasks: [{ task: '' }] }],
      ['tasks not an array', { tasks: 'do it' }],
    ] as const
  ).map(([name, input]): Row => ({
    label: `tool start: spawn_agents with invalid input (${name}) → immediate error result; next tool`,
    setup: (c) => c.toLlm(),
    event: (c) => response(c.requestId, { calls: [call('s1', 'spawn_agents', input as Record<string, unknown>), bash('b1')] }),
    expect: {
      phase: 'tool_executing',
      effects: ['persist_message', 'persist_message', 'execute_tool'],
      check: (r) => {
        const res = resultFor(r, 's1');
        expect(res.isError).toBe(true);
        expect(res.content).toContain('tasks');
      },
    },
  })),
  {
    label: 'tool start: spawn_agents from an Unrestricted parent → sub-agents still Restricted (sandbox available)',
    setup: (c) => c.toUnrestricted().toLlm(),
    event: (c) => response(c.requestId, { calls: [spawn('s1', ['a'])] }),
    expect: {
      phase: 'awaiting_sub_agents',
      effects: ['persist_message', 'spawn_sub_agent', 'schedule_timer'],
      check: (r) => expect(effectsOf(r, 'spawn_sub_agent')[0]!.mode).toBe('restricted'),
    },
  },
  {
    label: 'tool start: spawn_agents without a sandbox → sub-agents Unrestricted',
    ctx: noSandboxCtx,
    setup: (c) => c.toLlm(),
    event: (c) => response(c.requestId, { calls: [spawn('s1', ['a'])] }),
    expect: {
      phase: 'awaiting_sub_agents',
      effects: ['persist_message', 'spawn_sub_agent', 'schedule_timer'],
      check: (r) => expect(effectsOf(r, 'spawn_sub_agent')[0]!.mode).toBe('unrestricted'),
    },
  },
  {
    label: 'tool start: submit_result (S) → completed | "Result submitted.", skipped results for the rest, notify_parent{success, result}',
    ctx: subCtx,
    setup: (c) => c.toLlm(),
    event: (c) => response(c.requestId, { text: 'done', calls: [submit('r1', 'the answer'), bash('b1')] }),
    expect: {
      phase: 'completed',
      effects: ['persist_message', 'persist_message', 'persist_message', 'notify_parent'],
      check: (r) => {
        expect(phase(r.state, 'completed')).toEqual({ kind: 'completed', result: 'the answer', success: true });
        expect(resultFor(r, 'r1')).toMatchObject({ content: 'Result submitted.', isError: false });
        expect(resultFor(r, 'b1')).toMatchObject({ isError: true, cancelled: true });
        expect(effectsOf(r, 'notify_parent')[0]).toMatchObject({
          parentId: PARENT_ID,
          outcome: { agentId: CID, success: true, result: 'the answer' },
        });
      },
    },
  },
  {
    label: 'tool start: submit_result{success: false} (S) → completed, notify_parent success false',
    ctx: subCtx,
    setup: (c) => c.toTools([bash('b1'), submit('r1', 'gave up', false)]),
    event: () => toolComplete('b1'),
    expect: {
      phase: 'completed',
      effects: ['persist_message', 'persist_message', 'notify_parent'],
      check: (r) => expect(effectsOf(r, 'notify_parent')[0]!.outcome).toMatchObject({ success: false, result: 'gave up' }),
    },
  },
];

// Responses (docs/state-machine.md, "Responses").
const DOC_RESPONSES: Row[] = [
  {
    label: "response carrying the gateway's notices → notify notice each (first), nothing persisted for them",
    setup: (c) => c.toLlm(),
    event: (c) => ({ ...response(c.requestId, { text: 'x' }), notices: ['Thinking left out', ''] }) as ConversationEvent,
    expect: {
      phase: 'idle',
      effects: ['notify', 'persist_message'],
      check: (r) => {
        expect(notes(r)).toEqual([{ kind: 'notice', text: 'Thinking left out' }]);
        // The model never sees it: only the agent message is persisted.
        expect(effectsOf(r, 'persist_message').map((e) => e.message.type)).toEqual(['agent']);
      },
    },
  },
  {
    label: 'stale response carrying notices → no-op (no notice)',
    setup: (c) => c.toLlm(),
    event: () => ({ ...response('not-the-request', { text: 'x' }), notices: ['n'] }) as ConversationEvent,
    expect: { noop: true },
  },
  {
    label: 'response: usage >= 80% → notify context_warning once',
    setup: (c) => c.toLlm(),
    event: (c) => response(c.requestId, { text: 'x', tokens: 800 }),
    expect: {
      phase: 'idle',
      effects: ['persist_message', 'notify'],
      check: (r) => {
        expect(notes(r)[0]).toEqual({ kind: 'context_warning', usedTokens: 800, contextWindow: 1000 });
        expect(r.state.contextWarned).toBe(true);
      },
    },
  },
  {
    label: 'response: usage >= 80% again → no second warning',
    setup: (c) => c.toLlm().respond({ text: 'x', tokens: 810 }).toLlm(),
    event: (c) => response(c.requestId, { text: 'y', tokens: 850 }),
    expect: { phase: 'idle', effects: ['persist_message'] },
  },
  {
    label: 'response: usage 79.9% → no warning',
    setup: (c) => c.toLlm(),
    event: (c) => response(c.requestId, { text: 'x', tokens: 799 }),
    expect: { phase: 'idle', effects: ['persist_message'] },
  },
  {
    label: 'response: max_tokens, text cut → agent message (stopReason max_tokens), system notice, a new request_llm (attempt 1, new id)',
    setup: (c) => c.toLlm(),
    event: (c) => response(c.requestId, { before: [thinkingBlock()], text: 'cut', stopReason: 'max_tokens' }),
    expect: {
      phase: 'llm_requesting',
      effects: ['persist_message', 'persist_message', 'request_llm'],
      check: (r, _c, before) => {
        const p = phase(r.state, 'llm_requesting');
        expect(p.attempt).toBe(1);
        expect(p.requestId).not.toBe(phase(before, 'llm_requesting').requestId);
        expect(p.autoContinuations).toBe(1);
        expect(p.maxTokens).toBe(0);
        const [agent] = persisted(r, 'agent');
        expect(agent).toMatchObject({ stopReason: 'max_tokens', content: [thinkingBlock(), { type: 'text', text: 'cut' }] });
        expect(persisted(r, 'system').map(textOf)).toEqual([MAX_TOKENS_NOTICE]);
        // The notice comes after the cut content, so the next request ends with a user turn.
        expect(r.effects.map((e) => (e.type === 'persist_message' ? e.message.type : e.type))).toEqual(['agent', 'system', 'request_llm']);
        expect(effectsOf(r, 'request_llm')[0]).toMatchObject({ purpose: 'turn', maxTokens: 0 });
      },
    },
  },
  {
    label: 'response: max_tokens, text cut, maxAutoContinuations reached → idle, no notice',
    setup: (c) => {
      c.toLlm();
      for (let i = 0; i < 3; i++) c.respond({ text: `part ${i}`, stopReason: 'max_tokens' });
    },
    event: (c) => response(c.requestId, { text: 'part 3', stopReason: 'max_tokens' }),
    expect: { phase: 'idle', effects: ['persist_message'], check: (r) => expect(persisted(r, 'agent')[0]!.stopReason).toBe('max_tokens') },
  },
  {
    label:
      'response: pause_turn with server-tool blocks → agent message kept verbatim, a new request_llm, no notice (the paused turn is sent back as it is)',
    setup: (c) => c.toLlm(),
    event: (c) => response(c.requestId, { before: [thinkingBlock(), ...searchBlocks()], text: 'Searching', stopReason: 'pause_turn' }),
    expect: {
      phase: 'llm_requesting',
      effects: ['persist_message', 'request_llm'],
      check: (r) => {
        expect(phase(r.state, 'llm_requesting').autoContinuations).toBe(1);
        expect(persisted(r, 'agent')[0]).toMatchObject({
          stopReason: 'pause_turn',
          content: [thinkingBlock(), ...searchBlocks(), { type: 'text', text: 'Searching' }],
        });
        expect(persisted(r, 'system')).toEqual([]);
      },
    },
  },
  {
    label: 'response: pause_turn without server-tool blocks → handled like a text cut (notice, a new request_llm)',
    setup: (c) => c.toLlm(),
    event: (c) => response(c.requestId, { text: 'part', stopReason: 'pause_turn' }),
    expect: {
      phase: 'llm_requesting',
      effects: ['persist_message', 'persist_message', 'request_llm'],
      check: (r) => expect(persisted(r, 'system').map(textOf)).toEqual([PAUSE_TURN_NOTICE]),
    },
  },
  {
    label: 'response: pause_turn after maxAutoContinuations (3) → idle',
    setup: (c) => {
      c.toLlm();
      for (let i = 0; i < 3; i++) c.respond({ before: searchBlocks(`srv${i}`), text: `part ${i}`, stopReason: 'pause_turn' });
    },
    event: (c) => response(c.requestId, { before: searchBlocks('srv3'), text: 'part 3', stopReason: 'pause_turn' }),
    expect: { phase: 'idle', effects: ['persist_message'] },
  },
  {
    label: 'response: max_tokens with a cut tool call below the output limit → nothing persisted, request_llm at the limit',
    setup: (c) => c.toLlm(),
    event: (c) =>
      response(c.requestId, {
        before: [thinkingBlock()],
        text: 'Writing the file',
        stopReason: 'max_tokens',
        cut: ['patch'],
        maxTokens: DEFAULT_MAX_TOKENS,
      }),
    expect: {
      phase: 'llm_requesting',
      effects: ['request_llm'],
      check: (r) => {
        const p = phase(r.state, 'llm_requesting');
        expect(p).toMatchObject({ attempt: 1, maxTokens: OUTPUT_LIMIT, autoContinuations: 1 });
        expect(effectsOf(r, 'request_llm')[0]).toMatchObject({ requestId: p.requestId, purpose: 'turn', maxTokens: OUTPUT_LIMIT });
        // The tokens were spent all the same.
        expect(r.state.totalUsage).toEqual(usage(100));
      },
    },
  },
  {
    label: 'response: cut tool call, the gateway did not report max_tokens (0) → asked again at the limit, once',
    setup: (c) => c.toLlm(),
    event: (c) => response(c.requestId, { stopReason: 'max_tokens', cut: ['patch'], maxTokens: 0 }),
    expect: {
      phase: 'llm_requesting',
      effects: ['request_llm'],
      check: (r) => expect(phase(r.state, 'llm_requesting').maxTokens).toBe(OUTPUT_LIMIT),
    },
  },
  {
    label: 'response: a retry after an error keeps the raised max_tokens',
    setup: (c) => {
      c.toLlm().respond({ stopReason: 'max_tokens', cut: ['patch'] });
      c.ok(llmError(c.requestId));
    },
    event: (c) => timerFired(c.timer('retry')),
    expect: {
      phase: 'llm_requesting',
      effects: ['request_llm'],
      check: (r) => {
        expect(phase(r.state, 'llm_requesting')).toMatchObject({ attempt: 2, maxTokens: OUTPUT_LIMIT });
        expect(effectsOf(r, 'request_llm')[0]).toMatchObject({ attempt: 2, maxTokens: OUTPUT_LIMIT });
      },
    },
  },
  {
    label:
      'response: cut tool call again at the output limit → complete blocks persisted, notice naming the call and the limit, a new request_llm',
    setup: (c) => c.toLlm().respond({ stopReason: 'max_tokens', cut: ['patch'] }),
    event: (c) =>
      response(c.requestId, {
        before: [thinkingBlock()],
        text: 'Writing',
        stopReason: 'max_tokens',
        cut: ['patch'],
        maxTokens: OUTPUT_LIMIT,
      }),
    expect: {
      phase: 'llm_requesting',
      effects: ['persist_message', 'persist_message', 'request_llm'],
      check: (r) => {
        expect(persisted(r, 'agent')[0]).toMatchObject({
          stopReason: 'max_tokens',
          content: [thinkingBlock(), { type: 'text', text: 'Writing' }],
        });
        const [notice] = persisted(r, 'system').map(textOf);
        expect(notice).toBe(cutToolNotice(['patch'], OUTPUT_LIMIT));
        expect(notice).toContain('patch');
        expect(notice).toContain(`${OUTPUT_LIMIT} tokens`);
        expect(notice).not.toContain('..');
        expect(phase(r.state, 'llm_requesting')).toMatchObject({ autoContinuations: 2, maxTokens: OUTPUT_LIMIT });
      },
    },
  },
  {
    label:
      'response: cut tool call at the limit with complete calls → the complete calls run; the notice waits in the history for their results',
    setup: (c) => c.toLlm(),
    event: (c) => response(c.requestId, { calls: [bash('b1')], stopReason: 'max_tokens', cut: ['patch', 'bash'], maxTokens: OUTPUT_LIMIT }),
    expect: {
      phase: 'tool_executing',
      effects: ['persist_message', 'persist_message', 'execute_tool'],
      check: (r) => {
        expect(persisted(r, 'system').map(textOf)).toEqual([cutToolNotice(['patch', 'bash'], OUTPUT_LIMIT)]);
        expect(persisted(r, 'system').map(textOf)[0]).toMatch(/^Your calls to patch and bash were cut off/);
        expect(effectsOf(r, 'execute_tool')[0]!.toolUseId).toBe('b1');
      },
    },
  },
  {
    label: 'response: cut tool call when maxAutoContinuations is reached → not asked again: notice, then idle',
    ctx: () => parentCtx({ policy: { maxAutoContinuations: 1 } }),
    setup: (c) => c.toLlm().respond({ text: 'a', stopReason: 'max_tokens' }),
    event: (c) => response(c.requestId, { text: 'b', stopReason: 'max_tokens', cut: ['patch'] }),
    expect: {
      phase: 'idle',
      effects: ['persist_message', 'persist_message'],
      check: (r) => expect(persisted(r, 'system').map(textOf)).toEqual([cutToolNotice(['patch'], DEFAULT_MAX_TOKENS)]),
    },
  },
  {
    label: 'response: cut tool call at >= 90% of the window → no retry: continuation summary',
    setup: (c) => c.toLlm(),
    event: (c) => response(c.requestId, { text: 'x', stopReason: 'max_tokens', cut: ['patch'], tokens: 950 }),
    expect: { phase: 'awaiting_continuation', effects: ['persist_message', 'request_llm'] },
  },
  {
    label: 'response: refusal (P) → agent message with stopReason and explanation, error message, idle',
    setup: (c) => c.toLlm(),
    event: (c) =>
      response(c.requestId, { text: 'I started to', stopReason: 'refusal', explanation: 'This request asks for harmful content' }),
    expect: {
      phase: 'idle',
      effects: ['persist_message', 'persist_message'],
      check: (r) => {
        expect(persisted(r, 'agent')[0]).toMatchObject({
          stopReason: 'refusal',
          stopExplanation: 'This request asks for harmful content',
          content: [{ type: 'text', text: 'I started to' }],
        });
        const [error] = persisted(r, 'error').map(textOf);
        expect(error).toBe(
          'The model declined to answer: This request asks for harmful content. Rephrase your request or send a new message.',
        );
      },
    },
  },
  {
    label: 'response: refusal without content or explanation → the refusal is still recorded; tool calls in it do not run',
    setup: (c) => c.toLlm(),
    event: (c) => response(c.requestId, { calls: [bash('b1')], stopReason: 'refusal', explanation: 'Declined.' }),
    expect: {
      phase: 'idle',
      effects: ['persist_message', 'persist_message'],
      check: (r) => {
        expect(persisted(r, 'error').map(textOf)).toEqual([
          'The model declined to answer: Declined. Rephrase your request or send a new message.',
        ]);
        expect(persisted(r, 'tool')).toEqual([]);
      },
    },
  },
  {
    label: 'response: refusal, no explanation → a sentence without one; the conversation takes a new message',
    setup: (c) => c.toLlm(),
    event: (c) => response(c.requestId, { stopReason: 'refusal' }),
    expect: {
      phase: 'idle',
      effects: ['persist_message', 'persist_message'],
      check: (r, c) => {
        expect(persisted(r, 'agent')[0]).toEqual({ type: 'agent', content: [], usage: usage(100), stopReason: 'refusal' });
        expect(persisted(r, 'error').map(textOf)).toEqual(['The model declined to answer. Rephrase your request or send a new message.']);
        expect(transition(r.state, c.ctx, userMessage('try this instead')).ok).toBe(true);
      },
    },
  },
  {
    label: 'response: refusal (S) → failed{refused} | notify_parent',
    ctx: subCtx,
    setup: (c) => c.toLlm(),
    event: (c) => response(c.requestId, { stopReason: 'refusal', explanation: 'no' }),
    expect: {
      phase: 'failed',
      effects: ['persist_message', 'persist_message', 'notify_parent'],
      check: (r) => {
        expect(phase(r.state, 'failed').errorKind).toBe('refused');
        expect(effectsOf(r, 'notify_parent')[0]!.outcome).toMatchObject({ success: false, errorKind: 'refused' });
      },
    },
  },
  {
    label: 'response: thinking, redacted thinking and citations are kept verbatim, in order',
    setup: (c) => c.toLlm(),
    event: (c) => response(c.requestId, { before: [thinkingBlock('', 'sig-empty'), redactedBlock(), CITED], calls: [bash('b1')] }),
    expect: {
      phase: 'tool_executing',
      effects: ['persist_message', 'execute_tool'],
      check: (r) =>
        expect(persisted(r, 'agent')[0]!.content).toEqual([
          thinkingBlock('', 'sig-empty'),
          redactedBlock(),
          CITED,
          { type: 'tool_use', id: 'b1', name: 'bash', input: { command: 'ls' } },
        ]),
    },
  },
  {
    label: 'response: usage counts thinking tokens and server-tool requests',
    setup: (c) => c.toLlm().respond({ text: 'a' }).toLlm(),
    event: (c) => ({
      ...(response(c.requestId, { text: 'b' }) as Extract<ConversationEvent, { type: 'llm_response' }>),
      usage: usage(300, { searches: 2, fetches: 1 }),
    }),
    expect: {
      phase: 'idle',
      effects: ['persist_message'],
      check: (r) => {
        expect(r.state.totalUsage).toMatchObject({
          thinkingTokens: usage(100).thinkingTokens! + usage(300).thinkingTokens!,
          webSearchRequests: 2,
          webFetchRequests: 1,
        });
      },
    },
  },
  {
    label: 'response: S ends its turn without submit_result → failed{…: <last text>, unknown} | notify_parent',
    ctx: subCtx,
    setup: (c) => c.toLlm(),
    event: (c) => response(c.requestId, { text: 'I am done' }),
    expect: {
      phase: 'failed',
      effects: ['persist_message', 'notify_parent'],
      check: (r) => {
        expect(phase(r.state, 'failed')).toEqual({
          kind: 'failed',
          error: 'Sub-agent ended its turn without calling submit_result: I am done',
          errorKind: 'unknown',
        });
        expect(effectsOf(r, 'notify_parent')[0]!.outcome).toMatchObject({ success: false, errorKind: 'unknown' });
      },
    },
  },
  {
    label: 'response: empty content, end_turn → idle, nothing persisted',
    setup: (c) => c.toLlm(),
    event: (c) => response(c.requestId, {}),
    expect: { phase: 'idle', effects: [] },
  },
  {
    label: 'response: lastUsage is the last response, totalUsage the sum',
    setup: (c) => c.toLlm().respond({ text: 'a', tokens: 100 }).toLlm(),
    event: (c) => response(c.requestId, { text: 'b', tokens: 300 }),
    expect: {
      phase: 'idle',
      effects: ['persist_message'],
      check: (r) => {
        expect(r.state.lastUsage).toEqual(usage(300));
        expect(r.state.totalUsage).toEqual(addUsage(usage(100), usage(300)));
      },
    },
  },
];

// ---- delivery modes (docs/state-machine.md, "Delivery modes"): every mode from every state ----

/** The waiting messages as `delivery:text`. */
const waiting = (s: ConversationState): string[] => (s.pending ?? []).map((m) => `${m.delivery}:${m.text}`);
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

describe('spec 000 State Transition Matrix', () => {
  it.each(cases(SPEC_000))('%s', (_l, row) => runRow(row));
});
describe('spec 000 State Transition Matrix Additions (continuation)', () => {
  it.each(cases(SPEC_000_CONTINUATION))('%s', (_l, row) => runRow(row));
});
describe('spec 002 Key Transitions (modes)', () => {
  it.each(cases(SPEC_002_MODES))('%s', (_l, row) => runRow(row));
});
describe('docs/state-machine.md: rejections', () => {
  it.each(cases(DOC_REJECTIONS))('%s', (_l, row) => runRow(row));
});
describe('docs/state-machine.md: no-ops return the same state object', () => {
  it.each(cases(DOC_NOOPS))('%s', (_l, row) => runRow(row));
});
describe('docs/state-machine.md: transitions', () => {
  it.each(cases(DOC_TRANSITIONS))('%s', (_l, row) => runRow(row));
});
describe('docs/state-machine.md: starting a tool', () => {
  it.each(cases(DOC_TOOL_START))('%s', (_l, row) => runRow(row));
});
describe('docs/state-machine.md: responses', () => {
  it.each(cases(DOC_RESPONSES))('%s', (_l, row) => runRow(row));
});

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

/**
 * docs/state-machine.md, "Budget": each state is reached with no budget, then the event runs
 * with the owner's budget spent (remainingBudgetMicros 0) — the shell's figure, read for the event.
 */
describe('docs/state-machine.md: budget', () => {
  const spent = (ctx: ConversationContext): ConversationContext => ({ ...ctx, remainingBudgetMicros: 0 });
  const run = (c: Conv, event: ConversationEvent): Ok => {
    const r = transition(c.state, spent(c.ctx), event);
    if (!r.ok) throw new Error(`rejected: ${r.rejection.code}`);
    return r;
  };
  const stoppedForBudget = (r: Ok): void => {
    expect(r.state.phase).toEqual({ kind: 'error', message: BUDGET_EXHAUSTED_MESSAGE, errorKind: 'budget_exhausted' });
    expect(effectsOf(r, 'request_llm')).toEqual([]);
    expect(textOf(persisted(r, 'error')[0]!)).toBe(BUDGET_EXHAUSTED_MESSAGE);
    expect(notes(r)).toContainEqual({ kind: 'error', message: BUDGET_EXHAUSTED_MESSAGE, errorKind: 'budget_exhausted' });
  };

  it('tool_executing (last tool) + tool_complete → error budget_exhausted | persist the result and the error, notify; no request', () => {
    const c = new Conv(parentCtx()).toTools([bash('t1'), bash('t2')]);
    c.ok(toolComplete('t1'));
    const r = run(c, toolComplete('t2'));
    stoppedForBudget(r);
    expect(results(r).map((x) => x.toolUseId)).toEqual(['t2']);
    expect(persisted(r).map((m) => m.type)).toEqual(['tool', 'error']);
    expect(r.effects.filter((e) => e.type !== 'notify' && e.type !== 'persist_message')).toEqual([]);
  });

  it('tool_executing (more tools to run) + tool_complete → tool_executing | the next tool starts: the boundary is after the last result', () => {
    const c = new Conv(parentCtx()).toTools([bash('t1'), bash('t2')]);
    const r = run(c, toolComplete('t1'));
    expect(r.state.phase.kind).toBe('tool_executing');
    expect(effectsOf(r, 'execute_tool').map((e) => e.toolUseId)).toEqual(['t2']);
  });

  it('idle + user_message → error budget_exhausted | the message persisted, no request', () => {
    const c = new Conv(parentCtx());
    const r = run(c, userMessage('hi'));
    stoppedForBudget(r);
    expect(persisted(r, 'user').map(textOf)).toEqual(['hi']);
  });

  it('llm_requesting (retry pending) + timer_fired → error budget_exhausted | no retry', () => {
    const c = new Conv(parentCtx()).retryPending();
    stoppedForBudget(run(c, timerFired(c.timer('retry'))));
  });

  it('llm_requesting + llm_response max_tokens (continued) → error budget_exhausted | the response kept, no continuation request', () => {
    const c = new Conv(parentCtx()).toLlm();
    const r = run(c, response(c.requestId, { text: 'partial', stopReason: 'max_tokens' }));
    stoppedForBudget(r);
    expect(persisted(r, 'agent').map(textOf)).toEqual(['partial']);
  });

  it('idle + user_trigger_continuation → error budget_exhausted | no summary request', () => {
    stoppedForBudget(run(new Conv(parentCtx()), triggerContinuation));
  });

  it('a sub-agent: tool_executing (last tool) + tool_complete → failed budget_exhausted | notify_parent', () => {
    const c = new Conv(subCtx()).toTools([bash('t1')]);
    const r = run(c, toolComplete('t1'));
    expect(r.state.phase).toEqual({ kind: 'failed', error: BUDGET_EXHAUSTED_MESSAGE, errorKind: 'budget_exhausted' });
    expect(effectsOf(r, 'notify_parent')[0]!.outcome).toMatchObject({ success: false, errorKind: 'budget_exhausted' });
    expect(effectsOf(r, 'request_llm')).toEqual([]);
  });

  it('with budget left (remainingBudgetMicros > 0) the request goes out as usual', () => {
    const c = new Conv(parentCtx()).toTools([bash('t1')]);
    const r = transition(c.state, { ...c.ctx, remainingBudgetMicros: 1 }, toolComplete('t1'));
    expect(r.ok && r.state.phase.kind).toBe('llm_requesting');
  });

  it('error (budget) with a queued message: it waits rather than starting a turn that could make no request', () => {
    const c = new Conv(parentCtx()).toTools([bash('t1')]);
    c.ok({ ...userMessage('later'), delivery: 'queue' });
    const r = run(c, toolComplete('t1'));
    stoppedForBudget(r);
    expect(waiting(r.state)).toEqual(['queue:later']);
  });
});
