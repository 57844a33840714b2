/**
 * One reader of one conversation's notification stream, shared by every watcher of that
 * conversation in this process. It keeps the recent events in a bounded buffer: watchers
 * whose position is inside the buffer are served from memory and woken when it grows, so
 * N watchers of a conversation cost one blocking stream read, not N.
 */
import type { ConversationEvent } from '@bedrock/contracts';
import { comparePositions, type NotificationStreams, type StreamPosition } from '@bedrock/platform';

export interface BufferedEvent {
  readonly event: ConversationEvent;
  readonly position: StreamPosition;
  /** When this process read it from the stream, ms since epoch. */
  readonly receivedAt: number;
}

export interface TailOptions {
  readonly conversationId: string;
  readonly streams: NotificationStreams;
  /** Events kept at most. */
  readonly capacity: number;
  /** Events older than this are dropped from the buffer, ms. */
  readonly maxAgeMs: number;
  /** Length of one blocking read, ms. */
  readonly readBlockMs: number;
  readonly onError: (err: unknown) => void;
  readonly now: () => number;
}

/** Events read per round. */
const READ_LIMIT = 500;
const MAX_BACKOFF_MS = 5000;

export class ConversationTail {
  /** Watchers holding this tail. */
  refs = 0;
  private entries: BufferedEvent[] = [];
  /** Every event strictly after `base` up to `head` is in `entries` (once `ready`). */
  private base: StreamPosition = { sequence: 0n, deltaIndex: 0 };
  private head: StreamPosition = { sequence: 0n, deltaIndex: 0 };
  private ready = false;
  private readonly waiters = new Set<() => void>();
  private readonly abort = new AbortController();
  private readonly done: Promise<void>;

  constructor(private readonly options: TailOptions) {
    this.done = this.run();
  }

  /** True when every event after `after` that the stream holds is in the buffer or will be appended to it. */
  covers(after: StreamPosition): boolean {
    return this.ready && comparePositions(after, this.base) >= 0;
  }

  /** Buffered events strictly after `after`, at most `limit`; only meaningful when `covers(after)`. */
  eventsAfter(after: StreamPosition, limit: number): BufferedEvent[] {
    const { entries } = this;
    let lo = 0;
    let hi = entries.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (comparePositions(entries[mid]!.position, after) <= 0) lo = mid + 1;
      else hi = mid;
    }
    return entries.slice(lo, lo + limit);
  }

  /** Whether `position` is the last one this tail has read. */
  isHead(position: StreamPosition): boolean {
    return comparePositions(position, this.head) === 0;
  }

  /** Resolves when the buffer grows (or the tail becomes ready), after `ms`, or on abort. */
  wait(ms: number, signal?: AbortSignal): Promise<void> {
    return new Promise<void>((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.waiters.delete(done);
        signal?.removeEventListener('abort', done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.waiters.add(done);
      signal?.addEventListener('abort', done, { once: true });
    });
  }

  /** Buffered events (for stats). */
  get size(): number {
    return this.entries.length;
  }

  async stop(): Promise<void> {
    this.abort.abort();
    this.wake();
    await this.done;
  }

  private wake(): void {
    for (const waiter of [...this.waiters]) waiter();
  }

  private async run(): Promise<void> {
    const { streams, conversationId, onError, now } = this.options;
    const signal = this.abort.signal;
    let failures = 0;
    const backoff = async () => {
      failures++;
      await sleep(Math.min(100 * 2 ** failures, MAX_BACKOFF_MS), signal);
    };
    while (!signal.aborted && !this.ready) {
      try {
        this.head = this.base = await streams.last(conversationId);
        this.ready = true;
        this.wake();
      } catch (err) {
        onError(err);
        await backoff();
      }
    }
    failures = 0;
    while (!signal.aborted) {
      let events: ConversationEvent[];
      try {
        events = await streams.read(conversationId, this.head, { limit: READ_LIMIT, blockMs: this.options.readBlockMs, signal });
      } catch (err) {
        if (signal.aborted) break;
        onError(err);
        await backoff();
        continue;
      }
      failures = 0;
      if (events.length === 0) {
        this.evict(now());
        continue;
      }
      const at = now();
      for (const event of events) {
        const position = { sequence: event.sequence, deltaIndex: event.deltaIndex };
        this.entries.push({ event, position, receivedAt: at });
        this.head = position;
      }
      this.evict(at);
      this.wake();
    }
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

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener('abort', done, { once: true });
  });
}
