/**
 * Live output of one unit of work (a model request's token deltas, a tool call's output) to
 * the conversation's notification stream: ephemeral events after the durable event
 * `sequence` (NotificationStreams.appendEphemeral). The one set of rules the llm-gateway and
 * the tool-runner share (they had one copy each, with different rules for the same cases):
 *
 * - **Order and batching.** Appends run one at a time, in push order. Text pushed while an
 *   append is in flight (or while the interval below runs) is merged into the next append when
 *   its tag is the same as the last pending one's (`sameTag`; e.g. the same block and kind of
 *   delta: never thinking with text). So a fast producer costs at most one round trip in flight.
 * - **Rate.** At most one append per `minIntervalMs` (0, the default: no pause). The first
 *   append goes at once (the runner's former streamer waited one interval before its first);
 *   `flush()`/`close()` skip the pause.
 * - **Size.** At most `maxChars` characters per unit (default unlimited); the rest is cut.
 * - **A refused append** (`null`): when the stream's last durable event is later than
 *   `sequence` the conversation has moved on, and this and every later piece is dropped
 *   (stale). When it is not later, our durable event is not in the stream yet (the
 *   conversation's outbox relay races the job): the piece waits for it, polling every 10 ms,
 *   `waitForDurableMs` in total per unit (default 2000), then everything is dropped. Of the two
 *   former copies this keeps the runner's test (strictly later = stale; the gateway's `>=`
 *   dropped deltas when the durable event landed between the refusal and the check) and the
 *   gateway's bound (the runner waited without limit, holding the text until the call ended).
 * - **Errors.** A failed append is reported to `onError` and its text dropped; later pieces are
 *   still tried. Live output is best effort: the durable result is the truth.
 * - **End.** `flush()` resolves once everything pushed so far is appended or dropped;
 *   `close()` does the same and ignores pushes after it. Neither throws.
 */
import { create, type MessageInitShape } from '@bufbuild/protobuf';
import { ConversationEventSchema } from '@bedrock/contracts';
import type { NotificationStreams } from './interfaces.ts';

export interface LiveOutputOptions<T> {
  readonly streams: NotificationStreams;
  readonly conversationId: string;
  /** The durable event the output follows (the job's notify_sequence). */
  readonly sequence: bigint;
  /** The event carrying one append: its text and the tag it was pushed with. */
  readonly kind: (text: string, tag: T) => MessageInitShape<typeof ConversationEventSchema>['kind'];
  /** Whether text of `a` and `b` may share an append. Default `Object.is`. */
  readonly sameTag?: (a: T, b: T) => boolean;
  /** Minimum time between appends, ms. Default 0. */
  readonly minIntervalMs?: number;
  /** Characters appended at most; later text is cut. Default unlimited. */
  readonly maxChars?: number;
  /** How long the output waits in total for its durable event to reach the stream, ms. Default 2000. */
  readonly waitForDurableMs?: number;
  /** An append failed; its text is dropped and the unit goes on. */
  readonly onError?: (err: unknown) => void;
  /** Called after each append landed (latency measurements). */
  readonly onAppended?: (text: string, tag: T) => void;
}

export interface LiveOutput<T> {
  /** Queues text; never throws, never blocks the producer. */
  push(text: string, tag: T): void;
  /** Resolves once everything pushed so far is appended or dropped. */
  flush(): Promise<void>;
  /** Flushes, then ignores later pushes. */
  close(): Promise<void>;
  /** Appends made (after merging). */
  readonly appended: number;
}

export const DEFAULT_LIVE_OUTPUT_WAIT_FOR_DURABLE_MS = 2000;
const POLL_MS = 10;

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

export function createLiveOutput<T>(options: LiveOutputOptions<T>): LiveOutput<T> {
  const sameTag = options.sameTag ?? Object.is;
  const minIntervalMs = Math.max(0, options.minIntervalMs ?? 0);
  const maxChars = options.maxChars ?? Infinity;
  const maxWaitMs = options.waitForDurableMs ?? DEFAULT_LIVE_OUTPUT_WAIT_FOR_DURABLE_MS;
  const pending: Array<{ text: string; tag: T }> = [];
  let running: Promise<void> = Promise.resolve();
  let draining = false;
  let stale = false;
  let closed = false;
  let flushing = 0;
  let accepted = 0;
  let appended = 0;
  let waitedMs = 0;
  let lastAppendAt = -Infinity;
  // Cuts the pause between appends short (flush/close).
  let wake: (() => void) | undefined;

  function pause(ms: number): Promise<void> {
    return new Promise<void>((resolve) => {
      const timer = setTimeout(done, ms);
      function done() {
        clearTimeout(timer);
        wake = undefined;
        resolve();
      }
      wake = done;
    });
  }

  async function drain(): Promise<void> {
    while (pending.length > 0 && !stale) {
      const wait = flushing > 0 ? 0 : lastAppendAt + minIntervalMs - performance.now();
      // The head stays pending during the pause, so pushes still merge into it.
      if (wait > 0) await pause(wait);
      // Taken out while in flight, so push() cannot merge text into an append already sent.
      const next = pending.shift()!;
      try {
        const position = await options.streams.appendEphemeral(
          create(ConversationEventSchema, {
            conversationId: options.conversationId,
            sequence: options.sequence,
            kind: options.kind(next.text, next.tag),
          }),
        );
        if (position !== null) {
          appended++;
          lastAppendAt = performance.now();
          options.onAppended?.(next.text, next.tag);
          continue;
        }
        const last = await options.streams.last(options.conversationId);
        if (last.sequence > options.sequence || waitedMs >= maxWaitMs) {
          stale = true;
          break;
        }
        pending.unshift(next);
        await sleep(POLL_MS);
        waitedMs += POLL_MS;
      } catch (err) {
        options.onError?.(err);
      }
    }
    if (stale) pending.length = 0;
    // Cleared in the same tick as the emptiness check, so a push right after starts a new drain.
    draining = false;
  }

  const output: LiveOutput<T> = {
    push(text, tag) {
      if (closed || stale || accepted >= maxChars || text === '') return;
      const room = maxChars - accepted;
      const piece = text.length > room ? text.slice(0, room) : text;
      accepted += piece.length;
      const last = pending[pending.length - 1];
      if (last && sameTag(last.tag, tag)) last.text += piece;
      else pending.push({ text: piece, tag });
      if (!draining) {
        draining = true;
        running = drain();
      }
    },
    async flush() {
      flushing++;
      try {
        wake?.();
        while (draining) await running;
      } finally {
        flushing--;
      }
    },
    async close() {
      closed = true;
      await output.flush();
    },
    get appended() {
      return appended;
    },
  };
  return output;
}
