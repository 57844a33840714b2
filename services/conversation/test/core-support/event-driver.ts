/**
 * The property tests' driver: turns a choice (arbitraries.ts) into a concrete event by reading the
 * current state (nextEvent), and probes: a broad set of events to try on a reached state
 * (probeEvents). No clock, no Math.random: every decision comes from the choice.
 */
import type { ContentBlock, ConversationContext, ConversationEvent, ConversationState, Usage } from '../../src/core/index.ts';
import { DEFAULT_MAX_TOKENS } from './arbitraries.ts';
import type { Choice, ErrorSpec, ResponseSpec, ToolSpec, UsageSpec } from './arbitraries.ts';

// ---------------------------------------------------------------------------------------------
// The driver: choice + state → event.

function pickWeighted<T>(pick: number, options: readonly (readonly [number, T])[]): T {
  const total = options.reduce((sum, [w]) => sum + w, 0);
  let at = pick % total;
  for (const [w, value] of options) {
    if (at < w) return value;
    at -= w;
  }
  return options[options.length - 1]![1];
}

export function usageFor(spec: UsageSpec, contextWindow: number): Usage {
  const warn = Math.ceil(contextWindow * 0.8);
  const cont = Math.ceil(contextWindow * 0.9);
  const total = {
    tiny: Math.floor(contextWindow / 20) + 7,
    below_warn: warn - 1,
    at_warn: warn,
    mid: Math.floor((warn + cont) / 2),
    below_cont: cont - 1,
    at_cont: cont,
    over: contextWindow + 50,
  }[spec.level];
  const [o, r, c] = spec.split;
  const outputTokens = Math.floor((total * o) / 10);
  const cacheReadInputTokens = Math.floor((total * r) / 10);
  const cacheCreationInputTokens = Math.floor((total * c) / 10);
  return {
    inputTokens: total - outputTokens - cacheReadInputTokens - cacheCreationInputTokens,
    outputTokens,
    cacheReadInputTokens,
    cacheCreationInputTokens,
    thinkingTokens: Math.floor(outputTokens / 2),
    webSearchRequests: 0,
    webFetchRequests: 0,
  };
}

/** A task text that cannot be a substring of another one (for the conservation property). */
export function taskText(step: number, toolIndex: number, agentIndex: number): string {
  return `[task ${step}-${toolIndex}-${agentIndex}]`;
}

export function toolUseId(step: number, index: number): string {
  return `toolu_${step}_${index}`;
}

function toolInput(spec: ToolSpec, step: number, index: number): Record<string, unknown> {
  switch (spec.name) {
    case 'bash':
      return { command: `echo step ${step}` };
    case 'patch':
      return { path: 'notes.txt', patches: [{ operation: 'append_eof', new_text: `line ${step}\n` }] };
    case 'keyword_search':
      return { query: 'where is the config', search_terms: ['config'] };
    case 'think':
      return { thoughts: 'planning' };
    case 'spawn_agents': {
      const n = spec.variant % 4;
      if (n === 0) return spec.variant % 8 === 0 ? {} : { tasks: [] };
      return { tasks: Array.from({ length: n }, (_, i) => ({ task: taskText(step, index, i) })) };
    }
    case 'submit_result':
      return spec.variant % 3 === 0 ? { result: `result ${step}`, success: false } : { result: `result ${step}`, success: true };
    case 'request_mode_upgrade':
      return { reason: 'I need to edit notes.txt' };
    case 'frobnicate':
      return { level: 11 };
  }
}

export function responseContent(spec: ResponseSpec, step: number, withTools: boolean): ContentBlock[] {
  const blocks: ContentBlock[] = [];
  if (spec.thinking === 'thinking') blocks.push({ type: 'thinking', thinking: `thinking at step ${step}`, signature: `sig-${step}` });
  if (spec.thinking === 'omitted') blocks.push({ type: 'thinking', thinking: '', signature: `sig-${step}` });
  if (spec.thinking === 'redacted') blocks.push({ type: 'redacted_thinking', data: `cmVkYWN0ZWQ${step}` });
  if (spec.serverTools) {
    const id = `srvtoolu_${step}`;
    blocks.push(
      {
        type: 'server_tool',
        blockType: 'server_tool_use',
        json: JSON.stringify({ type: 'server_tool_use', id, name: 'web_search', input: { query: 'bedrock' } }),
      },
      {
        type: 'server_tool',
        blockType: 'web_search_tool_result',
        json: JSON.stringify({ type: 'web_search_tool_result', tool_use_id: id, content: [] }),
      },
    );
  }
  if (spec.text !== null) {
    blocks.push(
      spec.serverTools && spec.text !== ''
        ? { type: 'text', text: spec.text, citations: '[{"type":"web_search_result_location","url":"https://example.com"}]' }
        : { type: 'text', text: spec.text },
    );
  }
  if (withTools) {
    spec.tools.forEach((tool, i) => {
      blocks.push({ type: 'tool_use', id: toolUseId(step, i), name: tool.name, input: toolInput(tool, step, i) });
    });
  }
  return blocks;
}

function llmResponse(requestId: string, spec: ResponseSpec, ctx: ConversationContext, step: number, withTools: boolean): ConversationEvent {
  const hasTools = withTools && spec.tools.length > 0;
  const u = usageFor(spec.usage, ctx.contextWindow);
  return {
    type: 'llm_response',
    requestId,
    content: responseContent(spec, step, withTools),
    stopReason: spec.stopReason ?? (hasTools ? 'tool_use' : 'end_turn'),
    usage: spec.serverTools ? { ...u, webSearchRequests: 1 } : u,
    maxTokens: { default: DEFAULT_MAX_TOKENS, limit: ctx.maxOutputTokens, unreported: 0 }[spec.maxTokens],
    cutToolNames: withTools ? spec.cut : [],
    stopExplanation: spec.explanation,
  };
}

function llmError(requestId: string, spec: ErrorSpec, aborted = false): ConversationEvent {
  return {
    type: 'llm_error',
    requestId,
    errorKind: aborted ? 'cancelled' : spec.errorKind,
    retryable: aborted ? false : spec.retryable,
    message: aborted ? 'Request aborted' : `${spec.errorKind} failure`,
    retryAfterMs: aborted ? 0 : spec.retryAfterMs,
    aborted,
  };
}

function userMessage(choice: Choice, step: number): Extract<ConversationEvent, { type: 'user_message' }> {
  return {
    type: 'user_message',
    text: `message ${step}`,
    images: Array.from({ length: choice.images }, (_, i) => ({ mediaType: 'image/png', data: `aW1n${step}${i}` })),
  };
}

function answer(state: ConversationState, ctx: ConversationContext, choice: Choice, past: readonly ConversationEvent[]): ConversationEvent {
  const step = past.length;
  const p = state.phase;
  switch (p.kind) {
    case 'idle':
      if (ctx.isSubAgent) return { type: 'sub_agent_start', task: `subtask for step ${step}` };
      return pickWeighted<ConversationEvent>(choice.pick, [
        [30, userMessage(choice, step)],
        [1, { type: 'user_trigger_continuation' }],
        [2, { type: 'user_request_downgrade' }],
      ]);
    case 'error':
      return pickWeighted<ConversationEvent>(choice.pick, [
        [20, userMessage(choice, step)],
        [1, { type: 'user_trigger_continuation' }],
      ]);
    case 'llm_requesting':
    case 'awaiting_continuation': {
      if (p.retry) return { type: 'timer_fired', timerId: p.retry.timerId };
      // The continuation request offers no tools, so its answer carries none.
      const withTools = p.kind === 'llm_requesting';
      return choice.pick % 10 < 6 ? llmResponse(p.requestId, choice.response, ctx, step, withTools) : llmError(p.requestId, choice.error);
    }
    case 'tool_executing':
      return {
        type: 'tool_complete',
        result: { toolUseId: p.current.id, content: `output of ${p.current.id}`, isError: choice.toolIsError },
      };
    case 'cancelling':
      return pickWeighted(choice.pick, [
        [3, llmError(p.requestId, choice.error, true)],
        [1, llmResponse(p.requestId, choice.response, ctx, step, true)],
        [1, { type: 'timer_fired', timerId: p.timerId }],
      ]);
    case 'awaiting_sub_agents': {
      if (p.pending.length === 0 || choice.pick % 8 === 0) return { type: 'timer_fired', timerId: p.timerId };
      const agentId = p.pending[choice.pick % p.pending.length]!;
      const task = p.agents.find((a) => a.agentId === agentId)?.task ?? '';
      const success = choice.pick % 5 !== 0;
      return {
        type: 'sub_agent_result',
        outcome: success
          ? { agentId, task, success, result: `result of ${agentId}` }
          : { agentId, task, success, result: `failure of ${agentId}`, errorKind: 'unknown' },
      };
    }
    case 'awaiting_mode_approval':
      return choice.pick % 2 === 0 ? { type: 'user_approve_upgrade' } : { type: 'user_deny_upgrade' };
    case 'awaiting_llm':
    case 'context_exhausted':
    case 'completed':
    case 'failed':
      return noise(state, ctx, { ...choice, noise: 'duplicate' }, past);
  }
}

function noise(state: ConversationState, ctx: ConversationContext, choice: Choice, past: readonly ConversationEvent[]): ConversationEvent {
  const step = past.length;
  const cid = ctx.conversationId;
  switch (choice.noise ?? 'user_cancel') {
    case 'user_message':
      return userMessage(choice, step);
    case 'empty_message':
      return { type: 'user_message', text: choice.pick % 2 === 0 ? '' : '   ', images: [] };
    case 'user_cancel':
      return { type: 'user_cancel' };
    case 'approve':
      return { type: 'user_approve_upgrade' };
    case 'deny':
      return { type: 'user_deny_upgrade' };
    case 'downgrade':
      return { type: 'user_request_downgrade' };
    case 'trigger_continuation':
      return { type: 'user_trigger_continuation' };
    case 'work_lost':
      return { type: 'work_lost', reason: 'worker restarted' };
    case 'sub_agent_stop':
      return { type: 'sub_agent_stop', reason: 'parent cancelled' };
    case 'sub_agent_start':
      return { type: 'sub_agent_start', task: `another task ${step}` };
    case 'duplicate':
      return past.length === 0 ? { type: 'user_cancel' } : past[choice.pick % past.length]!;
    case 'stale_llm': {
      const n = choice.pick % 3 === 0 ? 999 : Math.max(0, state.llmRequests - 1 - (choice.pick % 2));
      const requestId = `${cid}/llm/${n}`;
      return choice.pick % 2 === 0 ? llmResponse(requestId, choice.response, ctx, step, true) : llmError(requestId, choice.error);
    }
    case 'stale_tool': {
      const old = past.flatMap((e) => (e.type === 'llm_response' ? e.content.flatMap((b) => (b.type === 'tool_use' ? [b.id] : [])) : []));
      const id = old.length > 0 && choice.pick % 3 !== 0 ? old[choice.pick % old.length]! : 'toolu_never_asked';
      return { type: 'tool_complete', result: { toolUseId: id, content: 'late output', isError: choice.toolIsError } };
    }
    case 'stale_timer': {
      const n = choice.pick % 4 === 0 ? 9999 : Math.max(0, state.seq - 1 - (choice.pick % 3));
      return { type: 'timer_fired', timerId: `${cid}/timer/${n}` };
    }
    case 'queue_message':
      return { ...userMessage(choice, step), delivery: 'queue' };
    case 'steer_message':
      return { ...userMessage(choice, step), delivery: 'steer' };
    case 'interrupt_message':
      return { ...userMessage(choice, step), delivery: 'interrupt' };
    case 'cancel_queued': {
      const waiting = state.pending ?? [];
      const queuedId = waiting.length > 0 && choice.pick % 4 !== 0 ? waiting[choice.pick % waiting.length]!.id : `${cid}/q/${choice.pick}`;
      return { type: 'user_cancel_queued', queuedId };
    }
    case 'stale_sub_agent': {
      const old = past.flatMap((e) => (e.type === 'sub_agent_result' ? [e] : []));
      if (old.length > 0 && choice.pick % 2 === 0) return old[choice.pick % old.length]!;
      const agentId = `${cid}--toolu_never--${choice.pick % 3}`;
      return { type: 'sub_agent_result', outcome: { agentId, task: 'unknown', success: true, result: 'stray' } };
    }
  }
}

/** The driver: the next event for this state. `past` is every event sent so far (for duplicates and fresh ids). */
export function nextEvent(
  state: ConversationState,
  ctx: ConversationContext,
  choice: Choice,
  past: readonly ConversationEvent[],
): ConversationEvent {
  return choice.noise === null ? answer(state, ctx, choice, past) : noise(state, ctx, choice, past);
}

// ---------------------------------------------------------------------------------------------
// Probes: events to try on a reached state (for "every event" properties).

/** A broad set of events for one state: answers, stale answers and every user action. */
export function probeEvents(state: ConversationState, ctx: ConversationContext): ConversationEvent[] {
  const cid = ctx.conversationId;
  const lastRequest = `${cid}/llm/${state.llmRequests}`;
  const usage = usageFor({ level: 'tiny', split: [1, 1, 1] }, ctx.contextWindow);
  const spec: ErrorSpec = { errorKind: 'server', retryable: true, retryAfterMs: 0 };
  const events: ConversationEvent[] = [
    { type: 'user_message', text: 'hello', images: [] },
    { type: 'user_message', text: '', images: [] },
    { type: 'user_cancel' },
    { type: 'user_approve_upgrade' },
    { type: 'user_deny_upgrade' },
    { type: 'user_request_downgrade' },
    { type: 'user_trigger_continuation' },
    { type: 'user_message', text: 'queued', images: [], delivery: 'queue' },
    { type: 'user_message', text: 'steered', images: [], delivery: 'steer' },
    { type: 'user_message', text: 'interrupting', images: [], delivery: 'interrupt' },
    { type: 'user_cancel_queued', queuedId: state.pending?.[0]?.id ?? `${cid}/q/1` },
    { type: 'llm_response', requestId: lastRequest, content: [{ type: 'text', text: 'late' }], stopReason: 'end_turn', usage },
    {
      type: 'llm_response',
      requestId: lastRequest,
      content: [{ type: 'tool_use', id: 'toolu_probe', name: 'bash', input: { command: 'ls' } }],
      stopReason: 'tool_use',
      usage,
    },
    llmError(lastRequest, spec),
    llmError(lastRequest, { ...spec, retryable: false, errorKind: 'auth' }),
    llmError(lastRequest, spec, true),
    { type: 'tool_complete', result: { toolUseId: 'toolu_probe', content: 'x', isError: false } },
    { type: 'sub_agent_result', outcome: { agentId: `${cid}--toolu_probe--0`, task: 't', success: true, result: 'r' } },
    { type: 'sub_agent_start', task: 'probe task' },
    { type: 'sub_agent_stop', reason: 'probe' },
    { type: 'work_lost', reason: 'probe' },
  ];
  for (let s = Math.max(0, state.seq - 3); s <= state.seq; s++) events.push({ type: 'timer_fired', timerId: `${cid}/timer/${s}` });
  return events;
}
