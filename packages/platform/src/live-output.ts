/**
 * Live output of one unit of work (a model request's token deltas, a tool call's output) to the
 * conversation's notification stream: ephemeral events after the durable event `sequence`
 * (NotificationStreams.appendEphemeral). The one set of rules the llm-gateway and the tool-runner share
 * (order and batching, rate, size, refused and failed appends): docs/transports.md, "Live output".
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
  /** Resolves once everything pushed so far is appended or dropped, without waiting out the pause; never throws. */
  flush(): Promise<void>;
  /** Flushes, then ignores later pushes; never throws. */
  close(): Promise<void>;
  /** Appends made (after merging). */
  readonly appended: number;
}

export const DEFAULT_LIVE_OUTPUT_WAIT_FOR_DURABLE_MS = 2000;
/** While a piece waits for its durable event: how often the stream is asked again, ms. */
const POLL_MS = 10;

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/**
 * Starts the live output of one unit. Text pushed while an append is in flight (or while the pause runs)
 * merges into the next append when its tag is the same as the last pending one's, so a fast producer costs
 * at most one round trip in flight. A refused append is stale only when the stream's last durable event is
 * strictly later than `sequence`; otherwise the piece waits for its durable event, `waitForDurableMs` in
 * total per unit. Of the two former copies this keeps the runner's test (the gateway's `>=` dropped deltas
 * when the durable event landed between the refusal and the check) and the gateway's bound (the runner
 * waited without limit, holding the text until the call ended). Best effort: the durable result is the truth.
 */
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
