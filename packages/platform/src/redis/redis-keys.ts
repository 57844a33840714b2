/**
 * The Redis key layout: every key and channel the Redis transport uses, under one deployment
 * prefix (BEDROCK_REDIS_PREFIX, default `bedrock`), built here and nowhere else. With the default
 * prefix (`<b>` is a conversation's bucket tag, `c00`..`c15` with a suffix, see below):
 *
 * | key                                     | what                                                    |
 * |-----------------------------------------|---------------------------------------------------------|
 * | `bedrock:{<b>}:conv:<id>:events`        | stream: a conversation's notifications                  |
 * | `bedrock:{<b>}:conv:<id>:jobs`          | set: `<queue>:<encoded job id>` of the conversation's jobs |
 * | `bedrock:{<b>}:conv:<id>:runs`          | set: the run keys of the conversation's tool calls      |
 * | `bedrock:{<b>}:runs:<run key>`          | hash: a run-ledger record (run keys: @bedrock/contracts)|
 * | `bedrock:{<b>}:runs:<run key>:alive`    | string with TTL: the run's heartbeat                    |
 * | `bedrock:cancel`                        | pub/sub channel: CancelSignal to every gateway/runner   |
 * | `bedrock:{runners}`                     | hash: runner id -> RunnerCapabilities (protobuf JSON)   |
 * | `bedrock:{runners}:expiry`              | sorted set: runner id scored by its expiry              |
 * | `bedrock:q:{<queue>}:<suffix>`          | BullMQ's keys of a queue (`wait`, `active`, job hashes) |
 *
 * Hash tags (Redis Cluster hashes only the part between the first `{` and `}`): every key that a
 * Lua script or MULTI touches together with another shares its tag, so the same code runs on one
 * Redis and on a cluster. A conversation's keys and its tool calls' run records carry the tag of
 * the conversation's bucket (one of `STREAM_BUCKETS`, by a hash of the id; a run key of no
 * conversation, `llm/<id>`, by a hash of the key); so do its stream's, which lets one blocking
 * XREAD follow every stream of a bucket (stream-follower.ts). The buckets' tags are chosen so
 * that their slots are spread evenly over the slot space (bucket i in the i-th sixteenth), so
 * they are spread over the masters of a cluster. A BullMQ queue's keys share the queue's tag
 * (BullMQ's requirement); the runner registry's two keys share theirs.
 *
 * No two prefixes share a key, and every key matches `<prefix>:*` (the Redis ACL users' pattern:
 * `{` is no glob character).
 */
import { conversationOfRunKey } from '@bedrock/contracts';
import { CLUSTER_SLOTS, keySlot } from './cluster-slot.ts';

/** Buckets of conversations (hash tags of their keys). */
export const STREAM_BUCKETS = 16;

/** Bucket i's tag: `c<i>-<n>` with the first n whose slot is in the i-th 1/STREAM_BUCKETS of the slots. */
const BUCKET_TAGS: readonly string[] = Array.from({ length: STREAM_BUCKETS }, (_, i) => {
  const width = CLUSTER_SLOTS / STREAM_BUCKETS;
  const base = `c${i.toString().padStart(2, '0')}`;
  for (let n = 0; ; n++) {
    const tag = `${base}-${n}`;
    if (Math.floor(keySlot(`{${tag}}`) / width) === i) return tag;
  }
});

/** FNV-1a 32 of the string's UTF-16 code units, mod the buckets. */
export function bucketOf(id: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < id.length; i++) {
    h ^= id.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h % STREAM_BUCKETS;
}

export interface RedisKeys {
  readonly prefix: string;
  /** BullMQ's own `prefix` option: its keys are `<bullPrefix>:<bull queue name>:<suffix>`. */
  readonly bullPrefix: string;
  /** BullMQ's name of one of our queues: `{<queue>}`, the hash tag of its keys. */
  bullQueueName(queue: string): string;
  /** One of BullMQ's keys of a queue: `wait` (the list KEDA scales on), `active`, or a job id (its hash). */
  bullKey(queue: string, suffix: string): string;
  /** Stream: a conversation's notifications (ConversationEvent). */
  stream(conversationId: string): string;
  /** Set: `<queue>:<encoded job id>` of every job whose payload names the conversation (removed with it). */
  conversationJobs(conversationId: string): string;
  /** Set: the run keys of the conversation's tool calls in the run ledger (removed with it). */
  conversationRuns(conversationId: string): string;
  /** Pub/sub channel of CancelSignal, to every gateway and runner. */
  readonly cancelChannel: string;
  /** Hash: runner id -> RunnerCapabilities (protobuf JSON). */
  readonly runners: string;
  /** Sorted set: runner id scored by its expiry time (ms since epoch, Redis server clock). */
  readonly runnersExpiry: string;
  /** Hash: the run ledger's record of a run (`toolRunKey`/`llmRunKey` of @bedrock/contracts). */
  runRecord(runKey: string): string;
  /** String with a TTL: the run's heartbeat. */
  runAlive(runKey: string): string;
  /** What runRecord(k) puts before k for the run keys of a conversation (for scripts that build them). */
  runRecordPrefix(conversationId: string): string;
}

export function redisKeys(prefix: string): RedisKeys {
  if (prefix === '') throw new Error('redis prefix must not be empty');
  const bullPrefix = `${prefix}:q`;
  const runners = `${prefix}:{runners}`;
  const tagged = (id: string) => `${prefix}:{${BUCKET_TAGS[bucketOf(id)]}}`;
  const runRecordPrefix = (conversationId: string) => `${tagged(conversationId)}:runs:`;
  const runRecord = (runKey: string) => {
    const conversation = conversationOfRunKey(runKey);
    return conversation === null ? `${tagged(runKey)}:runs:${runKey}` : `${runRecordPrefix(conversation)}${runKey}`;
  };
  return {
    prefix,
    bullPrefix,
    bullQueueName: (queue) => `{${queue}}`,
    bullKey: (queue, suffix) => `${bullPrefix}:{${queue}}:${suffix}`,
    stream: (conversationId) => `${tagged(conversationId)}:conv:${conversationId}:events`,
    conversationJobs: (conversationId) => `${tagged(conversationId)}:conv:${conversationId}:jobs`,
    conversationRuns: (conversationId) => `${tagged(conversationId)}:conv:${conversationId}:runs`,
    cancelChannel: `${prefix}:cancel`,
    runners,
    runnersExpiry: `${runners}:expiry`,
    runRecord,
    runAlive: (runKey) => `${runRecord(runKey)}:alive`,
    runRecordPrefix,
  };
}
