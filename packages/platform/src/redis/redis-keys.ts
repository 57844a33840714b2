/**
 * The Redis key layout: every key and channel the Redis transport uses, under one deployment prefix
 * (BEDROCK_REDIS_PREFIX, default `bedrock`), built here and nowhere else. Keys that a Lua script or MULTI
 * touches together share a hash tag, so the same code runs on one Redis and on a cluster; every key matches
 * `<prefix>:*` (the ACL users' pattern: `{` is no glob character). The keys, tags and partitions:
 * docs/transports.md, "Redis key layout", "Redis Cluster" and "Queue partitions".
 */
import { conversationOfRunKey } from '@bedrock/contracts';
import { CLUSTER_SLOTS, keySlot } from './cluster-slot.ts';

/**
 * Buckets of conversations (hash tags of their keys). A conversation's keys and its tool calls' run
 * records carry the tag of its bucket (by a hash of its id; a run key of no conversation, `llm/<id>`, by
 * a hash of the key), so its stream's too: one blocking XREAD can follow every stream of a bucket
 * (stream-follower.ts).
 */
export const STREAM_BUCKETS = 16;

/**
 * Bucket i's tag: `c<i>-<n>` with the first n whose slot is in the i-th 1/STREAM_BUCKETS of the slots, so
 * the buckets spread evenly over the slot space, and so over the masters of a cluster.
 */
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
  return fnv1a(id) % STREAM_BUCKETS;
}

/** Most partitions a queue may be split into (BEDROCK_QUEUE_PARTITIONS). */
export const MAX_QUEUE_PARTITIONS = 256;

/** How far (in slots) a partition's slot may be from the middle of its share of the slots. */
const PARTITION_SLOT_TOLERANCE = 8;

/**
 * The hash tag of partition `i` of `n` of a queue (n > 1): the first `<queue>.p<i>-<k>` whose
 * slot is within a few slots of the middle of the i-th 1/n of the slot space. Middles, not just
 * "inside": every master that owns a contiguous range at least 1/n of the slots wide then holds
 * at least one partition (its range contains a middle), whatever the number of masters.
 */
function partitionTag(queue: string, i: number, n: number): string {
  const middle = (i + 0.5) * (CLUSTER_SLOTS / n);
  for (let k = 0; ; k++) {
    const tag = `${queue}.p${i}-${k}`;
    if (Math.abs(keySlot(`{${tag}}`) - middle) <= PARTITION_SLOT_TOLERANCE) return tag;
  }
}

/** FNV-1a 32 of the string's UTF-16 code units. */
function fnv1a(id: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < id.length; i++) {
    h ^= id.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h;
}

export interface RedisKeys {
  readonly prefix: string;
  /** BullMQ's own `prefix` option: its keys are `<bullPrefix>:<bull queue name>:<suffix>`. */
  readonly bullPrefix: string;
  /** Partitions of every queue (BEDROCK_QUEUE_PARTITIONS; 1: a queue is one BullMQ queue). */
  readonly queuePartitions: number;
  /**
   * The partition (0..queuePartitions-1) of a job: by a stable hash of its conversation id, or
   * of its job id when its payload names no conversation. The same on every process that has
   * the same `queuePartitions`.
   */
  partitionOf(routingKey: string): number;
  /** BullMQ's name of partition `partition` (default 0) of one of our queues: `{<queue>}` (N = 1) or `{<queue>.p<i>-<n>}`, the hash tag of its keys. */
  bullQueueName(queue: string, partition?: number): string;
  /** One of BullMQ's keys of a queue's partition: `wait` (the list KEDA scales on), `active`, or a job id (its hash). */
  bullKey(queue: string, suffix: string, partition?: number): string;
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

/**
 * The keys of one prefix. No two prefixes share a key. A BullMQ queue's keys share the queue's tag
 * (BullMQ's requirement), `{<queue>}`; with `queuePartitions` N > 1 a queue is N BullMQ queues, partition
 * i `{<queue>.p<i>-<k>}` (see partitionTag), so the partitions land on every master of a cluster of up to N
 * masters owning equal contiguous ranges. The runner registry's two keys share `{runners}`.
 */
export function redisKeys(prefix: string, options: { readonly queuePartitions?: number } = {}): RedisKeys {
  if (prefix === '') throw new Error('redis prefix must not be empty');
  const partitions = options.queuePartitions ?? 1;
  if (!Number.isInteger(partitions) || partitions < 1 || partitions > MAX_QUEUE_PARTITIONS) {
    throw new Error(`queue partitions must be an integer 1..${MAX_QUEUE_PARTITIONS}, got ${partitions}`);
  }
  const bullPrefix = `${prefix}:q`;
  const tags = new Map<string, readonly string[]>();
  const bullQueueName = (queue: string, partition = 0): string => {
    if (!Number.isInteger(partition) || partition < 0 || partition >= partitions) {
      throw new Error(`queue partition ${partition} out of 0..${partitions - 1}`);
    }
    if (partitions === 1) return `{${queue}}`;
    let names = tags.get(queue);
    if (!names) tags.set(queue, (names = Array.from({ length: partitions }, (_, i) => `{${partitionTag(queue, i, partitions)}}`)));
    return names[partition]!;
  };
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
    queuePartitions: partitions,
    partitionOf: (routingKey) => (partitions === 1 ? 0 : fnv1a(routingKey) % partitions),
    bullQueueName,
    bullKey: (queue, suffix, partition = 0) => `${bullPrefix}:${bullQueueName(queue, partition)}:${suffix}`,
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
