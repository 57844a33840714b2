/**
 * Turns a scripted message into the exact event sequence the Messages API streams: message_start, then per
 * block content_block_start / ping (after the first start) / content_block_delta... / content_block_stop,
 * then message_delta (stop reason, stop details and output usage) and message_stop. Also builds the
 * non-streaming JSON body of the same message.
 */
import type { ApiUsage, ScriptBlock, ScriptedMessage } from './script.ts';
import type { BlockSigner } from './signing.ts';

export interface SseEvent {
  readonly event: string;
  readonly data: unknown;
}

let counter = 0;
/** Ids shaped like the API's (`msg_...`, `toolu_...`, `req_...`). */
export function makeId(prefix: string): string {
  counter = (counter + 1) % 1_000_000;
  return `${prefix}_${Date.now().toString(36)}${counter.toString(36).padStart(4, '0')}${Math.random().toString(36).slice(2, 10)}`;
}

/** Rough token estimate, 4 characters a token, at least 1. */
export function estimateTokens(text: string): number {
  return Math.max(1, Math.ceil(text.length / 4));
}

/** A scripted block with what the server filled in: ids, signatures, redacted data. */
export type ResolvedBlock = ScriptBlock & {
  readonly resolvedId?: string;
  /** Thinking: the signature streamed (null: none is sent). */
  readonly resolvedSignature?: string | null;
  /** Redacted thinking: the data sent. */
  readonly resolvedData?: string;
  /** Server tool results: the server_tool_use id they answer. */
  readonly resolvedToolUseId?: string;
};

/** `stop_details` of a refusal, as the API sends it. */
export interface RefusalStopDetails {
  readonly type: 'refusal';
  readonly category: null;
  readonly explanation: string | null;
}

export interface ResolvedMessage {
  readonly id: string;
  readonly model: string;
  readonly blocks: ReadonlyArray<ResolvedBlock>;
  readonly stopReason: string | null;
  readonly stopDetails: RefusalStopDetails | null;
  readonly usage: ApiUsage;
}

/** The input side of a response's usage (the server's prompt cache computes it). */
export type InputUsage = Pick<ApiUsage, 'input_tokens' | 'cache_creation_input_tokens' | 'cache_read_input_tokens' | 'cache_creation'>;

/** Blocks whose content_block_stop is never sent (cut by max_tokens). */
function isCut(b: ScriptBlock): boolean {
  return (
    ((b.type === 'tool_use' || b.type === 'server_tool_use') && b.partialJsonChars !== undefined) ||
    (b.type === 'thinking' && b.cut === true)
  );
}

/**
 * Fills in ids, signatures, redacted data, the default stop reason and usage. `inputTokens`
 * estimates the request; `signer` signs thinking blocks (the server's, so it can verify them
 * when they come back).
 */
export function resolveMessage(
  message: ScriptedMessage,
  requestModel: string,
  input: number | InputUsage,
  signer: BlockSigner,
): ResolvedMessage {
  const inputUsage: InputUsage =
    typeof input === 'number' ? { input_tokens: input, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 } : input;
  let lastServerToolId: string | undefined;
  const blocks: ResolvedBlock[] = message.content.map((b): ResolvedBlock => {
    switch (b.type) {
      case 'tool_use':
        return { ...b, resolvedId: b.id ?? makeId('toolu') };
      case 'server_tool_use':
        lastServerToolId = b.id ?? makeId('srvtoolu');
        return { ...b, resolvedId: lastServerToolId };
      case 'web_search_tool_result':
      case 'web_fetch_tool_result':
      case 'tool_search_tool_result':
        return { ...b, resolvedToolUseId: b.tool_use_id ?? lastServerToolId ?? makeId('srvtoolu') };
      case 'thinking':
        return {
          ...b,
          resolvedSignature:
            b.cut || b.signature === false ? null : typeof b.signature === 'string' ? b.signature : signer.signThinking(b.thinking),
        };
      case 'redacted_thinking':
        return { ...b, resolvedData: b.data ?? signer.redactedData() };
      default:
        return b;
    }
  });
  const hasCompleteToolUse = message.content.some((b) => b.type === 'tool_use' && !isCut(b));
  const stopReason = message.stopReason === undefined ? (hasCompleteToolUse ? 'tool_use' : 'end_turn') : message.stopReason;
  const outputText = message.content
    .map((b) => {
      switch (b.type) {
        case 'text':
          return b.text;
        case 'tool_use':
        case 'server_tool_use':
          return JSON.stringify(b.input);
        case 'thinking':
          return b.thinking;
        default:
          return '';
      }
    })
    .join('');
  const thinking = message.content.filter((b) => b.type === 'thinking' || b.type === 'redacted_thinking');
  const serverCalls = message.content.filter((b): b is Extract<ScriptBlock, { type: 'server_tool_use' }> => b.type === 'server_tool_use');
  // A script that sets the input count alone (e.g. `/usage N`) reports no cache counts beside it.
  const scriptedInputOnly =
    message.usage?.input_tokens !== undefined &&
    message.usage.cache_read_input_tokens === undefined &&
    message.usage.cache_creation_input_tokens === undefined;
  const usage: ApiUsage = {
    ...(scriptedInputOnly ? { input_tokens: 0, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 } : inputUsage),
    output_tokens: estimateTokens(outputText),
    ...(thinking.length > 0
      ? {
          output_tokens_details: {
            thinking_tokens: thinking.reduce((n, b) => n + (b.type === 'thinking' ? estimateTokens(b.thinking) : 64), 0),
          },
        }
      : {}),
    ...(serverCalls.length > 0
      ? {
          server_tool_use: {
            web_search_requests: serverCalls.filter((b) => b.name === 'web_search').length,
            web_fetch_requests: serverCalls.filter((b) => b.name === 'web_fetch').length,
          },
        }
      : {}),
    ...message.usage,
  };
  const stopDetails: RefusalStopDetails | null =
    stopReason === 'refusal' ? { type: 'refusal', category: null, explanation: message.stopExplanation ?? null } : null;
  return { id: makeId('msg'), model: message.model ?? requestModel, blocks, stopReason, stopDetails, usage };
}

function chunks(text: string, size: number): string[] {
  const out: string[] = [];
  // Split on code points, never inside a surrogate pair.
  const chars = Array.from(text);
  for (let i = 0; i < chars.length; i += size) out.push(chars.slice(i, i + size).join(''));
  return out;
}

/**
 * The events of one message. Per block kind, as the API streams it: text (citations_delta events, then
 * text_delta); tool_use and server_tool_use (input_json_delta); thinking (thinking_delta, then
 * signature_delta); redacted_thinking and server tool results (the whole block in content_block_start, no
 * delta). A block cut by max_tokens gets no content_block_stop.
 */
export function streamEvents(message: ResolvedMessage, chunkChars = 12): SseEvent[] {
  const events: SseEvent[] = [];
  events.push({
    event: 'message_start',
    data: {
      type: 'message_start',
      message: {
        id: message.id,
        type: 'message',
        role: 'assistant',
        model: message.model,
        content: [],
        stop_reason: null,
        stop_sequence: null,
        stop_details: null,
        usage: {
          input_tokens: message.usage.input_tokens,
          cache_creation_input_tokens: message.usage.cache_creation_input_tokens,
          cache_read_input_tokens: message.usage.cache_read_input_tokens,
          ...(message.usage.cache_creation ? { cache_creation: message.usage.cache_creation } : {}),
          output_tokens: 1,
        },
      },
    },
  });
  message.blocks.forEach((block, index) => {
    const start = (content_block: unknown) =>
      events.push({ event: 'content_block_start', data: { type: 'content_block_start', index, content_block } });
    const delta = (d: unknown) => events.push({ event: 'content_block_delta', data: { type: 'content_block_delta', index, delta: d } });
    const stop = !isCut(block);
    switch (block.type) {
      case 'text':
        start({ type: 'text', text: '' });
        for (const citation of block.citations ?? []) delta({ type: 'citations_delta', citation });
        for (const text of chunks(block.text, chunkChars)) delta({ type: 'text_delta', text });
        break;
      case 'tool_use':
      case 'server_tool_use': {
        start({ type: block.type, id: block.resolvedId, name: block.name, input: {} });
        let json = JSON.stringify(block.input ?? {});
        if (block.partialJsonChars !== undefined) json = json.slice(0, block.partialJsonChars);
        for (const partial_json of chunks(json, chunkChars)) delta({ type: 'input_json_delta', partial_json });
        break;
      }
      case 'thinking':
        start({ type: 'thinking', thinking: '', signature: '' });
        for (const thinking of chunks(block.thinking, chunkChars)) delta({ type: 'thinking_delta', thinking });
        if (block.resolvedSignature) delta({ type: 'signature_delta', signature: block.resolvedSignature });
        break;
      case 'redacted_thinking':
        start({ type: 'redacted_thinking', data: block.resolvedData });
        break;
      case 'web_search_tool_result':
      case 'web_fetch_tool_result':
      case 'tool_search_tool_result':
        start({ type: block.type, tool_use_id: block.resolvedToolUseId, content: block.content });
        break;
      case 'compaction': {
        const { type: _t, content, encrypted_content, ...rest } = block;
        void _t;
        start({ type: 'compaction', content: null, encrypted_content: null, ...rest });
        delta({ type: 'compaction_delta', content, encrypted_content: encrypted_content ?? null });
        break;
      }
      case 'raw':
        start(block.start);
        for (const d of block.deltas ?? []) delta(d);
        break;
    }
    if (index === 0) events.push({ event: 'ping', data: { type: 'ping' } });
    if (stop) events.push({ event: 'content_block_stop', data: { type: 'content_block_stop', index } });
  });
  events.push({
    event: 'message_delta',
    data: {
      type: 'message_delta',
      delta: { stop_reason: message.stopReason, stop_sequence: null, stop_details: message.stopDetails },
      usage: deltaUsage(message.usage),
    },
  });
  events.push({ event: 'message_stop', data: { type: 'message_stop' } });
  return events;
}

/** message_delta's usage: the output count, and the thinking and server-tool counts when there are any. */
function deltaUsage(usage: ApiUsage): Record<string, unknown> {
  const out: Record<string, unknown> = { output_tokens: usage.output_tokens };
  if (usage.output_tokens_details) out.output_tokens_details = usage.output_tokens_details;
  if (usage.server_tool_use) out.server_tool_use = usage.server_tool_use;
  if (usage.iterations) out.iterations = usage.iterations;
  return out;
}

/** message_delta carrying cumulative input and cache counts too, as newer API versions send. */
export function withCumulativeDeltaUsage(events: SseEvent[], usage: ApiUsage): SseEvent[] {
  return events.map((e) => (e.event === 'message_delta' ? { ...e, data: { ...(e.data as object), usage: { ...usage } } } : e));
}

export function encodeSse(e: SseEvent): string {
  return `event: ${e.event}\ndata: ${JSON.stringify(e.data)}\n\n`;
}

/** The non-streaming JSON body of the same message. */
export function messageBody(message: ResolvedMessage): unknown {
  return {
    id: message.id,
    type: 'message',
    role: 'assistant',
    model: message.model,
    content: message.blocks.map((b) => {
      switch (b.type) {
        case 'text':
          return b.citations ? { type: 'text', text: b.text, citations: b.citations } : { type: 'text', text: b.text };
        case 'tool_use':
        case 'server_tool_use':
          return { type: b.type, id: b.resolvedId, name: b.name, input: b.input };
        case 'thinking':
          return { type: 'thinking', thinking: b.thinking, signature: b.resolvedSignature ?? '' };
        case 'redacted_thinking':
          return { type: 'redacted_thinking', data: b.resolvedData };
        case 'web_search_tool_result':
        case 'web_fetch_tool_result':
        case 'tool_search_tool_result':
          return { type: b.type, tool_use_id: b.resolvedToolUseId, content: b.content };
        case 'compaction':
          return { ...b, encrypted_content: b.encrypted_content ?? null };
        case 'raw':
          return b.start;
      }
    }),
    stop_reason: message.stopReason,
    stop_sequence: null,
    stop_details: message.stopDetails,
    usage: message.usage,
  };
}
