/**
 * Folds the Messages API's stream events into one response, defensively (spec/004;
 * docs/llm-gateway.md, "Responses and malformed streams"): what it keeps, leaves out and reports
 * is listed on {@link StreamAccumulator}. Pure: no I/O; text and thinking deltas go to the
 * callback as they arrive.
 */
import { mapStopReason } from './stop-reason.ts';
import { TokenDeltaKind, type StopReason } from '@bedrock/contracts';

export interface AccumulatedUsage {
  inputTokens: number;
  outputTokens: number;
  cacheCreationInputTokens: number;
  /** Of cacheCreationInputTokens, those written to the 1-hour cache (`cache_creation.ephemeral_1h_input_tokens`). */
  cacheCreation1hInputTokens: number;
  cacheReadInputTokens: number;
  /** Of outputTokens, those spent thinking (`output_tokens_details.thinking_tokens`). */
  thinkingTokens: number;
  /** `server_tool_use.web_search_requests` / `web_fetch_requests`. */
  webSearchRequests: number;
  webFetchRequests: number;
  /**
   * Of the counts above, the total (input, cache writes and reads, output) of the compaction
   * iterations: `usage.iterations` entries of type `compaction`, which the provider leaves out
   * of its top-level counts; the gateway adds them to those counts so that they are billed.
   */
  compactionTokens: number;
}

export type AccumulatedBlock =
  /** `citations`: the block's `citations` array as JSON, when it has any. */
  | { type: 'text'; text: string; citations?: string }
  | { type: 'tool_use'; id: string; name: string; inputJson: string }
  | { type: 'thinking'; thinking: string; signature: string }
  | { type: 'redacted_thinking'; data: string }
  /** `json`: the block exactly as the provider sent it (a server_tool_use with its input filled in). */
  | { type: 'server_tool'; blockType: string; json: string }
  /** Server-side compaction: `content` the summary ("" when none), `json` the whole block as returned (sent back verbatim). */
  | { type: 'compaction'; content: string; json: string };

export type AccumulatorResult =
  | {
      readonly ok: true;
      readonly content: AccumulatedBlock[];
      readonly stopReason: StopReason;
      readonly rawStopReason: string | null;
      readonly stopReasonInferred: boolean;
      /** `stop_details.explanation` (a refusal's reason), "" when none. */
      readonly stopExplanation: string;
      readonly usage: AccumulatedUsage;
      readonly model: string;
      /** Names of tool_use blocks left out because they never completed, in order. */
      readonly cutToolNames: string[];
      /** Types of other blocks left out because they never completed (thinking, server tools), in order. */
      readonly cutBlockTypes: string[];
      /** Block types this code does not know, in order (left out of `content`). */
      readonly unknownBlockTypes: string[];
    }
  | { readonly ok: false; readonly reason: 'incomplete' | 'malformed_tool_input'; readonly detail: string };

type Slot =
  | { kind: 'text'; text: string; citations: unknown[]; stopped: boolean }
  | { kind: 'tool_use'; id: string; name: string; json: string; stopped: boolean }
  | { kind: 'thinking'; thinking: string; signature: string; stopped: boolean }
  | { kind: 'redacted_thinking'; data: string; stopped: boolean }
  /** `json`: streamed input (server_tool_use); `block`: the start object, everything else verbatim. */
  | { kind: 'server_tool'; block: Record<string, unknown>; streamsInput: boolean; json: string; stopped: boolean }
  /** The start object, with `content` and `encrypted_content` assigned from `compaction_delta` (it carries their final value). */
  | { kind: 'compaction'; block: Record<string, unknown>; stopped: boolean }
  | { kind: 'other'; type: string; stopped: boolean };

/** Blocks of tools the provider runs itself: the call, and results of any such tool. */
export function isServerToolBlockType(type: string): boolean {
  return type === 'server_tool_use' || (type.endsWith('_tool_result') && type !== 'tool_result');
}

const emptyUsage = (): AccumulatedUsage => ({
  inputTokens: 0,
  outputTokens: 0,
  cacheCreationInputTokens: 0,
  cacheCreation1hInputTokens: 0,
  cacheReadInputTokens: 0,
  thinkingTokens: 0,
  webSearchRequests: 0,
  webFetchRequests: 0,
  compactionTokens: 0,
});

export type DeltaCallback = (blockIndex: number, text: string, kind: TokenDeltaKind) => void;

/**
 * Folds one response's stream events (`push`, then `finish`):
 * - blocks are keyed by the event's own index, so a block type this code does not know
 *   cannot shift later blocks; such blocks are left out (and named, for a warning);
 * - events with a missing or invalid index are skipped, never defaulted to block 0;
 * - a block without its content_block_stop (cut by max_tokens) is left out, except text,
 *   whose part is kept; cut tool calls are named (`cutToolNames`);
 * - thinking is kept with its signature (a thinking block without one is incomplete),
 *   redacted thinking with its data, server-tool blocks (server_tool_use, *_tool_result)
 *   verbatim, text with its citations — all sent back exactly as returned later;
 * - a completed tool call whose input is not a JSON object is reported, not passed on;
 * - a stream that ends with neither a stop reason nor message_stop is incomplete.
 */
export class StreamAccumulator {
  readonly #slots = new Map<number, Slot>();
  readonly #usage: AccumulatedUsage = emptyUsage();
  /** The compaction iterations' counts (`usage.iterations`, the latest report wins: it is cumulative). */
  #compaction: AccumulatedUsage = emptyUsage();
  #model = '';
  #stopReason: string | null = null;
  #stopExplanation = '';
  #sawMessageStop = false;
  #skipped = 0;

  /**
   * `onDelta(blockIndex, text, kind)` is called for every non-empty text delta (kind TEXT)
   * and thinking delta (kind THINKING), in stream order.
   */
  constructor(private readonly onDelta: DeltaCallback = () => {}) {}

  /** Events skipped because of a missing or invalid index. */
  get skippedEvents(): number {
    return this.#skipped;
  }

  push(event: { readonly type: string; readonly [key: string]: unknown }): void {
    switch (event.type) {
      case 'message_start': {
        const message = event.message as { model?: unknown; usage?: Record<string, unknown> } | undefined;
        if (typeof message?.model === 'string') this.#model = message.model;
        this.#applyUsage(message?.usage);
        break;
      }
      case 'content_block_start': {
        const index = this.#index(event);
        if (index === undefined) return;
        this.#slots.set(index, this.#start(index, (event.content_block ?? {}) as Record<string, unknown>));
        break;
      }
      case 'content_block_delta': {
        const index = this.#index(event);
        if (index === undefined) return;
        const slot = this.#slots.get(index);
        const delta = (event.delta ?? {}) as Record<string, unknown>;
        if (!slot) {
          this.#skipped++;
          return;
        }
        this.#delta(index, slot, delta);
        break;
      }
      case 'content_block_stop': {
        const index = this.#index(event);
        if (index === undefined) return;
        const slot = this.#slots.get(index);
        if (slot) slot.stopped = true;
        else this.#skipped++;
        break;
      }
      case 'message_delta': {
        const delta = (event.delta ?? {}) as Record<string, unknown>;
        if (typeof delta.stop_reason === 'string') this.#stopReason = delta.stop_reason;
        const details = delta.stop_details as Record<string, unknown> | null | undefined;
        if (details && typeof details === 'object' && typeof details.explanation === 'string') this.#stopExplanation = details.explanation;
        this.#applyUsage(event.usage as Record<string, unknown> | undefined);
        break;
      }
      case 'message_stop':
        this.#sawMessageStop = true;
        break;
      default:
        // ping and event types added later carry nothing we need.
        break;
    }
  }

  #start(index: number, block: Record<string, unknown>): Slot {
    const type = String(block.type ?? 'unknown');
    switch (type) {
      case 'text': {
        const initial = typeof block.text === 'string' ? block.text : '';
        if (initial) this.onDelta(index, initial, TokenDeltaKind.TEXT);
        return {
          kind: 'text',
          text: initial,
          citations: Array.isArray(block.citations) ? [...(block.citations as unknown[])] : [],
          stopped: false,
        };
      }
      case 'tool_use':
        return {
          kind: 'tool_use',
          id: String(block.id ?? ''),
          name: String(block.name ?? ''),
          json: initialInput(block.input),
          stopped: false,
        };
      case 'thinking': {
        const initial = typeof block.thinking === 'string' ? block.thinking : '';
        if (initial) this.onDelta(index, initial, TokenDeltaKind.THINKING);
        return {
          kind: 'thinking',
          thinking: initial,
          signature: typeof block.signature === 'string' ? block.signature : '',
          stopped: false,
        };
      }
      case 'redacted_thinking':
        return { kind: 'redacted_thinking', data: typeof block.data === 'string' ? block.data : '', stopped: false };
      case 'compaction':
        if (typeof block.content === 'string' && block.content) this.onDelta(index, block.content, TokenDeltaKind.COMPACTION);
        return { kind: 'compaction', block: { ...block }, stopped: false };
      default:
        if (isServerToolBlockType(type)) {
          // A call's input streams as input_json_delta, as a tool_use's does; results arrive whole.
          const streamsInput = type === 'server_tool_use';
          return {
            kind: 'server_tool',
            block: { ...block },
            streamsInput,
            json: streamsInput ? initialInput(block.input) : '',
            stopped: false,
          };
        }
        return { kind: 'other', type, stopped: false };
    }
  }

  #delta(index: number, slot: Slot, delta: Record<string, unknown>): void {
    switch (slot.kind) {
      case 'text':
        if (delta.type === 'text_delta' && typeof delta.text === 'string') {
          slot.text += delta.text;
          if (delta.text) this.onDelta(index, delta.text, TokenDeltaKind.TEXT);
        } else if (delta.type === 'citations_delta' && delta.citation !== undefined && delta.citation !== null) {
          slot.citations.push(delta.citation);
        }
        break;
      case 'tool_use':
        if (delta.type === 'input_json_delta' && typeof delta.partial_json === 'string') slot.json += delta.partial_json;
        break;
      case 'server_tool':
        if (slot.streamsInput && delta.type === 'input_json_delta' && typeof delta.partial_json === 'string')
          slot.json += delta.partial_json;
        break;
      case 'thinking':
        if (delta.type === 'thinking_delta' && typeof delta.thinking === 'string') {
          slot.thinking += delta.thinking;
          if (delta.thinking) this.onDelta(index, delta.thinking, TokenDeltaKind.THINKING);
        } else if (delta.type === 'signature_delta' && typeof delta.signature === 'string') {
          slot.signature += delta.signature;
        }
        break;
      case 'compaction':
        if (delta.type === 'compaction_delta') {
          slot.block.content = delta.content ?? null;
          if ('encrypted_content' in delta) slot.block.encrypted_content = delta.encrypted_content;
          if (typeof delta.content === 'string' && delta.content) this.onDelta(index, delta.content, TokenDeltaKind.COMPACTION);
        }
        break;
      case 'redacted_thinking':
      case 'other':
        break;
    }
  }

  finish(): AccumulatorResult {
    if (this.#stopReason === null && !this.#sawMessageStop) {
      return { ok: false, reason: 'incomplete', detail: 'the stream ended before the response was complete (no stop reason)' };
    }
    const content: AccumulatedBlock[] = [];
    const unknownBlockTypes: string[] = [];
    const cutToolNames: string[] = [];
    const cutBlockTypes: string[] = [];
    for (const [, slot] of [...this.#slots.entries()].sort(([a], [b]) => a - b)) {
      switch (slot.kind) {
        case 'text':
          // A cut text block keeps what came: the model is asked to continue it.
          if (slot.text !== '')
            content.push(
              slot.citations.length > 0
                ? { type: 'text', text: slot.text, citations: JSON.stringify(slot.citations) }
                : { type: 'text', text: slot.text },
            );
          break;
        case 'tool_use': {
          if (!slot.stopped) {
            cutToolNames.push(slot.name);
            break;
          }
          const input = parseInput(slot.json);
          if (typeof input === 'string')
            return { ok: false, reason: 'malformed_tool_input', detail: `the input of tool call ${slot.name} (${slot.id}) ${input}` };
          content.push({ type: 'tool_use', id: slot.id, name: slot.name, inputJson: JSON.stringify(input) });
          break;
        }
        case 'thinking':
          // Without its signature the block cannot be sent back: incomplete.
          if (slot.stopped && slot.signature !== '') content.push({ type: 'thinking', thinking: slot.thinking, signature: slot.signature });
          else cutBlockTypes.push('thinking');
          break;
        case 'redacted_thinking':
          if (slot.stopped && slot.data !== '') content.push({ type: 'redacted_thinking', data: slot.data });
          else cutBlockTypes.push('redacted_thinking');
          break;
        case 'server_tool': {
          const blockType = String(slot.block.type);
          if (!slot.stopped) {
            cutBlockTypes.push(blockType);
            break;
          }
          const block = { ...slot.block };
          if (slot.streamsInput) {
            const input = parseInput(slot.json);
            if (typeof input === 'string')
              return {
                ok: false,
                reason: 'malformed_tool_input',
                detail: `the input of server tool call ${String(block.name)} (${String(block.id)}) ${input}`,
              };
            block.input = input;
          }
          content.push({ type: 'server_tool', blockType, json: JSON.stringify(block) });
          break;
        }
        case 'compaction':
          if (!slot.stopped) cutBlockTypes.push('compaction');
          else
            content.push({
              type: 'compaction',
              content: typeof slot.block.content === 'string' ? slot.block.content : '',
              json: JSON.stringify(slot.block),
            });
          break;
        case 'other':
          unknownBlockTypes.push(slot.type);
          break;
      }
    }
    const { stopReason, inferred } = mapStopReason(
      this.#stopReason,
      content.some((b) => b.type === 'tool_use'),
    );
    return {
      ok: true,
      content,
      stopReason,
      rawStopReason: this.#stopReason,
      stopReasonInferred: inferred,
      stopExplanation: this.#stopExplanation,
      usage: withCompaction(this.#usage, this.#compaction),
      model: this.#model,
      cutToolNames,
      cutBlockTypes,
      unknownBlockTypes,
    };
  }

  #index(event: Record<string, unknown>): number | undefined {
    const index = event.index;
    if (typeof index === 'number' && Number.isInteger(index) && index >= 0) return index;
    this.#skipped++;
    return undefined;
  }

  /** message_start carries the input counts; message_delta's counts are cumulative and win when present. */
  #applyUsage(usage: Record<string, unknown> | undefined): void {
    if (!usage || typeof usage !== 'object') return;
    const take = (from: Record<string, unknown> | undefined, field: string): number | undefined => {
      const v = from?.[field];
      return typeof v === 'number' && Number.isFinite(v) && v >= 0 ? v : undefined;
    };
    const u = this.#usage;
    u.inputTokens = take(usage, 'input_tokens') ?? u.inputTokens;
    u.outputTokens = take(usage, 'output_tokens') ?? u.outputTokens;
    u.cacheCreationInputTokens = take(usage, 'cache_creation_input_tokens') ?? u.cacheCreationInputTokens;
    u.cacheReadInputTokens = take(usage, 'cache_read_input_tokens') ?? u.cacheReadInputTokens;
    // The 5-minute/1-hour split of the writes; the 5-minute part is the rest of the total.
    const creation = objectOrUndefined(usage.cache_creation);
    u.cacheCreation1hInputTokens = take(creation, 'ephemeral_1h_input_tokens') ?? u.cacheCreation1hInputTokens;
    const details = objectOrUndefined(usage.output_tokens_details);
    u.thinkingTokens = take(details, 'thinking_tokens') ?? u.thinkingTokens;
    const server = objectOrUndefined(usage.server_tool_use);
    u.webSearchRequests = take(server, 'web_search_requests') ?? u.webSearchRequests;
    u.webFetchRequests = take(server, 'web_fetch_requests') ?? u.webFetchRequests;
    if (Array.isArray(usage.iterations)) {
      const c = emptyUsage();
      for (const it of usage.iterations) {
        const i = objectOrUndefined(it);
        if (!i || i.type !== 'compaction') continue;
        c.inputTokens += take(i, 'input_tokens') ?? 0;
        c.outputTokens += take(i, 'output_tokens') ?? 0;
        c.cacheCreationInputTokens += take(i, 'cache_creation_input_tokens') ?? 0;
        c.cacheCreation1hInputTokens += take(objectOrUndefined(i.cache_creation), 'ephemeral_1h_input_tokens') ?? 0;
        c.cacheReadInputTokens += take(i, 'cache_read_input_tokens') ?? 0;
      }
      this.#compaction = c;
    }
  }
}

/** The top-level counts plus the compaction iterations' (what the provider bills in all). */
function withCompaction(u: AccumulatedUsage, c: AccumulatedUsage): AccumulatedUsage {
  return {
    ...u,
    inputTokens: u.inputTokens + c.inputTokens,
    outputTokens: u.outputTokens + c.outputTokens,
    cacheCreationInputTokens: u.cacheCreationInputTokens + c.cacheCreationInputTokens,
    cacheCreation1hInputTokens: u.cacheCreation1hInputTokens + c.cacheCreation1hInputTokens,
    cacheReadInputTokens: u.cacheReadInputTokens + c.cacheReadInputTokens,
    compactionTokens: c.inputTokens + c.outputTokens + c.cacheCreationInputTokens + c.cacheReadInputTokens,
  };
}

function objectOrUndefined(v: unknown): Record<string, unknown> | undefined {
  return typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined;
}

/** The start normally carries `{}` and the input follows as input_json_delta. */
function initialInput(input: unknown): string {
  return input && typeof input === 'object' && Object.keys(input).length > 0 ? JSON.stringify(input) : '';
}

/** A streamed input as an object, or what is wrong with it. */
function parseInput(json: string): Record<string, unknown> | string {
  let value: unknown;
  try {
    value = JSON.parse(json === '' ? '{}' : json);
  } catch (err) {
    return `is not valid JSON (${(err as Error).message})`;
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return 'is not a JSON object';
  return value as Record<string, unknown>;
}
