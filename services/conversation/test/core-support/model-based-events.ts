/**
 * Event generation for the model-based test (src/core/model-based.test.ts): a small seeded
 * generator (rng) and genEvent, which draws the next event from the current model state.
 */
import type { ContentBlock, ConversationContext, ConversationEvent, StopReason, ToolCall } from '../../src/core/types.ts';
import { requestIdOf } from './reference-model-state.ts';
import type { ModelState } from './reference-model-state.ts';
import {
  DEFAULT_MAX_TOKENS,
  OUTPUT_LIMIT,
  approve,
  call,
  deny,
  downgrade,
  llmError,
  redactedBlock,
  response,
  searchBlocks,
  subAgentResult,
  subAgentStart,
  subAgentStop,
  thinkingBlock,
  timerFired,
  toolComplete,
  triggerContinuation,
  userCancel,
  userMessage,
  workLost,
} from './matrix-fixtures.ts';

/** mulberry32: a tiny deterministic generator seeded by fast-check. */
export function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export interface Memory {
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

/**
 * Events are chosen from the current model state, so most of them answer what the phase waits
 * for, with a share of stale, duplicate and wrong answers, cancels, timers, approvals,
 * downgrades, sub-agent results and work_lost at every point. Each step draws its event from
 * a fast-check integer (a seed for a small deterministic generator), so fast-check shrinks the
 * sequence and prints the seed on failure.
 */
export function genEvent(ctx: ConversationContext, s: ModelState, mem: Memory, r: () => number): ConversationEvent {
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
