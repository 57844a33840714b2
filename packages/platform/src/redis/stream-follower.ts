/**
 * Live reads of many notification streams over a few connections (a web-bff's watch fan-out). Each of up
 * to `connections` dedicated connections runs one reader loop that owns a shard of the followed streams and
 * issues one multi-stream `XREAD COUNT n BLOCK ms STREAMS k1..kn id1..idn` for all of them; on a Redis
 * Cluster a shard holds the streams of one slot (`groupOf`). docs/transports.md, "Notification streams" and
 * "Redis Cluster" ("How streams are read").
 */
import type { ConversationEvent } from '@bedrock/contracts';
import type { Redis } from 'ioredis';
import type { BlockingTargets } from './redis-connection.ts';
import type { StreamFollow, StreamPosition } from '../interfaces.ts';
import { comparePositions, positionToStreamId } from '../stream-position.ts';

export interface StreamFollowerOptions {
  /** Where the reader connections go, and CLIENT UNBLOCK. */
  readonly targets: BlockingTargets;
  /** Reader connections at most (one blocking read each), when there is no `groupOf`. */
  readonly connections: number;
  /**
   * Streams that may be read together (a cluster: the slot of the key); none: any. On a Redis Cluster one
   * XREAD may name only keys of one slot, so a shard then holds the streams of one group only, with one shard
   * per group followed (at most STREAM_BUCKETS: the streams' keys carry their conversation's bucket tag,
   * redis-keys.ts), each reading from the node that serves its slot.
   */
  readonly groupOf?: (key: string) => string;
  /** Entries read per stream per round. */
  readonly count: number;
  /** Longest block of one read, ms (re-issued after). */
  readonly blockMs: number;
  readonly streamKey: (conversationId: string) => string;
  /** Decodes the entries of one stream read (positions from the entry ids). */
  readonly decode: (entries: [string, string[]][]) => ConversationEvent[];
  readonly onError: (error: unknown) => void;
}

interface Follow extends StreamFollow {
  readonly conversationId: string;
  readonly key: string;
  after: StreamPosition;
  readonly onEvents: (events: ConversationEvent[]) => void;
  stopped: boolean;
}

interface Shard {
  readonly index: number;
  /** Its streams' group (groupOf), if any. */
  readonly group: string | undefined;
  /** The node its connection goes to ('' on one Redis). */
  node: string;
  /** Follows by stream key. */
  readonly follows: Map<string, Set<Follow>>;
  size: number;
  redis: Redis | undefined;
  clientId: number | undefined;
  /** A read is in flight (sent, maybe blocked). */
  reading: boolean;
  /** Bumped per read issued. */
  generation: number;
  /** The set changed since the read in flight was issued. */
  dirty: boolean;
  /** Wakes the loop when it idles with no follows. */
  wake: (() => void) | undefined;
  running: boolean;
}

const MAX_BACKOFF_MS = 5000;

export interface StreamFollower {
  follow(conversationId: string, after: StreamPosition, onEvents: (events: ConversationEvent[]) => void): StreamFollow;
  /** Reader connections open now. */
  readonly connections: number;
  close(): Promise<void>;
}

export function createStreamFollower(options: StreamFollowerOptions): StreamFollower {
  const { targets, onError } = options;
  const shards: Shard[] = [];
  let closed = false;

  /** A new follow goes to the shard of its group, or (no groups) to the shard with the fewest streams. */
  function pickShard(key: string): Shard {
    const group = options.groupOf?.(key);
    let best: Shard | undefined;
    if (group !== undefined) {
      best = shards.find((shard) => shard.group === group);
      if (best) return best;
    } else {
      const max = Math.max(1, Math.floor(options.connections));
      for (const shard of shards) if (!best || shard.size < best.size) best = shard;
      if (best && (best.size === 0 || shards.length >= max)) return best;
    }
    const shard: Shard = {
      index: shards.length,
      group,
      node: '',
      follows: new Map(),
      size: 0,
      redis: undefined,
      clientId: undefined,
      reading: false,
      generation: 0,
      dirty: false,
      wake: undefined,
      running: false,
    };
    shards.push(shard);
    return shard;
  }

  async function connect(shard: Shard, key: string): Promise<Redis> {
    if (shard.redis && shard.redis.status !== 'end') return shard.redis;
    shard.node = targets.nodeOf(key);
    const redis = targets.open(shard.node, 'bedrock-stream-follower');
    redis.on('error', onError);
    shard.redis = redis;
    await redis.connect();
    shard.clientId = Number(await redis.call('CLIENT', 'ID'));
    return redis;
  }

  function drop(shard: Shard): void {
    shard.redis?.disconnect();
    shard.redis = undefined;
    shard.clientId = undefined;
    // The node may have lost the slot (failover): have the slot map refreshed before reconnecting.
    if (shard.node !== '') targets.refresh();
  }

  /**
   * Cuts the shard's blocked read short so it is re-issued with the current set (a stream was added).
   * Retried until the loop re-issues: the UNBLOCK can overtake an XREAD still in flight.
   */
  function interrupt(shard: Shard, attempt = 0): void {
    if (closed || !shard.reading || !shard.dirty || shard.clientId === undefined) return;
    const generation = shard.generation;
    const control = targets.control(shard.node);
    if (!control) return;
    control.call('CLIENT', 'UNBLOCK', shard.clientId).then(
      (unblocked) => {
        // 0: the read was not blocked (yet): it may still be on its way; try again shortly.
        if (Number(unblocked) !== 1 && shard.generation === generation) {
          setTimeout(() => interrupt(shard, attempt + 1), Math.min(50, 1 << attempt)).unref();
        }
      },
      (error: unknown) => onError(error),
    );
  }

  function dispatch(shard: Shard, key: string, entries: [string, string[]][]): void {
    const follows = shard.follows.get(key);
    if (!follows || entries.length === 0) return;
    const events = options.decode(entries);
    for (const follow of follows) {
      if (follow.stopped) continue;
      let from = 0;
      while (from < events.length && comparePositions(events[from]!, follow.after) <= 0) from++;
      if (from === events.length) continue;
      const mine = from === 0 ? events : events.slice(from);
      const last = mine[mine.length - 1]!;
      follow.after = { sequence: last.sequence, deltaIndex: last.deltaIndex };
      try {
        follow.onEvents(mine);
      } catch (error) {
        onError(error);
      }
    }
  }

  /**
   * XREAD reply: null, or over RESP2 [[key, entries], ...], over RESP3 (ioredis 6's default for
   * raw `call`) the map flattened to [key, entries, key, entries, ...].
   */
  function eachStream(reply: unknown, fn: (key: string, entries: [string, string[]][]) => void): void {
    if (!Array.isArray(reply)) return;
    if (typeof reply[0] === 'string') {
      for (let i = 0; i + 1 < reply.length; i += 2) fn(reply[i] as string, reply[i + 1] as [string, string[]][]);
    } else {
      for (const pair of reply as [string, [string, string[]][]][]) fn(pair[0], pair[1]);
    }
  }

  /**
   * The reader loop of one shard. One loop owns a stream, so its batches are delivered in stream order;
   * several follows of one stream are read once (from the earliest position among them) and each gets only
   * the events after its own position. Errors are reported and the loop retries with backoff, reconnecting
   * (after a failover: to the slot's new master); the positions are kept, so nothing is lost or repeated.
   */
  async function run(shard: Shard): Promise<void> {
    shard.running = true;
    let failures = 0;
    while (!closed) {
      if (shard.size === 0) {
        // Idle: nothing to read. Keep the connection; wait for a follow.
        await new Promise<void>((resolve) => (shard.wake = resolve));
        shard.wake = undefined;
        continue;
      }
      try {
        const first = shard.follows.keys().next();
        if (first.done) continue;
        const redis = await connect(shard, first.value);
        // Built after the last await: a follow added meanwhile is in this read.
        const keys: string[] = [];
        const ids: string[] = [];
        for (const [key, follows] of shard.follows) {
          let from: StreamPosition | undefined;
          for (const f of follows) if (!from || comparePositions(f.after, from) < 0) from = f.after;
          keys.push(key);
          ids.push(positionToStreamId(from!));
        }
        if (keys.length === 0) continue;
        shard.dirty = false;
        shard.generation++;
        shard.reading = true;
        const reply = await redis.call(
          'XREAD',
          'COUNT',
          options.count,
          'BLOCK',
          Math.max(1, Math.ceil(options.blockMs)),
          'STREAMS',
          ...keys,
          ...ids,
        );
        shard.reading = false;
        failures = 0;
        eachStream(reply, (key, entries) => dispatch(shard, key, entries));
      } catch (error) {
        shard.reading = false;
        if (closed) break;
        onError(error);
        drop(shard);
        failures++;
        await new Promise((resolve) => setTimeout(resolve, Math.min(100 * 2 ** failures, MAX_BACKOFF_MS)).unref());
      }
    }
    shard.running = false;
  }

  return {
    follow(conversationId, after, onEvents) {
      if (closed) throw new Error('notification streams are closed');
      const key = options.streamKey(conversationId);
      const shard = pickShard(key);
      const follow: Follow = {
        conversationId,
        key,
        after,
        onEvents,
        stopped: false,
        stop() {
          if (follow.stopped) return;
          follow.stopped = true;
          const set = shard.follows.get(key);
          if (!set?.delete(follow)) return;
          shard.size--;
          if (set.size === 0) shard.follows.delete(key);
          // Left out of the next read; no need to cut the current one short.
        },
      };
      let set = shard.follows.get(key);
      if (!set) shard.follows.set(key, (set = new Set()));
      set.add(follow);
      shard.size++;
      shard.dirty = true;
      if (!shard.running) void run(shard);
      else if (shard.wake) shard.wake();
      else interrupt(shard);
      return follow;
    },

    get connections() {
      return shards.filter((s) => s.redis !== undefined).length;
    },

    async close() {
      closed = true;
      for (const shard of shards) {
        shard.wake?.();
        drop(shard);
      }
    },
  };
}
