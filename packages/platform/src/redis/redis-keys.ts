/**
 * The Redis key layout: every key and channel the Redis transport uses, under one deployment
 * prefix (BEDROCK_REDIS_PREFIX, default `bedrock`), built here and nowhere else. With the default
 * prefix:
 *
 * | key                               | what                                                    |
 * |-----------------------------------|---------------------------------------------------------|
 * | `bedrock:conv:<id>:events`        | stream: a conversation's notifications                  |
 * | `bedrock:conv:<id>:jobs`          | set: `<queue>:<encoded job id>` of the conversation's jobs |
 * | `bedrock:conv:<id>:runs`          | set: the run keys of the conversation's tool calls      |
 * | `bedrock:cancel`                  | pub/sub channel: CancelSignal to every gateway/runner   |
 * | `bedrock:runners`                 | hash: runner id -> RunnerCapabilities (protobuf JSON)   |
 * | `bedrock:runners:expiry`          | sorted set: runner id scored by its expiry              |
 * | `bedrock:runs:<run key>`          | hash: a run-ledger record (run keys: @bedrock/contracts)|
 * | `bedrock:runs:<run key>:alive`    | string with TTL: the run's heartbeat                    |
 * | `bedrock:q:<queue>:<suffix>`      | BullMQ's keys of a queue (`wait`, `active`, job hashes) |
 *
 * No two prefixes share a key, and every key matches `<prefix>:*` (the Redis ACL users' pattern).
 */

export interface RedisKeys {
  readonly prefix: string;
  /** BullMQ's own `prefix` option: its keys are `<bullPrefix>:<queue>:<suffix>`. */
  readonly bullPrefix: string;
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
}

export function redisKeys(prefix: string): RedisKeys {
  if (prefix === '') throw new Error('redis prefix must not be empty');
  const bullPrefix = `${prefix}:q`;
  const runners = `${prefix}:runners`;
  return {
    prefix,
    bullPrefix,
    bullKey: (queue, suffix) => `${bullPrefix}:${queue}:${suffix}`,
    stream: (conversationId) => `${prefix}:conv:${conversationId}:events`,
    conversationJobs: (conversationId) => `${prefix}:conv:${conversationId}:jobs`,
    conversationRuns: (conversationId) => `${prefix}:conv:${conversationId}:runs`,
    cancelChannel: `${prefix}:cancel`,
    runners,
    runnersExpiry: `${runners}:expiry`,
    runRecord: (runKey) => `${prefix}:runs:${runKey}`,
    runAlive: (runKey) => `${prefix}:runs:${runKey}:alive`,
  };
}
