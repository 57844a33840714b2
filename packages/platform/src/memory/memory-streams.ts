/**
 * In-process notification streams with the semantics of the Redis Streams ones (see
 * ../redis/redis-streams.ts): durable events at (sequence, 0), ephemeral events after the
 * last durable one, reads strictly after a position, blocking reads woken by an append or
 * an abort, trimming to a maximum length and expiry after a quiet period.
 */
import { create, fromBinary, fromJsonString, toBinary } from '@bufbuild/protobuf';
import { ConversationEventSchema } from '@bedrock/contracts';
import type { ConversationEvent } from '@bedrock/contracts';
import { STREAM_START } from '../interfaces.ts';
import type { EncodedEvent, NotificationStreams, StreamPosition } from '../interfaces.ts';
import { DEFAULT_READ_LIMIT, DEFAULT_STREAM_MAX_LEN, DEFAULT_STREAM_TTL_MS } from '../defaults.ts';
import { firstAfter } from '../stream-position.ts';

export interface MemoryStreamsOptions {
  /** Entries kept per stream; older ones are dropped. Default 10 000. */
  readonly maxLen?: number;
  /** A stream is forgotten this long after its last append, ms. Default 24 h. */
  readonly ttlMs?: number;
}

interface Entry {
  readonly position: StreamPosition;
  readonly bytes: Uint8Array;
}

interface Stream {
  readonly entries: Entry[];
  /** The last position ever appended; trimming does not move it back (as in Redis). */
  top: StreamPosition;
  touchedAt: number;
  readonly waiters: Set<() => void>;
}

/** Longest block of one read of a follow, ms (re-issued after). */
const FOLLOW_BLOCK_MS = 30_000;

/** How often expired streams are swept, at most: once a minute. */
const SWEEP_INTERVAL_MS = 60_000;

export function createMemoryStreams(options: MemoryStreamsOptions = {}): NotificationStreams {
  const maxLen = options.maxLen ?? DEFAULT_STREAM_MAX_LEN;
  const ttlMs = options.ttlMs ?? DEFAULT_STREAM_TTL_MS;
  const streams = new Map<string, Stream>();
  let lastSweep = Date.now();
  let closed = false;

  function live(conversationId: string, now: number): Stream | undefined {
    const stream = streams.get(conversationId);
    if (stream && stream.touchedAt + ttlMs <= now && stream.waiters.size === 0) {
      streams.delete(conversationId);
      return undefined;
    }
    return stream;
  }

  function sweep(now: number): void {
    if (now - lastSweep < SWEEP_INTERVAL_MS) return;
    lastSweep = now;
    for (const id of [...streams.keys()]) live(id, now);
  }

  function append(conversationId: string, event: ConversationEvent, position: StreamPosition): void {
    const now = Date.now();
    sweep(now);
    let stream = live(conversationId, now);
    if (!stream) {
      stream = { entries: [], top: STREAM_START, touchedAt: now, waiters: new Set() };
      streams.set(conversationId, stream);
    }
    const stored = create(ConversationEventSchema, {
      ...event,
      sequence: position.sequence,
      deltaIndex: position.deltaIndex,
    });
    stream.entries.push({ position, bytes: toBinary(ConversationEventSchema, stored) });
    if (stream.entries.length > maxLen) stream.entries.splice(0, stream.entries.length - maxLen);
    stream.top = position;
    stream.touchedAt = now;
    const waiters = [...stream.waiters];
    stream.waiters.clear();
    for (const wake of waiters) wake();
  }

  function topOf(conversationId: string): StreamPosition {
    return live(conversationId, Date.now())?.top ?? STREAM_START;
  }

  function collect(conversationId: string, after: StreamPosition, limit: number): ConversationEvent[] {
    const stream = live(conversationId, Date.now());
    if (!stream) return [];
    const { entries } = stream;
    const lo = firstAfter(entries, after);
    return entries.slice(lo, lo + limit).map((entry) => fromBinary(ConversationEventSchema, entry.bytes));
  }

  function appendDurable(event: ConversationEvent): boolean {
    const top = topOf(event.conversationId);
    // Sequence 0 is STREAM_START, which no event occupies.
    if (event.sequence < 1n || event.sequence <= top.sequence) return false;
    append(event.conversationId, event, { sequence: event.sequence, deltaIndex: 0 });
    return true;
  }

  const api: NotificationStreams = {
    async appendDurable(event: ConversationEvent): Promise<boolean> {
      if (closed) throw new Error('notification streams are closed');
      return appendDurable(event);
    },

    async appendDurableMany(events: readonly (ConversationEvent | EncodedEvent)[]): Promise<boolean[]> {
      if (closed) throw new Error('notification streams are closed');
      const conversationId = events[0]?.conversationId;
      for (const event of events) {
        if (event.conversationId !== conversationId) {
          throw new Error(`appendDurableMany: events of ${conversationId} and ${event.conversationId} in one call`);
        }
      }
      return events.map((event) => appendDurable('json' in event ? fromJsonString(ConversationEventSchema, event.json) : event));
    },

    async appendEphemeral(event: ConversationEvent): Promise<StreamPosition | null> {
      if (closed) throw new Error('notification streams are closed');
      const top = topOf(event.conversationId);
      // Later durable event: the delta is stale. Earlier one: its durable event is not in the
      // stream yet, and a delta placed now would take (sequence, 0) or break the order.
      if (event.sequence !== top.sequence) return null;
      const position = { sequence: top.sequence, deltaIndex: top.deltaIndex + 1 };
      append(event.conversationId, event, position);
      return position;
    },

    async read(conversationId, after, readOptions = {}): Promise<ConversationEvent[]> {
      const { blockMs = 0, signal } = readOptions;
      const limit = Math.max(1, Math.floor(readOptions.limit ?? DEFAULT_READ_LIMIT));
      if (signal?.aborted || closed) return [];
      const found = collect(conversationId, after, limit);
      if (found.length > 0 || blockMs <= 0) return found;
      let stream = streams.get(conversationId);
      if (!stream) {
        stream = { entries: [], top: STREAM_START, touchedAt: Date.now(), waiters: new Set() };
        streams.set(conversationId, stream);
      }
      const waiters = stream.waiters;
      const woken = await new Promise<boolean>((resolve) => {
        const done = (appended: boolean) => {
          clearTimeout(timer);
          waiters.delete(wake);
          signal?.removeEventListener('abort', onAbort);
          resolve(appended);
        };
        const wake = () => done(true);
        const onAbort = () => done(false);
        const timer = setTimeout(() => done(false), blockMs);
        waiters.add(wake);
        signal?.addEventListener('abort', onAbort, { once: true });
      });
      return woken && !closed ? collect(conversationId, after, limit) : [];
    },

    async last(conversationId: string): Promise<StreamPosition> {
      return topOf(conversationId);
    },

    follow(conversationId, after, onEvents) {
      if (closed) throw new Error('notification streams are closed');
      // In process there is no connection to save: one blocking read loop per follow.
      const controller = new AbortController();
      const { signal } = controller;
      void (async () => {
        let position = after;
        while (!signal.aborted && !closed) {
          const events = await api.read(conversationId, position, { blockMs: FOLLOW_BLOCK_MS, signal });
          if (signal.aborted || events.length === 0) continue;
          const lastEvent = events[events.length - 1]!;
          position = { sequence: lastEvent.sequence, deltaIndex: lastEvent.deltaIndex };
          onEvents(events);
        }
      })();
      return { stop: () => controller.abort() };
    },

    async delete(conversationId: string): Promise<void> {
      if (closed) throw new Error('notification streams are closed');
      const stream = streams.get(conversationId);
      if (!stream) return;
      // Blocked readers wait on, as on a stream not created yet (as XREAD on a deleted Redis key).
      if (stream.waiters.size === 0) streams.delete(conversationId);
      else streams.set(conversationId, { entries: [], top: STREAM_START, touchedAt: Date.now(), waiters: stream.waiters });
    },

    async close(): Promise<void> {
      closed = true;
      for (const stream of streams.values()) {
        const waiters = [...stream.waiters];
        stream.waiters.clear();
        for (const wake of waiters) wake();
      }
      streams.clear();
    },
  };
  return api;
}
