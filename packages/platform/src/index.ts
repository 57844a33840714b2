export * from './interfaces.ts';
export { encodeJobId, decodeJobId } from './job-id.ts';
export { comparePositions, firstAfter, positionToStreamId, streamIdToPosition } from './stream-position.ts';
export * from './defaults.ts';
export { createTransport, type TransportKind, type TransportLogger } from './create-transport.ts';
export { createMemoryTransport } from './memory/memory-transport.ts';
export type { MemoryTransportOptions } from './memory/memory-transport.ts';
export { createMemoryQueues } from './memory/memory-queues.ts';
export type { MemoryQueuesOptions } from './memory/memory-queues.ts';
export { createMemoryStreams } from './memory/memory-streams.ts';
export type { MemoryStreamsOptions } from './memory/memory-streams.ts';
export { createMemoryCancelBus } from './memory/memory-cancel-bus.ts';
export { createMemoryRunnerRegistry } from './memory/memory-runner-registry.ts';
export { createMemoryRunLedger } from './memory/memory-run-ledger.ts';
export type { MemoryRunLedgerOptions } from './memory/memory-run-ledger.ts';
export { createRedisTransport } from './redis/redis-transport.ts';
export { createRedisRunLedger } from './redis/redis-run-ledger.ts';
export { DEFAULT_REDIS_URL, DEFAULT_REDIS_PREFIX } from './redis/redis-transport-options.ts';
export type { RedisTransportOptions } from './redis/redis-transport-options.ts';
export { redisKeys } from './redis/redis-keys.ts';
export type { RedisKeys } from './redis/redis-keys.ts';
export {
  REDIS_ACL_SERVICES,
  redisServiceUser,
  redisServiceAclRules,
  redisAclFileLine,
  createRedisAclUsers,
  type RedisAclUsers,
  type RedisAclUsersOptions,
} from './redis/redis-acl.ts';
export { tracedQueues } from './traced-queues.ts';
export { createLiveOutput, DEFAULT_LIVE_OUTPUT_WAIT_FOR_DURABLE_MS } from './live-output.ts';
export type { LiveOutput, LiveOutputOptions } from './live-output.ts';
export {
  createRunRegistry,
  followCancels,
  RunAbortedError,
  DEFAULT_EARLY_CANCEL_MAX,
  DEFAULT_EARLY_CANCEL_TTL_MS,
} from './run-registry.ts';
export type { CancelTarget, RunAbortCause, RunContext, RunKey, RunOptions, RunRegistry, RunRegistryOptions } from './run-registry.ts';
