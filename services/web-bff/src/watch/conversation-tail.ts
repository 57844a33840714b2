/**
 * The live tail of one conversation's notification stream, shared by its watchers in this
 * process: it follows the stream (`NotificationStreams.follow`) and keeps recent events in a
 * bounded buffer, each response encoded once ({@link SharedEvent}). Watchers inside the buffer
 * are served from memory and woken when it grows.
 */
import type { ConversationEvent } from '@bedrock/contracts';
import { comparePositions, firstAfter, type NotificationStreams, type StreamFollow, type StreamPosition } from '@bedrock/platform';
import { SharedEvent } from './shared-response.ts';

export class BufferedEvent extends SharedEvent {
  constructor(
    event: ConversationEvent,
    readonly position: StreamPosition,
    /** When this process read it from the stream, ms since epoch. */
    readonly receivedAt: number,
  ) {
    super(event);
  }
}

/** Something waiting for the buffer to grow (a watcher). */
export interface TailWaiter {
  wake(): void;
}

/**
 * A caught-up watcher that takes new events pushed to it as they are read (the binary gRPC
 * path): the tail writes them itself, synchronously, as one chunk of gRPC frames built once
 * for every such watcher at the same position, so a delivery costs one stream write and no
 * promise, generator step or copy. The tail drops a sink (and wakes it, so that its watch
 * loop takes over) when the sink is not exactly at the tail's previous head, when an event
 * needs the loop (a gap in the durable sequence, `deleted`), or when a write is refused
 * (back-pressure: the stream's buffer is full).
 */
export interface LiveSink extends TailWaiter {
  /** The last position this watcher was sent; advanced by the tail on each delivery. */
  after: StreamPosition;
  /** Writes whole gRPC frames; false when the stream's buffer is full or the stream is gone. */
  deliver(chunk: Uint8Array): boolean;
}

/**
 * Largest chunk pushed in one write, bytes. A burst beyond it (a resumed stream catching up, a
 * flood of large deltas) goes through the watchers' own loops instead, one event per write,
 * each checked against the lag limit, and a slow client's stall is timed per event.
 */
const PUSH_MAX_BYTES = 64 * 1024;

/** The events' gRPC frames as one chunk, or undefined past PUSH_MAX_BYTES. */
function concatFrames(entries: readonly BufferedEvent[]): Uint8Array | undefined {
  if (entries.length === 1) {
    const frame = entries[0]!.grpcFrame();
    return frame.length <= PUSH_MAX_BYTES ? frame : undefined;
  }
  const frames = entries.map((e) => e.grpcFrame());
  let bytes = 0;
  for (const f of frames) bytes += f.length;
  return bytes <= PUSH_MAX_BYTES ? Buffer.concat(frames, bytes) : undefined;
}

export interface TailOptions {
  readonly conversationId: string;
  readonly streams: NotificationStreams;
  /** Events kept at most. */
  readonly capacity: number;
  /** Events older than this are dropped from the buffer, ms. */
  readonly maxAgeMs: number;
  readonly onError: (err: unknown) => void;
  readonly now: () => number;
}

const MAX_BACKOFF_MS = 5000;

export class ConversationTail {
  /** Watchers holding this tail. */
  refs = 0;
  private entries: BufferedEvent[] = [];
  /** Every event strictly after `base` up to `head` is in `entries` (once `ready`). */
  private base: StreamPosition = { sequence: 0n, deltaIndex: 0 };
  private head: StreamPosition = { sequence: 0n, deltaIndex: 0 };
  private ready = false;
  private stopped = false;
  private follow: StreamFollow | undefined;
  private readonly waiters = new Set<TailWaiter>();
  private readonly sinks = new Set<LiveSink>();

  constructor(private readonly options: TailOptions) {
    void this.start(0);
  }

  get conversationId(): string {
    return this.options.conversationId;
  }

  /** True when every event after `after` that the stream holds is in the buffer or will be appended to it. */
  covers(after: StreamPosition): boolean {
    return this.ready && comparePositions(after, this.base) >= 0;
  }

  /** Buffered events strictly after `after`, at most `limit`; only meaningful when `covers(after)`. */
  eventsAfter(after: StreamPosition, limit: number): BufferedEvent[] {
    const { entries } = this;
    const lo = firstAfter(entries, after);
    return lo === entries.length ? [] : entries.slice(lo, lo + limit);
  }

  /** The last position this tail has read. */
  get headPosition(): StreamPosition {
    return this.head;
  }

  /** Whether `position` is the last one this tail has read. */
  isHead(position: StreamPosition): boolean {
    return comparePositions(position, this.head) === 0;
  }

  /** `waiter.wake()` is called once when the buffer grows (or the tail becomes ready), unless removed first. */
  addWaiter(waiter: TailWaiter): void {
    this.waiters.add(waiter);
  }

  removeWaiter(waiter: TailWaiter): void {
    this.waiters.delete(waiter);
  }

  /** Events read from now on are pushed to `sink` (see {@link LiveSink}) until it is removed or dropped. */
  addSink(sink: LiveSink): void {
    this.sinks.add(sink);
  }

  removeSink(sink: LiveSink): void {
    this.sinks.delete(sink);
  }

  /** Buffered events (for stats). */
  get size(): number {
    return this.entries.length;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.follow?.stop();
    this.wake();
    this.dropSinks();
  }

  private dropSinks(): void {
    if (this.sinks.size === 0) return;
    const sinks = [...this.sinks];
    this.sinks.clear();
    for (const sink of sinks) sink.wake();
  }

  /** Pushes `added` (just appended after `previous`) to every sink at `previous`, as one chunk built once. */
  private push(previous: StreamPosition, added: readonly BufferedEvent[]): void {
    // An event its watch loop must handle itself: every sink hands over to its loop.
    let durable = previous.sequence;
    for (const entry of added) {
      if (entry.event.kind.case === 'deleted') return this.dropSinks();
      if (entry.position.deltaIndex !== 0) continue;
      if (entry.position.sequence > durable + 1n) return this.dropSinks();
      durable = entry.position.sequence;
    }
    const chunk = concatFrames(added);
    if (!chunk) return this.dropSinks();
    const head = this.head;
    for (const sink of this.sinks) {
      if (comparePositions(sink.after, previous) !== 0) {
        this.sinks.delete(sink);
        sink.wake();
        continue;
      }
      const accepted = sink.deliver(chunk);
      sink.after = head;
      if (!accepted) {
        this.sinks.delete(sink);
        sink.wake();
      }
    }
  }

  private wake(): void {
    if (this.waiters.size === 0) return;
    const waiters = [...this.waiters];
    this.waiters.clear();
    for (const waiter of waiters) waiter.wake();
  }

  private async start(failures: number): Promise<void> {
    const { streams, conversationId, onError } = this.options;
    if (this.stopped) return;
    try {
      this.head = this.base = await streams.last(conversationId);
    } catch (err) {
      onError(err);
      setTimeout(() => void this.start(failures + 1), Math.min(100 * 2 ** (failures + 1), MAX_BACKOFF_MS)).unref();
      return;
    }
    if (this.stopped) return;
    this.ready = true;
    this.follow = streams.follow(conversationId, this.head, (events) => this.append(events));
    this.wake();
  }

  private append(events: ConversationEvent[]): void {
    if (this.stopped) return;
    const at = this.options.now();
    const previous = this.head;
    const from = this.entries.length;
    for (const event of events) {
      const position = { sequence: event.sequence, deltaIndex: event.deltaIndex };
      this.entries.push(new BufferedEvent(event, position, at));
      this.head = position;
    }
    if (this.sinks.size > 0 && this.entries.length > from) this.push(previous, this.entries.slice(from));
    this.evict(at);
    this.wake();
  }

  private evict(now: number): void {
    const { capacity, maxAgeMs } = this.options;
    const { entries } = this;
    let drop = Math.max(0, entries.length - capacity);
    while (drop < entries.length && entries[drop]!.receivedAt < now - maxAgeMs) drop++;
    if (drop === 0) return;
    this.base = entries[drop - 1]!.position;
    this.entries = entries.slice(drop);
  }
}
