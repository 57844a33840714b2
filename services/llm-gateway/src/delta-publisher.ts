/**
 * Publishes a request's text and thinking deltas to the conversation's notification stream,
 * in order and complete. Appends run one at a time (order); deltas that arrive while an
 * append is in flight are merged into the next one when they belong to the same block and are
 * of the same kind (never text with thinking), so a fast model costs at most one Redis round
 * trip in flight per request instead of one per token.
 */
import { create } from '@bufbuild/protobuf';
import { ConversationEventSchema, TokenDeltaKind } from '@bedrock/contracts';
import type { NotificationStreams } from '@bedrock/platform';

export interface DeltaPublisher {
  /** Queues a delta (TEXT unless told); never throws, never blocks the stream. */
  push(blockIndex: number, text: string, kind?: TokenDeltaKind): void;
  /** Resolves once every delta pushed so far is appended (or dropped after an error). */
  flush(): Promise<void>;
  /** Appends made (after merging). */
  readonly appended: number;
}

export interface DeltaPublisherOptions {
  readonly streams: NotificationStreams;
  readonly conversationId: string;
  /** The durable event the deltas follow (the job's notify_sequence). */
  readonly sequence: bigint;
  readonly requestId: string;
  /** An append failed; the deltas are ephemeral, so they are dropped and the request goes on. */
  readonly onError?: (err: unknown) => void;
  /** Called after each append landed, for latency measurements. */
  readonly onAppended?: (blockIndex: number, text: string, kind: TokenDeltaKind) => void;
  /**
   * The durable event a delta follows may not be in the stream yet (the conversation's
   * outbox relay races the job); a delta waits for it this long, ms. Default 2000.
   */
  readonly waitForDurableMs?: number;
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

export function createDeltaPublisher(options: DeltaPublisherOptions): DeltaPublisher {
  const pending: Array<{ blockIndex: number; text: string; kind: TokenDeltaKind }> = [];
  let running: Promise<void> = Promise.resolve();
  let draining = false;
  let stale = false;
  let appended = 0;

  let waitedMs = 0;
  const maxWaitMs = options.waitForDurableMs ?? 2000;

  async function drain(): Promise<void> {
    while (pending.length > 0) {
      // Taken out while in flight, so push() cannot merge text into an append already sent.
      const next = pending.shift()!;
      if (stale) continue;
      try {
        const position = await options.streams.appendEphemeral(
          create(ConversationEventSchema, {
            conversationId: options.conversationId,
            sequence: options.sequence,
            kind: { case: 'tokenDelta', value: { requestId: options.requestId, blockIndex: next.blockIndex, text: next.text, kind: next.kind } },
          }),
        );
        if (position !== null) {
          appended++;
          options.onAppended?.(next.blockIndex, next.text, next.kind);
          continue;
        }
        // null: either a later durable event exists (the conversation moved on: this and every
        // later delta is stale) or ours is not appended yet (wait a little, keeping the order).
        const last = await options.streams.last(options.conversationId);
        if (last.sequence >= options.sequence || waitedMs >= maxWaitMs) {
          stale = true;
          continue;
        }
        pending.unshift(next);
        await sleep(10);
        waitedMs += 10;
      } catch (err) {
        options.onError?.(err);
      }
    }
    // Cleared in the same tick as the emptiness check, so a push right after starts a new drain.
    draining = false;
  }

  return {
    push(blockIndex, text, kind = TokenDeltaKind.TEXT) {
      const last = pending[pending.length - 1];
      if (last && last.blockIndex === blockIndex && last.kind === kind) last.text += text;
      else pending.push({ blockIndex, text, kind });
      if (!draining) {
        draining = true;
        running = drain();
      }
    },
    async flush() {
      while (draining) await running;
    },
    get appended() {
      return appended;
    },
  };
}
