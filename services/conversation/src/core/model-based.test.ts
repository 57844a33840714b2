/**
 * Model-based test: random but realistic event sequences are applied both to the
 * implementation (`transition`) and to the independent reference model
 * (test/core-support/reference-model.ts, written from docs/state-machine.md); after every event they must agree
 * on accepted / rejected (code) / no-op (same state object), on the effects (as tags), and on
 * the abstract state (phase, mode, attempt, waited-for ids, pending tools and sub-agents, and
 * the persisted tool_use / tool_result ids).
 *
 * Events are chosen from the current model state, so most of them answer what the phase waits
 * for, with a share of stale, duplicate and wrong answers, cancels, timers, approvals,
 * downgrades, sub-agent results and work_lost at every point. Each step draws its event from
 * a fast-check integer (a seed for a small deterministic generator), so fast-check shrinks the
 * sequence and prints the seed on failure.
 */
import { describe, it, expect } from '@jest/globals';
import fc from 'fast-check';
import { toolSetFor } from '@bedrock/contracts/tools';
import { transition, initialState, buildLlmHistory, checkToolChain, pendingMessageId, type HistoryMessage } from './index.ts';
import type { ContentBlock, ConversationContext, ConversationEvent, ConversationState, Effect, StopReason, ToolCall } from './types.ts';
import {
  abstractModel,
  initialModel,
  modelStep,
  requestIdOf,
  type AbstractState,
  type ModelOutcome,
  type ModelState,
} from '../../test/core-support/reference-model.ts';
import {
  DEFAULT_MAX_TOKENS,
  OUTPUT_LIMIT,
  approve,
  call,
  deny,
  downgrade,
  llmError,
  noSandboxCtx,
  parentCtx,
  redactedBlock,
  response,
  searchBlocks,
  subAgentResult,
  subAgentStart,
  subAgentStop,
  subCtx,
  thinkingBlock,
  timerFired,
  toolComplete,
  triggerContinuation,
  userCancel,
  userMessage,
  workLost,
} from '../../test/core-support/matrix-fixtures.ts';

const CONTEXTS: readonly { readonly name: string; readonly ctx: ConversationContext }[] = [
  { name: 'parent, sandbox', ctx: parentCtx() },
  { name: 'parent, no sandbox', ctx: noSandboxCtx() },
  { name: 'sub-agent', ctx: subCtx() },
  { name: 'parent, 1 auto-continuation, 2 attempts', ctx: parentCtx({ policy: { maxAutoContinuations: 1, maxLlmAttempts: 2 } }) },
];

// ---------------------------------------------------------------------------------------------
// The implementation side.

function tagOf(e: Effect): string {
  if (e.type === 'persist_message') return `persist:${e.message.type}`;
  if (e.type === 'notify') return `notify:${e.notification.kind}`;
  return e.type;
}

function abstractImpl(state: ConversationState): AbstractState {
  const p = state.phase;
  const base: AbstractState = {
    phase: p.kind,
    mode: state.mode,
    attempt: null,
    retryPending: false,
    requestId: null,
    maxTokens: null,
    pendingToolIds: [],
    pendingSubAgents: [],
    errorKind: null,
    pending: (state.pending ?? []).map((m) => `${m.delivery}:${m.id}`),
  };
  switch (p.kind) {
    case 'llm_requesting':
      return { ...base, attempt: p.attempt, retryPending: p.retry !== null, requestId: p.requestId, maxTokens: p.maxTokens };
    case 'awaiting_continuation':
      return { ...base, attempt: p.attempt, retryPending: p.retry !== null, requestId: p.requestId };
    case 'cancelling':
      return { ...base, requestId: p.requestId };
    case 'tool_executing':
      return { ...base, pendingToolIds: [p.current.id, ...p.remaining.map((c) => c.id)] };
    case 'awaiting_sub_agents':
      return { ...base, pendingToolIds: [p.spawnToolUseId, ...p.remaining.map((c) => c.id)], pendingSubAgents: [...p.pending].sort() };
    case 'awaiting_mode_approval':
      return { ...base, pendingToolIds: [p.toolUseId, ...p.remaining.map((c) => c.id)] };
    case 'error':
    case 'failed':
      return { ...base, errorKind: p.errorKind };
    default:
      return base;
  }
}

/** Required tags must all be present (as a multiset); anything else must match an optional pattern. */
function effectsMatch(actual: readonly string[], required: readonly string[], optional: readonly string[]): boolean {
  const rest = [...actual];
  for (const tag of required) {
    const i = rest.indexOf(tag);
    if (i < 0) return false;
    rest.splice(i, 1);
  }
  return rest.every((t) => optional.some((o) => (o.endsWith('*') ? t.startsWith(o.slice(0, -1)) : t === o)));
}

/** Checks the payloads of the effects against the states before and after (ids that tie them together). */
function payloadProblems(ctx: ConversationContext, prev: ConversationState, next: ConversationState, effects: readonly Effect[]): string[] {
  const problems: string[] = [];
  const pp = prev.phase;
  const np = next.phase;
  const prevTimers = [
    pp.kind === 'llm_requesting' || pp.kind === 'awaiting_continuation' ? pp.retry?.timerId : undefined,
    pp.kind === 'cancelling' || pp.kind === 'awaiting_sub_agents' ? pp.timerId : undefined,
  ].filter((t): t is string => t !== undefined);
  effects.forEach((e, i) => {
    if (e.id !== `${ctx.conversationId}/${next.seq}/${i}`)
      problems.push(`effect ${i} has id ${e.id}, expected ${ctx.conversationId}/${next.seq}/${i}`);
    switch (e.type) {
      case 'request_llm': {
        const purpose = np.kind === 'awaiting_continuation' ? 'continuation' : 'turn';
        const id = np.kind === 'llm_requesting' || np.kind === 'awaiting_continuation' ? np.requestId : null;
        if (e.requestId !== id || e.purpose !== purpose)
          problems.push(`request_llm ${e.requestId}/${e.purpose} but the phase is ${np.kind} ${id}`);
        if (np.kind === 'llm_requesting' || np.kind === 'awaiting_continuation') {
          if (e.attempt !== np.attempt) problems.push(`request_llm attempt ${e.attempt}, phase attempt ${np.attempt}`);
          if (np.retry !== null) problems.push('request_llm sent while a retry timer is pending');
        }
        // A continuation defines the tools too (the gateway forbids their use).
        if (JSON.stringify(e.toolNames) !== JSON.stringify(toolSetFor(ctx)))
          problems.push(`request_llm toolNames ${JSON.stringify(e.toolNames)}`);
        const maxTokens = np.kind === 'llm_requesting' ? np.maxTokens : 0;
        if (e.maxTokens !== maxTokens) problems.push(`request_llm maxTokens ${e.maxTokens}, phase ${maxTokens}`);
        break;
      }
      case 'abort_llm':
        if (
          !((pp.kind === 'llm_requesting' || pp.kind === 'awaiting_continuation') && pp.retry === null && pp.requestId === e.requestId) &&
          !(pp.kind === 'cancelling' && pp.requestId === e.requestId)
        ) {
          problems.push(`abort_llm ${e.requestId} does not abort the request in flight`);
        }
        break;
      case 'execute_tool':
        if (np.kind !== 'tool_executing' || np.current.id !== e.toolUseId)
          problems.push(`execute_tool ${e.toolUseId} is not the current call`);
        if (e.mode !== next.mode) problems.push(`execute_tool in mode ${e.mode}, conversation is ${next.mode}`);
        break;
      case 'kill_tool':
        if (pp.kind !== 'tool_executing' || pp.current.id !== e.toolUseId) problems.push(`kill_tool ${e.toolUseId} was not running`);
        break;
      case 'cancel_timer':
        if (!prevTimers.includes(e.timerId)) problems.push(`cancel_timer ${e.timerId} was not pending`);
        break;
      case 'schedule_timer': {
        const held = [
          np.kind === 'llm_requesting' || np.kind === 'awaiting_continuation' ? np.retry?.timerId : undefined,
          np.kind === 'cancelling' || np.kind === 'awaiting_sub_agents' ? np.timerId : undefined,
        ];
        if (!held.includes(e.timerId)) problems.push(`schedule_timer ${e.timerId} is not held by the phase`);
        if (e.timerId !== `${ctx.conversationId}/timer/${next.seq}`)
          problems.push(`timer id ${e.timerId}, expected ${ctx.conversationId}/timer/${next.seq}`);
        break;
      }
      case 'stop_sub_agent':
        if (pp.kind !== 'awaiting_sub_agents' || !pp.pending.includes(e.agentId))
          problems.push(`stop_sub_agent ${e.agentId} was not pending`);
        break;
      case 'spawn_sub_agent':
        if (np.kind !== 'awaiting_sub_agents' || !np.pending.includes(e.agentId))
          problems.push(`spawn_sub_agent ${e.agentId} is not pending`);
        if (e.mode !== (ctx.sandboxAvailable ? 'restricted' : 'unrestricted')) problems.push(`sub-agent spawned in mode ${e.mode}`);
        break;
      case 'notify_parent':
        if (e.parentId !== ctx.parentId || e.outcome.agentId !== ctx.conversationId)
          problems.push(`notify_parent to ${e.parentId} about ${e.outcome.agentId}`);
        break;
      default:
        break;
    }
  });
  return problems;
}

// ---------------------------------------------------------------------------------------------
// Event generation from the model state.

/** mulberry32: a tiny deterministic generator seeded by fast-check. */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

interface Memory {
  toolCounter: number;
  timers: string[];
  agents: string[];
  /** Numbers the texts of user messages, so each delivery can be traced to its message. */
  messages: number;
}

type Gen = (r: () => number) => ConversationEvent;

function pickOne<T>(r: () => number, xs: readonly T[]): T {
  return xs[Math.floor(r() * xs.length)]!;
}

function weighted(r: () => number, table: readonly (readonly [number, Gen])[]): ConversationEvent {
  const total = table.reduce((n, [w]) => n + w, 0);
  let x = r() * total;
  for (const [w, g] of table) {
    if (x < w) return g(r);
    x -= w;
  }
  return table[table.length - 1]![1](r);
}

function genCalls(r: () => number, mem: Memory): ToolCall[] {
  const n = pickOne(r, [1, 1, 1, 2, 2, 3]);
  const calls: ToolCall[] = [];
  for (let i = 0; i < n; i++) {
    const id = `tu${++mem.toolCounter}`;
    const x = r();
    if (x < 0.25) calls.push(call(id, 'bash', { command: 'ls' }));
    else if (x < 0.33) calls.push(call(id, 'think', { thoughts: 't' }));
    else if (x < 0.4) calls.push(call(id, 'keyword_search', { query: 'q', search_terms: ['a'] }));
    else if (x < 0.55) calls.push(call(id, 'patch', { path: 'f', patches: [{ operation: 'overwrite', new_text: 'x' }] }));
    else if (x < 0.67) calls.push(call(id, 'request_mode_upgrade', { reason: 'write' }));
    else if (x < 0.78) {
      const k = pickOne(r, [1, 2, 3]);
      calls.push(call(id, 'spawn_agents', { tasks: Array.from({ length: k }, (_, j) => ({ task: `task ${j}` })) }));
    } else if (x < 0.82) calls.push(call(id, 'spawn_agents', pickOne(r, [{}, { tasks: [] }, { tasks: [{ task: '' }] }])));
    else if (x < 0.92) calls.push(call(id, 'submit_result', r() < 0.7 ? { result: 'the answer' } : { result: 'nope', success: false }));
    else calls.push(call(id, 'frobnicate', {}));
  }
  return calls;
}

function genResponse(r: () => number, mem: Memory, requestId: string): ConversationEvent {
  const tokens = pickOne(r, [100, 100, 100, 100, 300, 500, 799, 800, 850, 899, 900, 950]);
  const withTools = r() < 0.55;
  const calls = withTools ? genCalls(r, mem) : [];
  const text = r() < 0.85 ? 'some text' : '';
  let stopReason: StopReason = calls.length > 0 ? 'tool_use' : 'end_turn';
  const s = r();
  if (s < 0.14) stopReason = 'max_tokens';
  else if (s < 0.22) stopReason = 'pause_turn';
  else if (s < 0.24) stopReason = 'model_context_window_exceeded';
  else if (s < 0.28) stopReason = 'refusal';
  // The model's other blocks: thinking first (signed, sometimes with its text omitted), redacted
  // thinking, and a web search (server-tool blocks), mostly in paused turns.
  const before: ContentBlock[] = [];
  const t = r();
  if (t < 0.3) before.push(thinkingBlock('reasoning', `sig${mem.toolCounter}`));
  else if (t < 0.38) before.push(thinkingBlock('', `sig${mem.toolCounter}`));
  else if (t < 0.42) before.push(redactedBlock());
  if (r() < (stopReason === 'pause_turn' ? 0.6 : 0.1)) before.push(...searchBlocks(`srv${++mem.toolCounter}`));
  const cut = stopReason === 'max_tokens' && r() < 0.5 ? pickOne(r, [['patch'], ['patch'], ['bash', 'patch']]) : [];
  const maxTokens = pickOne(r, [DEFAULT_MAX_TOKENS, DEFAULT_MAX_TOKENS, OUTPUT_LIMIT, 0]);
  const explanation = stopReason === 'refusal' && r() < 0.5 ? 'The request is not allowed.' : '';
  return response(requestId, { text, calls, stopReason, tokens, before, cut, maxTokens, explanation });
}

function genEvent(ctx: ConversationContext, s: ModelState, mem: Memory, r: () => number): ConversationEvent {
  const p = s.phase;
  const oldRequest = (): string => requestIdOf(ctx, Math.max(0, s.llmRequests - 1 - Math.floor(r() * 2)));
  const anyTimer = (): string => (mem.timers.length > 0 ? pickOne(r, mem.timers) : `${ctx.conversationId}/timer/999`);
  const anyTool = (): string => (s.toolUses.length > 0 ? pickOne(r, s.toolUses) : 'tu-unknown');
  const anyAgent = (): string => (mem.agents.length > 0 ? pickOne(r, mem.agents) : `${ctx.conversationId}--x--0`);

  const text = (): string => `message ${++mem.messages}`;
  const waiting = s.pending;
  // Background noise, possible in every phase.
  const noise: (readonly [number, Gen])[] = [
    [3, () => userMessage()],
    // Delivery modes from every state: a busy agent keeps the message, an idle one sends it.
    [3, () => ({ ...userMessage(text()), delivery: 'queue' })],
    [3, () => ({ ...userMessage(text()), delivery: 'steer' })],
    [2, () => ({ ...userMessage(text()), delivery: 'interrupt' })],
    [1, () => ({ ...userMessage(text()), delivery: 'reject' })],
    [1, () => ({ ...userMessage('', []), delivery: 'queue' })],
    [
      2,
      (rr) => ({
        type: 'user_cancel_queued',
        queuedId: waiting.length > 0 && rr() < 0.8 ? pickOne(rr, waiting).id : `${ctx.conversationId}/q/1`,
      }),
    ],
    [1, () => userMessage('')],
    [1, () => userMessage('', [{ mediaType: 'image/png', data: 'AAAA' }])],
    [2, () => userCancel],
    [1, () => approve],
    [1, () => deny],
    [2, () => downgrade],
    [1, () => triggerContinuation],
    [2, () => workLost],
    [1, () => response(oldRequest(), { text: 'late' })],
    [1, () => llmError(oldRequest(), { retryable: r() < 0.5 })],
    [1, () => timerFired(anyTimer())],
    [1, () => toolComplete(anyTool())],
    [1, () => subAgentResult(anyAgent(), r() < 0.5)],
    [1, () => subAgentStart()],
    [1, () => subAgentStop],
  ];
  // Downgrades matter most when there is something to downgrade.
  if (s.mode === 'unrestricted' && ctx.sandboxAvailable) noise.push([6, () => downgrade]);
  const w = (table: (readonly [number, Gen])[]): ConversationEvent => weighted(r, [...table, ...noise]);

  switch (p.kind) {
    case 'idle':
      return ctx.isSubAgent
        ? w([[40, () => subAgentStart()]])
        : w([
            [40, () => userMessage()],
            [4, () => triggerContinuation],
          ]);
    case 'error':
      return w([
        [30, () => userMessage()],
        [4, () => triggerContinuation],
      ]);
    case 'llm_requesting':
      if (p.retryTimer !== null) {
        return w([
          [40, () => timerFired(p.retryTimer!)],
          [3, () => response(p.requestId, { text: 'early' })],
          [4, () => userCancel],
        ]);
      }
      return w([
        [50, (rr) => genResponse(rr, mem, p.requestId)],
        [12, (rr) => llmError(p.requestId, { retryable: true, retryAfterMs: rr() < 0.3 ? 5000 : 0 })],
        [4, () => llmError(p.requestId, { retryable: false })],
        [4, () => userCancel],
      ]);
    case 'awaiting_continuation':
      if (p.retryTimer !== null)
        return w([
          [40, () => timerFired(p.retryTimer!)],
          [4, () => userCancel],
        ]);
      return w([
        [30, () => response(p.requestId, { text: 'summary', tokens: 120 })],
        [15, () => llmError(p.requestId, { retryable: true })],
        [5, () => llmError(p.requestId, { retryable: false })],
        [4, () => userCancel],
      ]);
    case 'cancelling':
      return w([
        [15, () => response(p.requestId, { text: 'partial' })],
        [15, () => llmError(p.requestId, { retryable: false, errorKind: 'cancelled', aborted: true })],
        [15, () => timerFired(p.timerId)],
        [4, () => userCancel],
      ]);
    case 'tool_executing': {
      const others = p.remaining.map((c) => c.id);
      return w([
        [50, (rr) => toolComplete(p.current.id, 'output', rr() < 0.2)],
        [3, () => toolComplete(others.length > 0 ? pickOne(r, others) : 'tu-nope')],
        [4, () => userCancel],
      ]);
    }
    case 'awaiting_sub_agents':
      return w([
        [50, (rr) => subAgentResult(pickOne(rr, p.pending), rr() < 0.7)],
        [8, () => timerFired(p.timerId)],
        [4, () => userCancel],
      ]);
    case 'awaiting_mode_approval':
      return w([
        [25, () => approve],
        [20, () => deny],
        [4, () => userCancel],
      ]);
    default:
      return w([]);
  }
}

// ---------------------------------------------------------------------------------------------
// The run.

function describeOutcome(o: ModelOutcome): string {
  if (o.kind === 'noop') return 'no-op';
  if (o.kind === 'rejected') return `reject ${o.code}`;
  return `accept → ${JSON.stringify(abstractModel(o.next))} effects ${JSON.stringify([...o.effects].sort())}${
    o.optional.length > 0 ? ` (+ optional ${JSON.stringify(o.optional)})` : ''
  } toolResults ${JSON.stringify(o.next.toolResults)}`;
}

function persistedIds(effects: readonly Effect[]): { uses: string[]; results: string[] } {
  const uses: string[] = [];
  const results: string[] = [];
  for (const e of effects) {
    if (e.type !== 'persist_message') continue;
    for (const b of e.message.content) {
      if (b.type === 'tool_use' && e.message.type === 'agent') uses.push(b.id);
      if (b.type === 'tool_result' && e.message.type === 'tool') results.push(b.toolUseId);
    }
  }
  return { uses, results };
}

const CHAIN_CLOSED: readonly string[] = ['idle', 'error', 'llm_requesting', 'awaiting_continuation', 'context_exhausted'];

/** Runs one sequence; returns null when model and implementation agree throughout, else a report. */
/**
 * `budget`: the owner may have this many LLM requests made (a stand-in for spend: the shell
 * turns what was spent into the context's remaining budget, the core only reads the figure);
 * each event runs with the budget left after the requests made so far. Absent: no budget.
 */
function runSequence(ctxIndex: number, seeds: readonly number[], budget?: number): string | null {
  const { name, ctx: base } = CONTEXTS[ctxIndex]!;
  let ctx = base;
  let impl = initialState(ctx);
  let model = initialModel(ctx);
  const mem: Memory = { toolCounter: 0, timers: [], agents: [], messages: 0 };
  const implUses: string[] = [];
  const implResults: string[] = [];
  const messages: HistoryMessage[] = [];
  const effectIds: string[] = [];
  const trace: string[] = [];
  // Waiting messages: the text each was sent with → its id; ids delivered and withdrawn, in order.
  const waitingIds = new Map<string, string>();
  const implDelivered: string[] = [];
  const withdrawn: string[] = [];
  const implSteered = new Set<string>();
  const fail = (why: string): string => `context: ${name}\n${trace.join('\n')}\n${why}`;

  const initial = abstractImpl(impl);
  if (JSON.stringify(initial) !== JSON.stringify(abstractModel(model))) return fail(`initial state differs: ${JSON.stringify(initial)}`);

  for (const seed of seeds) {
    if (budget !== undefined) ctx = { ...base, remainingBudgetMicros: budget - impl.llmRequests };
    const event = genEvent(ctx, model, mem, rng(seed));
    trace.push(`  [${abstractModel(model).phase}] ${JSON.stringify(event)}`);
    const result = transition(impl, ctx, event);
    const scheduled = result.ok ? result.effects.filter((e) => e.type === 'schedule_timer') : [];
    const freshTimer =
      scheduled.length > 0 ? (scheduled[0] as Extract<Effect, { type: 'schedule_timer' }>).timerId : '<no timer scheduled>';
    const alternatives = modelStep(ctx, model, event, freshTimer);
    const expected = alternatives.map(describeOutcome).join('\n    or ');

    if (!result.ok) {
      const match = alternatives.find((o) => o.kind === 'rejected' && (o.code === '*' || o.code === result.rejection.code));
      if (!match) return fail(`implementation: reject ${result.rejection.code}\nmodel expects: ${expected}`);
      trace.push(`    → reject ${result.rejection.code}`);
      continue;
    }
    if (result.state === impl) {
      if (result.effects.length > 0) return fail(`same state object returned with effects ${JSON.stringify(result.effects.map(tagOf))}`);
      if (!alternatives.some((o) => o.kind === 'noop')) return fail(`implementation: no-op\nmodel expects: ${expected}`);
      trace.push('    → no-op');
      continue;
    }

    // Accepted by the implementation.
    const tags = result.effects.map(tagOf);
    const abs = abstractImpl(result.state);
    const ids = persistedIds(result.effects);
    const uses = [...implUses, ...ids.uses];
    const results = [...implResults, ...ids.results];
    const busyBefore = impl.phase.kind !== 'idle' && impl.phase.kind !== 'error';
    if (event.type === 'user_message' && event.delivery && event.delivery !== 'reject' && busyBefore) {
      // It waits (an interrupt that cancelled at once is delivered in the same transition).
      const id = pendingMessageId(ctx.conversationId, result.state.seq);
      waitingIds.set(event.text, id);
      if (event.delivery !== 'queue') implSteered.add(id);
      const kept = (result.state.pending ?? []).find((m) => m.id === id);
      if (kept && kept.text !== event.text) return fail(`pending ${id} holds ${JSON.stringify(kept.text)}`);
    }
    const delivered = [...implDelivered];
    for (const e of result.effects) {
      if (e.type !== 'persist_message' || e.message.type !== 'user') continue;
      const first = e.message.content[0];
      const id = first?.type === 'text' ? waitingIds.get(first.text) : undefined;
      if (id !== undefined) delivered.push(id);
    }
    const describeImpl = `accept → ${JSON.stringify(abs)} effects ${JSON.stringify([...tags].sort())} toolResults ${JSON.stringify(results)}`;
    if (result.state.phase.kind === 'awaiting_llm') return fail('transition() returned awaiting_llm');
    if (!(result.state.seq > impl.seq)) return fail(`seq did not increase: ${impl.seq} → ${result.state.seq}`);
    const problems = payloadProblems(ctx, impl, result.state, result.effects);
    if (problems.length > 0) return fail(`effect payloads: ${problems.join('; ')}`);
    const allIds = new Set(effectIds);
    for (const e of result.effects) {
      if (allIds.has(e.id)) return fail(`effect id ${e.id} reused`);
      effectIds.push(e.id);
    }
    const match = alternatives.find((o): o is Extract<ModelOutcome, { kind: 'accepted' }> => {
      if (o.kind !== 'accepted') return false;
      const m = abstractModel(o.next);
      const sameAbs = JSON.stringify({ ...m, errorKind: null }) === JSON.stringify({ ...abs, errorKind: null });
      const sameKind = m.errorKind === null || m.errorKind === abs.errorKind;
      const sameIds =
        JSON.stringify(o.next.toolUses) === JSON.stringify(uses) &&
        (o.next.resultsUnspecified || JSON.stringify(o.next.toolResults) === JSON.stringify(results));
      const sameDelivered = JSON.stringify(o.next.delivered) === JSON.stringify(delivered);
      return sameDelivered && sameAbs && sameKind && sameIds && effectsMatch(tags, o.effects, o.optional);
    });
    if (!match) return fail(`implementation: ${describeImpl}\nmodel expects: ${expected}`);
    trace.push(`    → ${abs.phase} ${JSON.stringify(tags)}`);
    impl = result.state;
    model = match.next;
    implUses.push(...ids.uses);
    implResults.push(...ids.results);
    implDelivered.splice(0, implDelivered.length, ...delivered);
    if (event.type === 'user_cancel_queued') withdrawn.push(event.queuedId);
    // Waiting messages are never lost, duplicated or reordered: each one that ever waited is
    // waiting, delivered once or withdrawn; queued ones go out in the order they arrived;
    // nothing waits while the conversation is at rest.
    const waitingNow = (impl.pending ?? []).map((m) => m.id);
    for (const id of waitingIds.values()) {
      const times = delivered.filter((x) => x === id).length + (waitingNow.includes(id) ? 1 : 0) + (withdrawn.includes(id) ? 1 : 0);
      if (times !== 1) return fail(`waiting message ${id} is accounted for ${times} times (waiting, delivered, withdrawn)`);
    }
    const seqOf = (id: string): number => Number(id.slice(id.lastIndexOf('/') + 1));
    const queuedOrder = delivered.filter((id) => !implSteered.has(id)).map(seqOf);
    if (queuedOrder.some((n, i) => i > 0 && n < queuedOrder[i - 1]!))
      return fail(`queued messages delivered out of order: ${delivered.join(', ')}`);
    // At rest nothing waits, unless the budget is spent (then messages wait: no turn could start).
    const spent = ctx.remainingBudgetMicros !== null && ctx.remainingBudgetMicros <= 0;
    if ((impl.phase.kind === 'idle' || impl.phase.kind === 'error') && waitingNow.length > 0 && !spent)
      return fail(`${impl.phase.kind} with messages waiting`);
    for (const e of result.effects) if (e.type === 'persist_message') messages.push(e.message);
    // Whenever the conversation is not inside a tool chain, the history for the model is valid.
    if (CHAIN_CLOSED.includes(impl.phase.kind) && !model.resultsUnspecified) {
      const problems = checkToolChain(buildLlmHistory(messages));
      if (problems.length > 0) return fail(`invalid tool chain in ${impl.phase.kind}: ${problems.join('; ')}`);
    }
    for (const e of result.effects) {
      if (e.type === 'schedule_timer') mem.timers.push(e.timerId);
      if (e.type === 'spawn_sub_agent') mem.agents.push(e.agentId);
    }
  }
  return null;
}

describe('model-based: implementation agrees with the reference model', () => {
  // Fixed fast-check seeds keep CI deterministic; on failure fast-check prints seed and path.
  it.each(CONTEXTS.map((c, i) => [c.name, i] as const))('%s', (_name, ctxIndex) => {
    fc.assert(
      fc.property(fc.array(fc.nat(), { minLength: 1, maxLength: 60 }), (seeds) => {
        const report = runSequence(ctxIndex, seeds);
        if (report !== null) throw new Error(report);
      }),
      { numRuns: 800, seed: 20261125 + ctxIndex },
    );
  });

  // "Budget": the same agreement when the owner's budget runs out mid-run (after 0 to 5 requests).
  it.each(CONTEXTS.map((c, i) => [c.name, i] as const))('%s, with a budget that runs out', (_name, ctxIndex) => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 5 }), fc.array(fc.nat(), { minLength: 1, maxLength: 60 }), (budget, seeds) => {
        const report = runSequence(ctxIndex, seeds, budget);
        if (report !== null) throw new Error(report);
      }),
      { numRuns: 300, seed: 20261126 + ctxIndex },
    );
  });

  it('the generator reaches every phase (the test is not vacuous)', () => {
    const seen = new Set<string>();
    for (let ctxIndex = 0; ctxIndex < CONTEXTS.length; ctxIndex++) {
      const { ctx } = CONTEXTS[ctxIndex]!;
      fc.assert(
        fc.property(fc.array(fc.nat(), { minLength: 1, maxLength: 60 }), (seeds) => {
          let model = initialModel(ctx);
          const mem: Memory = { toolCounter: 0, timers: [], agents: [], messages: 0 };
          for (const seed of seeds) {
            const event = genEvent(ctx, model, mem, rng(seed));
            const first = modelStep(ctx, model, event, `${ctx.conversationId}/timer/x${mem.timers.length}`)[0]!;
            if (first.kind === 'accepted') {
              model = first.next;
              const p = model.phase;
              if (p.kind === 'awaiting_sub_agents') mem.agents.push(...p.pending);
              if ((p.kind === 'llm_requesting' || p.kind === 'awaiting_continuation') && p.retryTimer) mem.timers.push(p.retryTimer);
              if (p.kind === 'cancelling') mem.timers.push(p.timerId);
              if (p.kind === 'awaiting_sub_agents') mem.timers.push(p.timerId);
            }
            seen.add(model.phase.kind);
          }
        }),
        { numRuns: 200, seed: 42 },
      );
    }
    expect([...seen].sort()).toEqual(
      [
        'awaiting_continuation',
        'awaiting_mode_approval',
        'awaiting_sub_agents',
        'cancelling',
        'completed',
        'context_exhausted',
        'error',
        'failed',
        'idle',
        'llm_requesting',
        'tool_executing',
      ].sort(),
    );
  });
});
