/**
 * The one way a service builds its transport from its settings: in-process (`memory`, the
 * embedded mode and tests) or Redis (`redis`, with the `transport.redis` settings of
 * config/common.ts). Background errors (a dropped connection, a failing handler) are logged as
 * warnings by the caller's logger; request paths still see their own errors.
 */
import type { TransportConfig } from './config/common.ts';
import type { Transport } from './interfaces.ts';
import { createMemoryTransport } from './memory/memory-transport.ts';
import { createRedisTransport } from './redis/redis-transport.ts';

export type TransportKind = TransportConfig['kind'];

/** Any logger with pino's `warn(object, message)`. */
export interface TransportLogger {
  warn(fields: { err: unknown }, message: string): void;
}

export function createTransport(config: TransportConfig, logger: TransportLogger): Transport {
  const onError = (err: unknown) => logger.warn({ err }, `${config.kind} transport error`);
  if (config.kind === 'memory') return createMemoryTransport({ onError });
  const redis = config.redis;
  return createRedisTransport({
    redisUrl: redis.url,
    cluster: redis.cluster,
    prefix: redis.prefix,
    queuePartitions: redis.queuePartitions,
    completedRetentionMs: redis.completedJobRetention,
    failedRetentionMs: redis.failedJobRetention,
    streamMaxLen: redis.streamMaxLen,
    streamTtlMs: redis.streamTtl,
    lockDurationMs: redis.jobLock,
    stalledIntervalMs: redis.jobStalledInterval,
    maxIdleBlockingConnections: redis.idleBlockingConnections,
    onError,
  });
}
