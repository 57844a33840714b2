/**
 * Folds the Messages API's stream events into one response, defensively (spec/004):
 * - blocks are keyed by the event's own index, so an unknown block type (thinking,
 *   server_tool_use, anything new) cannot shift later blocks; unknown blocks are left out;
 * - events with a missing or invalid index are skipped, never defaulted to block 0;
 * - a tool_use block without its content_block_stop (cut by max_tokens) is dropped;
 * - a completed tool_use whose input is not a JSON object is reported, not passed on;
 * - a stream that ends with neither a stop reason nor message_stop is incomplete.
 * Pure: no I/O, text deltas go to the callback as they arrive.
 */
import { mapStopReason } from './stop-reason.ts';
import type { StopReason } from '@bedrock/contracts';

export interface AccumulatedUsage {
  inputTokens: number;
  outputTokens: number;
  cacheCreationInputTokens: number;
  cacheReadInputTokens: number;
}

export type AccumulatedBlock = { type: 'text'; text: string } | { type: 'tool_use'; id: string; name: string; inputJson: string };

export type AccumulatorResult =
  | {
      readonly ok: true;
      readonly content: AccumulatedBlock[];
      readonly stopReason: StopReason;
      readonly rawStopReason: string | null;
      readonly stopReasonInferred: boolean;
      readonly usage: AccumulatedUsage;
      readonly model: string;
      /** tool_use blocks dropped because they never completed. */
      readonly droppedToolUses: number;
      /** Block types that were not text or tool_use, in order (left out of `content`). */
      readonly unknownBlockTypes: string[];
    }
  | { readonly ok: false; readonly reason: 'incomplete' | 'malformed_tool_input'; readonly detail: string };

type Slot =
  | { kind: 'text'; text: string; stopped: boolean }
  | { kind: 'tool_use'; id: string; name: string; json: string; stopped: boolean }
  | { kind: 'other'; type: string; stopped: boolean };

export class StreamAccumulator {
  readonly #slots = new Map<number, Slot>();
  readonly #usage: AccumulatedUsage = { inputTokens: 0, outputTokens: 0, cacheCreationInputTokens: 0, cacheReadInputTokens: 0 };
  #model = '';
  #stopReason: string | null = null;
  #sawMessageStop = false;
  #skipped = 0;

  /** `onText(blockIndex, text)` is called for every non-empty text delta, in stream order. */
  constructor(private readonly onText: (blockIndex: number, text: string) => void = () => {}) {}

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
        const block = (event.content_block ?? {}) as Record<string, unknown>;
        if (block.type === 'text') {
          const initial = typeof block.text === 'string' ? block.text : '';
          this.#slots.set(index, { kind: 'text', text: initial, stopped: false });
          if (initial) this.onText(index, initial);
        } else if (block.type === 'tool_use') {
          const input = block.input;
          // The start normally carries `{}` and the input follows as input_json_delta.
          const initial = input && typeof input === 'object' && Object.keys(input).length > 0 ? JSON.stringify(input) : '';
          this.#slots.set(index, { kind: 'tool_use', id: String(block.id ?? ''), name: String(block.name ?? ''), json: initial, stopped: false });
        } else {
          this.#slots.set(index, { kind: 'other', type: String(block.type ?? 'unknown'), stopped: false });
        }
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
        if (slot.kind === 'text' && delta.type === 'text_delta' && typeof delta.text === 'string') {
          slot.text += delta.text;
          if (delta.text) this.onText(index, delta.text);
        } else if (slot.kind === 'tool_use' && delta.type === 'input_json_delta' && typeof delta.partial_json === 'string') {
          slot.json += delta.partial_json;
        }
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

  finish(): AccumulatorResult {
    if (this.#stopReason === null && !this.#sawMessageStop) {
      return { ok: false, reason: 'incomplete', detail: 'the stream ended before the response was complete (no stop reason)' };
    }
    const content: AccumulatedBlock[] = [];
    const unknownBlockTypes: string[] = [];
    let droppedToolUses = 0;
    for (const [, slot] of [...this.#slots.entries()].sort(([a], [b]) => a - b)) {
      if (slot.kind === 'text') {
        if (slot.text !== '') content.push({ type: 'text', text: slot.text });
      } else if (slot.kind === 'tool_use') {
        if (!slot.stopped) {
          droppedToolUses++;
          continue;
        }
        const json = slot.json === '' ? '{}' : slot.json;
        let value: unknown;
        try {
          value = JSON.parse(json);
        } catch (err) {
          return { ok: false, reason: 'malformed_tool_input', detail: `tool_use ${slot.name} (${slot.id}) input is not valid JSON: ${(err as Error).message}` };
        }
        if (typeof value !== 'object' || value === null || Array.isArray(value)) {
          return { ok: false, reason: 'malformed_tool_input', detail: `tool_use ${slot.name} (${slot.id}) input is not a JSON object` };
        }
        content.push({ type: 'tool_use', id: slot.id, name: slot.name, inputJson: JSON.stringify(value) });
      } else {
        unknownBlockTypes.push(slot.type);
      }
    }
    const { stopReason, inferred } = mapStopReason(this.#stopReason, content.some((b) => b.type === 'tool_use'));
    return {
      ok: true,
      content,
      stopReason,
      rawStopReason: this.#stopReason,
      stopReasonInferred: inferred,
      usage: { ...this.#usage },
      model: this.#model,
      droppedToolUses,
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
    if (!usage) return;
    const take = (field: string): number | undefined => {
      const v = usage[field];
      return typeof v === 'number' && Number.isFinite(v) && v >= 0 ? v : undefined;
    };
    this.#usage.inputTokens = take('input_tokens') ?? this.#usage.inputTokens;
    this.#usage.outputTokens = take('output_tokens') ?? this.#usage.outputTokens;
    this.#usage.cacheCreationInputTokens = take('cache_creation_input_tokens') ?? this.#usage.cacheCreationInputTokens;
    this.#usage.cacheReadInputTokens = take('cache_read_input_tokens') ?? this.#usage.cacheReadInputTokens;
  }
}
