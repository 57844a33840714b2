/**
 * Live tool output to the conversation's notification stream: ephemeral ToolOutput events
 * after the durable event `notifySequence`, throttled (one append per `flushMs` at most),
 * bounded in total, best effort (a failed append is dropped; the tool result is the truth).
 */
import { create } from '@bufbuild/protobuf';
import { ConversationEventSchema } from '@bedrock/contracts';
import type { NotificationStreams } from '@bedrock/platform';

export interface OutputStreamerOptions {
  readonly streams: NotificationStreams;
  readonly conversationId: string;
  readonly toolUseId: string;
  readonly notifySequence: bigint;
  /** Minimum time between appends, ms. */
  readonly flushMs: number;
  /** Characters streamed at most; later output only reaches the final result. */
  readonly maxChars: number;
  readonly onError?: (err: unknown) => void;
}

export interface OutputStreamer {
  push(text: string): void;
  /** Flushes what is buffered and stops. */
  close(): Promise<void>;
}

export function createOutputStreamer(options: OutputStreamerOptions): OutputStreamer {
  let buffer = '';
  let sent = 0;
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  let chain: Promise<void> = Promise.resolve();

  const flush = (): void => {
    timer = undefined;
    if (buffer === '' || stopped) return;
    const text = buffer;
    buffer = '';
    // Appends go one at a time so the stream keeps the output's order.
    chain = chain.then(async () => {
      if (stopped) return;
      try {
        const position = await options.streams.appendEphemeral(
          create(ConversationEventSchema, {
            conversationId: options.conversationId,
            sequence: options.notifySequence,
            kind: { case: 'toolOutput', value: { toolUseId: options.toolUseId, text } },
          }),
        );
        if (position === null) {
          // Refused: either the conversation moved on (a later durable event), so stop, or
          // its durable event is not in the stream yet (the job outran the notification),
          // so keep the text for the next flush.
          const last = await options.streams.last(options.conversationId);
          if (last.sequence > options.notifySequence) stopped = true;
          else {
            buffer = text + buffer;
            timer ??= setTimeout(flush, options.flushMs);
          }
        }
      } catch (err) {
        options.onError?.(err);
      }
    });
  };

  return {
    push(text) {
      if (stopped || sent >= options.maxChars) return;
      const room = options.maxChars - sent;
      const piece = text.length > room ? text.slice(0, room) : text;
      sent += piece.length;
      buffer += piece;
      timer ??= setTimeout(flush, options.flushMs);
    },
    async close() {
      clearTimeout(timer);
      flush();
      await chain;
      stopped = true;
    },
  };
}
