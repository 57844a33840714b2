/**
 * The watch fan-out of one web-bff process: one {@link ConversationTail} per watched conversation,
 * created by its first watcher and stopped `lingerMs` after its last one leaves. Every tail follows
 * its stream through `NotificationStreams.follow`, so the process reads all watched conversations
 * over a few Redis connections, whatever their number or their watchers'. The watchers themselves
 * are served by ./watcher.ts.
 */
import { Code, ConnectError } from '@connectrpc/connect';
import type { NotificationStreams, StreamPosition } from '@bedrock/platform';
import { ConversationTail } from './conversation-tail.ts';
import { RESUME_DELTA_HEADER, RESUME_SEQUENCE_HEADER } from '../http/resume-headers.ts';

export interface FanoutOptions {
  readonly streams: NotificationStreams;
  /** Events buffered per conversation: what bounds a tail's memory. */
  readonly bufferEvents: number;
  /** Cut-off for slow watchers, ms. */
  readonly maxLagMs: number;
  /**
   * A tail whose last watcher left keeps reading this long, ms, so a client reconnecting
   * after a disconnect (or a cut-off) resumes from memory rather than from the stream store.
   */
  readonly lingerMs: number;
  /** Caught-up binary gRPC watchers get new events pushed by the tail (BEDROCK_WATCH_DELIVERY=push; default true). */
  readonly push?: boolean;
  readonly onError: (err: unknown) => void;
  readonly now?: () => number;
}

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

export interface FanoutStats {
  readonly conversations: number;
  readonly watchers: number;
  readonly bufferedEvents: number;
}

export interface Fanout {
  readonly streams: NotificationStreams;
  /** Whether caught-up binary gRPC watchers get events pushed (conversation-tail.ts, LiveSink). */
  readonly push: boolean;
  /** The tail of `conversationId` for one more watcher; `release` it when the watch ends. */
  acquire(conversationId: string): ConversationTail;
  release(tail: ConversationTail): void;
  stats(): FanoutStats;
  close(): Promise<void>;
}

export function createFanout(options: FanoutOptions): Fanout {
  const { streams } = options;
  const now = options.now ?? Date.now;
  const tails = new Map<string, ConversationTail>();
  const lingering = new Map<ConversationTail, NodeJS.Timeout>();
  let watchers = 0;

  return {
    streams,
    push: options.push ?? true,

    acquire(conversationId) {
      let tail = tails.get(conversationId);
      if (!tail) {
        tail = new ConversationTail({
          conversationId,
          streams,
          capacity: options.bufferEvents,
          maxAgeMs: options.maxLagMs,
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
    },

    release(tail) {
      watchers--;
      if (--tail.refs > 0) return;
      const timer = setTimeout(() => {
        lingering.delete(tail);
        if (tail.refs > 0) return;
        tails.delete(tail.conversationId);
        void tail.stop();
      }, options.lingerMs);
      timer.unref();
      lingering.set(tail, timer);
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
