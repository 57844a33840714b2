/**
 * Notification streams on Redis Streams. Entry id = stream position: a durable event at sequence n is
 * `n-0`, the ephemeral events after it `n-1`, `n-2`, ... Each entry has two fields: `kind` (the event's oneof
 * case, for operators) and `event` (protobuf JSON); the entry id is authoritative for (sequence, deltaIndex)
 * when reading. Trimming and expiry: docs/transports.md, "Notification streams".
 */
import { fromJsonString, toJsonString } from '@bufbuild/protobuf';
import { ConversationEventSchema } from '@bedrock/contracts';
import type { ConversationEvent } from '@bedrock/contracts';
import type { RedisClient } from './redis-connection.ts';
import { blockingTargets, isCluster } from './redis-connection.ts';
import { keySlot } from './cluster-slot.ts';
import { STREAM_START } from '../interfaces.ts';
import type { EncodedEvent, NotificationStreams, StreamPosition } from '../interfaces.ts';
import { DEFAULT_READ_LIMIT, DEFAULT_STREAM_MAX_LEN, DEFAULT_STREAM_TTL_MS } from '../defaults.ts';
import { positionToStreamId, streamIdToPosition } from '../stream-position.ts';
import { luaScript, runScript } from './redis-script.ts';
import type { RedisKeys } from './redis-keys.ts';
import { createBlockingPool } from './blocking-pool.ts';
import { createStreamFollower } from './stream-follower.ts';

export interface RedisStreamsOptions {
  /** Shared connection for non-blocking commands; owned by the caller. */
  readonly connection: RedisClient;
  readonly keys: RedisKeys;
  /** Approximate entries kept per stream (XADD MAXLEN ~). Default 10 000. */
  readonly maxLen?: number;
  /**
   * Expiry after the last append, ms. Default 24 h. Every append trims with `MAXLEN ~ maxLen` and resets the
   * key's expiry to this, so a conversation's stream disappears `ttlMs` after its last event.
   */
  readonly ttlMs?: number;
  /** Idle dedicated connections kept for blocking reads. Default 4. */
  readonly maxIdleBlockingConnections?: number;
  /** Connections `follow` reads every followed stream over (multi-stream XREAD). Default 4. */
  readonly followConnections?: number;
  readonly onError: (error: unknown) => void;
}

/**
 * KEYS[1] stream; ARGV sequence, maxLen, ttlMs, kind, event JSON. Returns 1 when appended, 0
 * when the stream already holds (sequence, 0) or a later position: Redis itself refuses an
 * explicit id not above the stream's last id, even after that entry was trimmed.
 */
const APPEND_DURABLE = luaScript(`
local added = redis.pcall('XADD', KEYS[1], 'MAXLEN', '~', ARGV[2], ARGV[1] .. '-0', 'kind', ARGV[4], 'event', ARGV[5])
if type(added) == 'table' and added.err then
  if string.find(added.err, 'equal or smaller', 1, true) then return 0 end
  return added
end
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1
`);

/**
 * KEYS[1] stream; ARGV maxLen, ttlMs, then (sequence, kind, event JSON) per event. APPEND_DURABLE
 * per event, in order, in one call; returns a 1/0 per event. The expiry is reset once, when
 * anything was appended.
 */
const APPEND_DURABLE_MANY = luaScript(`
local results = {}
local appended = false
for i = 3, #ARGV, 3 do
  local added = redis.pcall('XADD', KEYS[1], 'MAXLEN', '~', ARGV[1], ARGV[i] .. '-0', 'kind', ARGV[i + 1], 'event', ARGV[i + 2])
  if type(added) == 'table' and added.err then
    if not string.find(added.err, 'equal or smaller', 1, true) then return added end
    results[#results + 1] = 0
  else
    results[#results + 1] = 1
    appended = true
  end
end
if appended then redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return results
`);

/**
 * KEYS[1] stream; ARGV sequence, maxLen, ttlMs, kind, event JSON. Appends at
 * (sequence, top delta + 1) when the stream's last entry belongs to durable event `sequence`
 * (an empty stream counts as sequence 0); returns the new id, or nil when the last entry is
 * from another sequence (a later durable event: stale; an earlier one: ours is not there yet).
 * Done in Lua because XADD `<ms>-*` would take `<ms>-0`, a durable position, in the latter case.
 */
const APPEND_EPHEMERAL = luaScript(`
local top = redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', 1)
local ms, seq = '0', '0'
if top[1] then ms, seq = string.match(top[1][1], '^(%d+)%-(%d+)$') end
if ms ~= ARGV[1] then return false end
local id = ms .. '-' .. (tonumber(seq) + 1)
redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[2], id, 'kind', ARGV[4], 'event', ARGV[5])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return id
`);

type StreamEntry = [id: string, fields: string[]];

const DEFAULT_FOLLOW_CONNECTIONS = 4;
/** Longest block of a follower's read before it is re-issued, ms. */
const FOLLOW_BLOCK_MS = 30_000;

export function createRedisStreams(options: RedisStreamsOptions): NotificationStreams {
  const { connection, keys } = options;
  const maxLen = Math.max(1, Math.floor(options.maxLen ?? DEFAULT_STREAM_MAX_LEN));
  const ttlMs = Math.max(1, Math.round(options.ttlMs ?? DEFAULT_STREAM_TTL_MS));
  const targets = blockingTargets(connection);
  const pool = createBlockingPool(targets, options.maxIdleBlockingConnections ?? 4, options.onError);
  let closed = false;
  const follower = createStreamFollower({
    targets,
    connections: options.followConnections ?? DEFAULT_FOLLOW_CONNECTIONS,
    // On a cluster a read names the streams of one slot only (one per conversation bucket).
    groupOf: isCluster(connection) ? (key) => String(keySlot(key)) : undefined,
    count: DEFAULT_READ_LIMIT,
    blockMs: FOLLOW_BLOCK_MS,
    streamKey: (conversationId) => keys.stream(conversationId),
    decode: (entries) => decode(entries),
    onError: options.onError,
  });

  function assertOpen(): void {
    if (closed) throw new Error('notification streams are closed');
  }

  function appendArgs(event: ConversationEvent): (string | number)[] {
    return [event.sequence.toString(), maxLen, ttlMs, event.kind.case ?? '', toJsonString(ConversationEventSchema, event)];
  }

  function decode(entries: StreamEntry[]): ConversationEvent[] {
    return entries.map(([id, fields]) => {
      const json = fields[fields.indexOf('event') + 1];
      if (json === undefined) throw new Error(`stream entry ${id} has no event field`);
      const event = fromJsonString(ConversationEventSchema, json, { ignoreUnknownFields: true });
      const position = streamIdToPosition(id);
      event.sequence = position.sequence;
      event.deltaIndex = position.deltaIndex;
      return event;
    });
  }

  /**
   * XREAD reply for one stream: null, or over RESP2 [[key, entries]], over RESP3 (ioredis 6's
   * default for raw `call`) the map flattened to [key, entries]. Entries: [[id, [field, value, ...]], ...].
   */
  function entriesOf(reply: unknown): StreamEntry[] {
    if (!Array.isArray(reply) || reply.length === 0) return [];
    const pair = typeof reply[0] === 'string' ? reply : reply[0];
    return (pair as [string, StreamEntry[]])[1] ?? [];
  }

  return {
    async appendDurable(event: ConversationEvent): Promise<boolean> {
      assertOpen();
      // Sequence 0 is STREAM_START, which no event occupies (and Redis refuses id 0-0).
      if (event.sequence < 1n) return false;
      const added = await runScript(connection, APPEND_DURABLE, [keys.stream(event.conversationId)], appendArgs(event));
      return added === 1;
    },

    async appendDurableMany(events: readonly (ConversationEvent | EncodedEvent)[]): Promise<boolean[]> {
      assertOpen();
      const results = events.map(() => false);
      if (events.length === 0) return results;
      const conversationId = events[0]!.conversationId;
      const args: (string | number)[] = [maxLen, ttlMs];
      /** Index in `events` of each event sent (sequence 0, STREAM_START, is never sent). */
      const sent: number[] = [];
      events.forEach((event, i) => {
        if (event.conversationId !== conversationId) {
          throw new Error(`appendDurableMany: events of ${conversationId} and ${event.conversationId} in one call`);
        }
        if (event.sequence < 1n) return;
        sent.push(i);
        if ('json' in event) args.push(event.sequence.toString(), event.kind, event.json);
        else args.push(event.sequence.toString(), event.kind.case ?? '', toJsonString(ConversationEventSchema, event));
      });
      if (sent.length === 0) return results;
      const added = (await runScript(connection, APPEND_DURABLE_MANY, [keys.stream(conversationId)], args)) as number[];
      sent.forEach((index, k) => (results[index] = added[k] === 1));
      return results;
    },

    async appendEphemeral(event: ConversationEvent): Promise<StreamPosition | null> {
      assertOpen();
      const id = await runScript(connection, APPEND_EPHEMERAL, [keys.stream(event.conversationId)], appendArgs(event));
      return typeof id === 'string' ? streamIdToPosition(id) : null;
    },

    async read(conversationId, after, readOptions = {}): Promise<ConversationEvent[]> {
      const { signal } = readOptions;
      // Redis wants whole numbers here.
      const limit = Math.max(1, Math.floor(readOptions.limit ?? DEFAULT_READ_LIMIT));
      const blockMs = Math.ceil(readOptions.blockMs ?? 0);
      if (signal?.aborted || closed) return [];
      const key = keys.stream(conversationId);
      const from = positionToStreamId(after);
      // Non-blocking first, on the shared connection: most reads find something.
      const found = entriesOf(await connection.call('XREAD', 'COUNT', limit, 'STREAMS', key, from));
      if (found.length > 0 || blockMs <= 0) return decode(found);
      // Nothing yet: block on a dedicated connection. XREAD from an explicit id (not `$`)
      // also returns anything appended between the two reads, so no wake-up is lost.
      const reply = await pool.block(key, ['XREAD', 'COUNT', limit, 'BLOCK', blockMs, 'STREAMS', key, from], signal);
      return decode(entriesOf(reply));
    },

    async last(conversationId: string): Promise<StreamPosition> {
      const top = (await connection.call('XREVRANGE', keys.stream(conversationId), '+', '-', 'COUNT', 1)) as StreamEntry[];
      return top[0] ? streamIdToPosition(top[0][0]) : STREAM_START;
    },

    follow(conversationId, after, onEvents) {
      assertOpen();
      return follower.follow(conversationId, after, onEvents);
    },

    async delete(conversationId: string): Promise<void> {
      assertOpen();
      await connection.del(keys.stream(conversationId));
    },

    async close(): Promise<void> {
      closed = true;
      await follower.close();
      await pool.close();
    },
  };
}
