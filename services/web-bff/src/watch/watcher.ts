/**
 * One WatchConversation stream from this process's fan-out: a shared snapshot unless resuming
 * (./snapshot-cache.ts), then the conversation's events from its shared tail (encoded once,
 * ./shared-response.ts) or, behind its buffer, from the stream store. Resumable with no gap or
 * duplicate among durable events; heartbeats when idle; a `deleted` event ends the stream.
 */
import { Code, ConnectError } from '@connectrpc/connect';
import { create } from '@bufbuild/protobuf';
import { ConversationEventSchema, RejectionSchema, type WatchConversationRequest } from '@bedrock/contracts';
import { comparePositions, type StreamPosition } from '@bedrock/platform';
import type { Logger } from '@bedrock/platform/server';
import { durableGap, type WatchSnapshot } from '@bedrock/platform/watch';
import type { OwnershipCache } from '../upstream/ownership-cache.ts';
import { BufferedEvent, type ConversationTail, type LiveSink, type TailWaiter } from './conversation-tail.ts';
import { watchLagError, type Fanout } from './fanout.ts';
import { SharedEvent } from './shared-response.ts';
import { toSharedSnapshot, type SharedSnapshot, type SnapshotCache } from './snapshot-cache.ts';
import type { StallWatchdog } from './stall-watchdog.ts';

/** Events handed to a watcher per round. */
const BATCH = 500;

export interface WatchDeps {
  readonly fanout: Fanout;
  readonly snapshots: SnapshotCache;
  readonly ownership: OwnershipCache;
  readonly watchdog: StallWatchdog;
  readonly logger: Logger;
  readonly heartbeatMs: number;
  readonly maxLagMs: number;
  readonly onWatchers?: (delta: number) => void;
  /** Watch streams one user may have open in this process at once (BEDROCK_WATCH_MAX_PER_USER). */
  readonly quota: WatchQuota;
  /** GetConversation as `user` (remembering ownership), forwarding trace headers; errors as the conversation service gave them. */
  fetchSnapshot(user: string, conversationId: string, requestHeader: Headers): Promise<WatchSnapshot>;
  /** Maps a conversation-service error for the client. */
  mapError(err: unknown, signal: AbortSignal): ConnectError;
  now?: () => number;
}

/**
 * Direct writes to the watcher's stream, for a protocol whose messages are the events' shared
 * gRPC frames (./grpc-watch.ts): a caught-up watcher then has new events pushed to it by its
 * tail (conversation-tail.ts, LiveSink) instead of waking its loop for each.
 */
export interface LiveWriter {
  /** Writes whole frames now; false when the stream's buffer is full (back-pressure) or the stream is gone. */
  write(chunk: Uint8Array): boolean;
  /** Resolves once what was written drained (or the call ended). */
  drained(): Promise<void>;
}

/** One watch call, whoever serves its protocol (connect, or ./grpc-watch.ts). */
export interface WatchCall {
  /** The authenticated caller. */
  readonly user: string;
  /** Aborted when the call ends: client gone, deadline, server shutdown (the reason is sent). */
  readonly signal: AbortSignal;
  /** The request headers (built when asked: only a snapshot fetch needs them, for trace headers). */
  requestHeader(): Headers;
  /** Ends the stream at the transport level (a client that stopped reading). */
  reset(): void;
}

/**
 * Open watch streams per user in this process, at most `maxPerUser` each (0: no limit). Per
 * replica: a watch holds this process's memory and sockets, which is what the limit protects,
 * and counting here costs nothing and cannot leak across a crash (docs/web-bff.md, "Watch streams").
 * A user's entry is deleted when their last watch ends, so the map holds only users watching now.
 */
export class WatchQuota {
  private readonly open = new Map<string, number>();
  constructor(readonly maxPerUser: number) {}

  /** Counts one more watch of `user`, or throws RESOURCE_EXHAUSTED `limit_reached` when they have the most. */
  take(user: string): void {
    const n = this.open.get(user) ?? 0;
    if (this.maxPerUser > 0 && n >= this.maxPerUser) {
      const message = `watch streams limit reached: you have ${n} watch streams open on this server (at most ${this.maxPerUser} per user); close some (browser tabs, bedrock watch) and watch again`;
      throw new ConnectError(message, Code.ResourceExhausted, undefined, [
        { desc: RejectionSchema, value: create(RejectionSchema, { code: 'limit_reached', message, limit: 'max_watch_streams' }) },
      ]);
    }
    this.open.set(user, n + 1);
  }

  give(user: string): void {
    const n = (this.open.get(user) ?? 1) - 1;
    if (n > 0) this.open.set(user, n);
    else this.open.delete(user);
  }

  /** Users with a watch open (for tests and stats). */
  get users(): number {
    return this.open.size;
  }

  of(user: string): number {
    return this.open.get(user) ?? 0;
  }
}

/**
 * Waits for the tail to grow, the heartbeat interval to pass, or the call to end. Per watcher this
 * one small object (position, lag clock, one refreshed heartbeat timer, itself as the abort
 * listener and tail waiter) is all it keeps besides what connect-node and HTTP/2 hold.
 */
class Watcher implements TailWaiter {
  heartbeatDue = false;
  private resolve: (() => void) | undefined;
  private readonly timer: NodeJS.Timeout;

  constructor(heartbeatMs: number) {
    this.timer = setTimeout(Watcher.onHeartbeat, heartbeatMs, this);
    this.timer.unref();
  }

  private static onHeartbeat(this: void, watcher: Watcher): void {
    watcher.heartbeatDue = true;
    watcher.wake();
  }

  wake(): void {
    const resolve = this.resolve;
    if (!resolve) return;
    this.resolve = undefined;
    resolve();
  }

  /** The abort listener. */
  handleEvent(): void {
    this.wake();
  }

  /** An event was written to the client: the heartbeat interval starts again. */
  delivered(): void {
    this.timer.refresh();
  }

  /**
   * Resolves on the first of: `heartbeatMs` pass without a delivery (`heartbeatDue`), abort,
   * or the tail hands the sink back to this loop (back-pressure, or an event the loop must handle).
   */
  async waitLive(tail: ConversationTail, sink: LiveSink): Promise<void> {
    this.heartbeatDue = false;
    this.timer.refresh();
    tail.addSink(sink);
    await new Promise<void>((resolve) => (this.resolve = resolve));
    tail.removeSink(sink);
  }

  /** Resolves on the first of: the tail grows, `heartbeatMs` pass (`heartbeatDue`), abort. */
  async wait(tail: ConversationTail): Promise<void> {
    this.heartbeatDue = false;
    this.timer.refresh();
    tail.addWaiter(this);
    await new Promise<void>((resolve) => (this.resolve = resolve));
    tail.removeWaiter(this);
  }

  stop(): void {
    clearTimeout(this.timer);
    this.wake();
  }
}

function heartbeat(conversationId: string, after: StreamPosition): SharedEvent {
  return new SharedEvent(
    create(ConversationEventSchema, {
      conversationId,
      sequence: after.sequence,
      deltaIndex: after.deltaIndex,
      kind: { case: 'heartbeat', value: {} },
    }),
  );
}

/**
 * The watch stream: yields `render(event)` for every response to send (the snapshot, events,
 * heartbeats); the caller writes it and asks for the next one once written. Counted against
 * the user's watch streams in this process from before the snapshot until it ends.
 */
export async function* serveWatch<T>(
  call: WatchCall,
  req: WatchConversationRequest,
  d: WatchDeps,
  render: (event: SharedEvent) => T,
  live?: LiveWriter,
): AsyncGenerator<T> {
  if (!req.conversationId.trim()) throw new ConnectError('conversation_id is required', Code.InvalidArgument);
  d.quota.take(call.user);
  try {
    yield* watchStream(call, req, d, render, live);
  } finally {
    d.quota.give(call.user);
  }
}

async function* watchStream<T>(
  call: WatchCall,
  req: WatchConversationRequest,
  d: WatchDeps,
  render: (event: SharedEvent) => T,
  live?: LiveWriter,
): AsyncGenerator<T> {
  const { user, signal } = call;
  const id = req.conversationId;
  const now = d.now ?? Date.now;
  const fresh = req.afterSequence === 0n && req.afterDeltaIndex === 0;
  const fetch = () => d.fetchSnapshot(user, id, call.requestHeader());
  let first: SharedSnapshot | undefined;
  // A resume skips the snapshot, so ownership is checked (once per user and conversation: it never changes).
  if (fresh || !d.ownership.has(user, id)) {
    try {
      const shared = await d.snapshots.get(user, id, fetch);
      if (fresh) first = shared;
    } catch (err) {
      throw d.mapError(err, signal);
    }
  }

  const tail = d.fanout.acquire(id);
  const watcher = new Watcher(d.heartbeatMs);
  const write = { writingSince: undefined as number | undefined, reset: () => call.reset() };
  const untrack = d.watchdog.track(write);
  d.onWatchers?.(1);
  signal.addEventListener('abort', watcher);
  let after: StreamPosition = { sequence: req.afterSequence, deltaIndex: req.afterDeltaIndex };
  /**
   * Since when this watcher has been short of the live head, ms; undefined while caught up.
   * Slow watchers: the lag clock starts when it is handed events but not up to the live head
   * (more pending than one batch, or behind the buffer) and stops when it catches up. One still
   * behind `maxLagMs` after its clock started (it reads slower than events arrive) gets
   * RESOURCE_EXHAUSTED carrying the position it reached, checked before every write because a
   * slow client can take long to drain one batch. A fresh or resuming watcher starts with its
   * clock stopped, so catching up after a cut-off works whenever the client reads faster than
   * events arrive.
   */
  let behindSince: number | undefined;
  const lagged = () => behindSince !== undefined && now() - behindSince > d.maxLagMs;
  /**
   * Pushed deliveries (with `live`): the tail writes new events to this watcher while it is
   * caught up. A write the stream refused (its buffer full: the client reads slower than
   * events come) ends that: once it drained, a watcher that is still more than one batch
   * behind, or behind the buffer, gets a fresh snapshot instead of the events it missed
   * (`skipDeltasThrough`: the token deltas it skipped are not sent after the snapshot; durable
   * events after the snapshot's sequence still are).
   */
  let backPressured = false;
  let skipDeltasThrough: StreamPosition | undefined;
  const sink: LiveSink | undefined = live && {
    after,
    deliver(chunk) {
      if (signal.aborted) return false;
      const accepted = live.write(chunk);
      watcher.delivered();
      if (!accepted) backPressured = true;
      return accepted;
    },
    wake: () => watcher.wake(),
  };
  try {
    if (first) {
      write.writingSince = now();
      yield render(first);
      write.writingSince = undefined;
      after = { sequence: first.sequence, deltaIndex: 0 };
    }
    for (;;) {
      // Ended by the server (shutdown: UNAVAILABLE; deadline) or the client: end with the reason.
      if (signal.aborted) throw ConnectError.from(signal.reason);
      let batch: BufferedEvent[];
      if (tail.covers(after)) {
        batch = tail.eventsAfter(after, BATCH);
        if (batch.length > 0) {
          if (tail.isHead(batch[batch.length - 1]!.position)) behindSince = undefined;
          else behindSince ??= now();
        }
      } else {
        behindSince ??= now();
        if (lagged()) throw watchLagError(after, d.maxLagMs);
        const direct = await d.fanout.streams.read(id, after, { limit: BATCH, blockMs: 0, signal });
        batch = direct.map((e) => new BufferedEvent(e, { sequence: e.sequence, deltaIndex: e.deltaIndex }, 0));
      }
      if (skipDeltasThrough && batch.length > 0) {
        const through = skipDeltasThrough;
        const last = batch[batch.length - 1]!.position;
        if (comparePositions(last, through) >= 0) skipDeltasThrough = undefined;
        const kept = batch.filter((b) => b.position.deltaIndex === 0 || comparePositions(b.position, through) > 0);
        if (kept.length === 0) {
          after = last;
          continue;
        }
        batch = kept;
      }
      if (signal.aborted) continue;
      if (batch.length === 0 && sink && tail.covers(after) && !watcher.heartbeatDue) {
        // Caught up: new events are pushed by the tail until it hands this watcher back.
        behindSince = undefined;
        sink.after = after;
        await watcher.waitLive(tail, sink);
        after = sink.after;
        if (!backPressured && watcher.heartbeatDue && !signal.aborted && tail.eventsAfter(after, 1).length === 0) {
          write.writingSince = now();
          yield render(heartbeat(id, after));
          write.writingSince = undefined;
          continue;
        }
        if (backPressured) {
          backPressured = false;
          write.writingSince = now();
          await live!.drained();
          write.writingSince = undefined;
          if (signal.aborted) continue;
          const pending = tail.covers(after) ? tail.eventsAfter(after, BATCH) : undefined;
          if (!pending || (pending.length === BATCH && !tail.isHead(pending[pending.length - 1]!.position))) {
            // Too slow to be sent what it missed: a fresh snapshot instead of a queue.
            const head = tail.headPosition;
            let snapshot;
            try {
              snapshot = await d.snapshots.get(user, id, fetch);
            } catch (err) {
              throw d.mapError(err, signal);
            }
            write.writingSince = now();
            yield render(snapshot);
            write.writingSince = undefined;
            watcher.delivered();
            after = { sequence: snapshot.sequence, deltaIndex: 0 };
            if (comparePositions(head, after) > 0) skipDeltasThrough = head;
          }
        }
        continue;
      }
      if (batch.length === 0) {
        // Nothing pending: caught up.
        behindSince = undefined;
        await watcher.wait(tail);
        if (signal.aborted) continue;
        if (watcher.heartbeatDue && !(tail.covers(after) && tail.eventsAfter(after, 1).length > 0)) {
          write.writingSince = now();
          yield render(heartbeat(id, after));
          write.writingSince = undefined;
        }
        continue;
      }
      if (durableGap(after, batch, (b) => b.position)) {
        let snapshot;
        try {
          snapshot = toSharedSnapshot(id, await fetch());
        } catch (err) {
          throw d.mapError(err, signal);
        }
        write.writingSince = now();
        yield render(snapshot);
        write.writingSince = undefined;
        after = { sequence: snapshot.sequence, deltaIndex: 0 };
        continue;
      }
      for (const entry of batch) {
        if (lagged()) throw watchLagError(after, d.maxLagMs);
        write.writingSince = now();
        yield render(entry);
        write.writingSince = undefined;
        after = entry.position;
        // The conversation was deleted (DeleteConversation): its last event; the stream ends.
        if (entry.event.kind.case === 'deleted') return;
      }
    }
  } catch (err) {
    if (err instanceof ConnectError) throw err;
    d.logger.warn({ err, conversation_id: id }, 'watch failed reading the notification stream');
    throw new ConnectError('the notification stream is unavailable; resume from the last event you saw', Code.Unavailable);
  } finally {
    signal.removeEventListener('abort', watcher);
    watcher.stop();
    tail.removeWaiter(watcher);
    untrack();
    d.fanout.release(tail);
    d.onWatchers?.(-1);
  }
}
