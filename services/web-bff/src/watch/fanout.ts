/**
 * The watch fan-out of one web-bff process: one {@link ConversationTail} per watched
 * conversation, created by its first watcher and stopped when its last one leaves. Each
 * watcher gets a `NotificationStreams` view whose `read` is served from the shared buffer
 * when its position is there, and from the stream store directly (non-blocking, one batch
 * at a time as the client pulls) when it is further behind, e.g. resuming after a long
 * disconnect. So a process holds one blocking read per watched conversation, whatever the
 * number of watchers, and memory per conversation is bounded by the buffer.
 *
 * Slow watchers: each watcher has a lag clock that starts when a read leaves it short of the
 * live head (more pending than one batch, or behind the buffer) and stops when it catches
 * up. A watcher still behind `maxLagMs` after its clock started — it reads slower than
 * events arrive — gets RESOURCE_EXHAUSTED from `read`, carrying the position it reached. A
 * fresh or resuming watcher starts with its clock stopped, so catching up after a cut-off
 * is possible whenever the client reads faster than events arrive.
 */
import { Code, ConnectError } from '@connectrpc/connect';
import type { ConversationEvent } from '@bedrock/contracts';
import type { NotificationStreams, StreamPosition } from '@bedrock/platform';
import { ConversationTail } from './conversation-tail.ts';

export interface FanoutOptions {
  readonly streams: NotificationStreams;
  /** Events buffered per conversation. */
  readonly bufferEvents: number;
  /** Cut-off for slow watchers, ms. */
  readonly maxLagMs: number;
  /** Length of one blocking read of a tail, ms. */
  readonly readBlockMs: number;
  /**
   * A tail whose last watcher left keeps reading this long, ms, so a client reconnecting
   * after a disconnect (or a cut-off) resumes from memory rather than from the stream store.
   */
  readonly lingerMs: number;
  readonly onError: (err: unknown) => void;
  readonly now?: () => number;
}

/** Response metadata (gRPC trailers / Connect error metadata) naming the resume position. */
export const RESUME_SEQUENCE_HEADER = 'bedrock-resume-sequence';
export const RESUME_DELTA_HEADER = 'bedrock-resume-delta-index';

/** A slow watcher's cut-off: RESOURCE_EXHAUSTED with the position it got to (the last event it was sent). */
export function watchLagError(after: StreamPosition, maxLagMs: number): ConnectError {
  const metadata = new Headers({ [RESUME_SEQUENCE_HEADER]: after.sequence.toString(), [RESUME_DELTA_HEADER]: String(after.deltaIndex) });
  return new ConnectError(
    `watch cut off: the client stayed behind the live stream for more than ${maxLagMs / 1000}s; ` +
      `resume with after_sequence=${after.sequence} after_delta_index=${after.deltaIndex}`,
    Code.ResourceExhausted,
    metadata,
  );
}

export interface WatcherStreams extends NotificationStreams {
  /**
   * Whether this watcher has been behind the live head for longer than the cut-off. Checked
   * by the writer before each event too, because a slow client can take long to drain one
   * batch and `read` only sees it between batches.
   */
  lagExceeded(): boolean;
  /** Leaves the fan-out; the view must not be used afterwards. */
  release(): void;
}

export interface FanoutStats {
  readonly conversations: number;
  readonly watchers: number;
  readonly bufferedEvents: number;
}

export interface Fanout {
  /** A stream view for one watcher of `conversationId`; `release()` it when the watch ends. */
  subscribe(conversationId: string): WatcherStreams;
  stats(): FanoutStats;
  close(): Promise<void>;
}

export function createFanout(options: FanoutOptions): Fanout {
  const { streams, maxLagMs } = options;
  const now = options.now ?? Date.now;
  const tails = new Map<string, ConversationTail>();
  const lingering = new Map<ConversationTail, NodeJS.Timeout>();
  let watchers = 0;

  function acquire(conversationId: string): ConversationTail {
    let tail = tails.get(conversationId);
    if (!tail) {
      tail = new ConversationTail({
        conversationId,
        streams,
        capacity: options.bufferEvents,
        maxAgeMs: maxLagMs,
        readBlockMs: options.readBlockMs,
        onError: options.onError,
        now,
      });
      tails.set(conversationId, tail);
    }
    const timer = lingering.get(tail);
    if (timer) {
      clearTimeout(timer);
      lingering.delete(tail);
    }
    tail.refs++;
    watchers++;
    return tail;
  }

  function release(conversationId: string, tail: ConversationTail): void {
    watchers--;
    if (--tail.refs > 0) return;
    const timer = setTimeout(() => {
      lingering.delete(tail);
      if (tail.refs > 0) return;
      tails.delete(conversationId);
      void tail.stop();
    }, options.lingerMs);
    timer.unref();
    lingering.set(tail, timer);
  }

  return {
    subscribe(conversationId) {
      const tail = acquire(conversationId);
      let released = false;
      /** Since when this watcher has been behind the shared buffer, ms; undefined while inside it. */
      let behindSince: number | undefined;

      async function read(
        id: string,
        after: StreamPosition,
        readOptions: { limit?: number; blockMs?: number; signal?: AbortSignal } = {},
      ): Promise<ConversationEvent[]> {
        if (id !== conversationId) throw new Error(`watcher of ${conversationId} asked for ${id}`);
        const { limit = 500, blockMs = 0, signal } = readOptions;
        const deadline = now() + blockMs;
        /** The watcher got events but not up to the live head: its lag clock runs. */
        const behind = (): void => {
          behindSince ??= now();
          if (now() - behindSince > maxLagMs) throw watchLagError(after, maxLagMs);
        };
        for (;;) {
          if (released || signal?.aborted) return [];
          if (tail.covers(after)) {
            const buffered = tail.eventsAfter(after, limit);
            if (buffered.length > 0) {
              if (tail.isHead(buffered.at(-1)!.position)) behindSince = undefined;
              else behind();
              return buffered.map((b) => b.event);
            }
          } else {
            behind();
            const direct = await streams.read(id, after, { limit, blockMs: 0, ...(signal ? { signal } : {}) });
            if (direct.length > 0) return direct;
          }
          // Nothing pending: caught up.
          behindSince = undefined;
          const remaining = deadline - now();
          if (remaining <= 0) return [];
          await tail.wait(remaining, signal);
        }
      }

      return {
        read,
        appendDurable: (event) => streams.appendDurable(event),
        appendDurableMany: (events) => streams.appendDurableMany(events),
        appendEphemeral: (event) => streams.appendEphemeral(event),
        last: (id) => streams.last(id),
        close: async () => undefined,
        lagExceeded: () => behindSince !== undefined && now() - behindSince > maxLagMs,
        release() {
          if (released) return;
          released = true;
          release(conversationId, tail);
        },
      };
    },

    stats() {
      let bufferedEvents = 0;
      for (const tail of tails.values()) bufferedEvents += tail.size;
      return { conversations: tails.size, watchers, bufferedEvents };
    },

    async close() {
      for (const timer of lingering.values()) clearTimeout(timer);
      lingering.clear();
      const all = [...tails.values()];
      tails.clear();
      await Promise.all(all.map((t) => t.stop()));
    },
  };
}
