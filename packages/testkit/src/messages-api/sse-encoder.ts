/**
 * Turns a scripted message into the exact event sequence the Messages API streams:
 * message_start, then per block content_block_start / ping (after the first start) /
 * content_block_delta... / content_block_stop, then message_delta (stop reason and output
 * usage) and message_stop. Also builds the non-streaming JSON body of the same message.
 */
import type { ApiUsage, ScriptBlock, ScriptedMessage } from './script.ts';

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

export interface ResolvedMessage {
  readonly id: string;
  readonly model: string;
  readonly blocks: ReadonlyArray<ScriptBlock & { readonly resolvedId?: string }>;
  readonly stopReason: string | null;
  readonly usage: ApiUsage;
}

/** Fills in ids, the default stop reason and usage. `inputTokens` estimates the request. */
export function resolveMessage(message: ScriptedMessage, requestModel: string, inputTokens: number): ResolvedMessage {
  const blocks = message.content.map((b) => (b.type === 'tool_use' ? { ...b, resolvedId: b.id ?? makeId('toolu') } : b));
  const hasCompleteToolUse = message.content.some((b) => b.type === 'tool_use' && b.partialJsonChars === undefined);
  const stopReason = message.stopReason === undefined ? (hasCompleteToolUse ? 'tool_use' : 'end_turn') : message.stopReason;
  const outputText = message.content.map((b) => (b.type === 'text' ? b.text : b.type === 'tool_use' ? JSON.stringify(b.input) : b.type === 'thinking' ? b.thinking : '')).join('');
  const usage: ApiUsage = {
    input_tokens: inputTokens,
    output_tokens: estimateTokens(outputText),
    cache_creation_input_tokens: 0,
    cache_read_input_tokens: 0,
    ...message.usage,
  };
  return { id: makeId('msg'), model: message.model ?? requestModel, blocks, stopReason, usage };
}

function chunks(text: string, size: number): string[] {
  const out: string[] = [];
  // Split on code points, never inside a surrogate pair.
  const chars = Array.from(text);
  for (let i = 0; i < chars.length; i += size) out.push(chars.slice(i, i + size).join(''));
  return out;
}

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
        usage: {
          input_tokens: message.usage.input_tokens,
          cache_creation_input_tokens: message.usage.cache_creation_input_tokens,
          cache_read_input_tokens: message.usage.cache_read_input_tokens,
          output_tokens: 1,
        },
      },
    },
  });
  message.blocks.forEach((block, index) => {
    const start = (content_block: unknown) => events.push({ event: 'content_block_start', data: { type: 'content_block_start', index, content_block } });
    const delta = (d: unknown) => events.push({ event: 'content_block_delta', data: { type: 'content_block_delta', index, delta: d } });
    let stop = true;
    switch (block.type) {
      case 'text':
        start({ type: 'text', text: '' });
        for (const text of chunks(block.text, chunkChars)) delta({ type: 'text_delta', text });
        break;
      case 'tool_use': {
        start({ type: 'tool_use', id: block.resolvedId, name: block.name, input: {} });
        let json = JSON.stringify(block.input ?? {});
        if (block.partialJsonChars !== undefined) {
          json = json.slice(0, block.partialJsonChars);
          stop = false;
        }
        for (const partial_json of chunks(json, chunkChars)) delta({ type: 'input_json_delta', partial_json });
        break;
      }
      case 'thinking':
        start({ type: 'thinking', thinking: '', signature: '' });
        for (const thinking of chunks(block.thinking, chunkChars)) delta({ type: 'thinking_delta', thinking });
        delta({ type: 'signature_delta', signature: 'c2lnbmF0dXJl' });
        break;
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
      delta: { stop_reason: message.stopReason, stop_sequence: null },
      usage: { output_tokens: message.usage.output_tokens },
    },
  });
  events.push({ event: 'message_stop', data: { type: 'message_stop' } });
  return events;
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
          return { type: 'text', text: b.text };
        case 'tool_use':
          return { type: 'tool_use', id: b.resolvedId, name: b.name, input: b.input };
        case 'thinking':
          return { type: 'thinking', thinking: b.thinking, signature: 'c2lnbmF0dXJl' };
        case 'raw':
          return b.start;
      }
    }),
    stop_reason: message.stopReason,
    stop_sequence: null,
    usage: message.usage,
  };
}
