/**
 * The one way a service builds its transport from its settings: in-process (`memory`, the
 * embedded mode and tests) or Redis (`redis`, read from the environment: REDIS_URL,
 * BEDROCK_REDIS_PREFIX and the retention settings of redis-transport-options.ts). Background
 * errors (a dropped connection, a failing handler) are logged as warnings by the caller's logger;
 * request paths still see their own errors.
 */
import type { Transport } from './interfaces.ts';
import { createMemoryTransport } from './memory/memory-transport.ts';
import { createRedisTransport } from './redis/redis-transport.ts';
import { redisTransportOptionsFromEnv, type RedisTransportOptions } from './redis/redis-transport-options.ts';

export type TransportKind = 'memory' | 'redis';

/** Any logger with pino's `warn(object, message)`. */
export interface TransportLogger {
  warn(fields: { err: unknown }, message: string): void;
}

export function createTransport(
  kind: TransportKind,
  logger: TransportLogger,
  /** Redis settings that override the environment's (e.g. a service's own REDIS_URL setting). */
  redis: Partial<Omit<RedisTransportOptions, 'onError'>> = {},
  env: NodeJS.ProcessEnv = process.env,
): Transport {
  const onError = (err: unknown) => logger.warn({ err }, `${kind} transport error`);
  return kind === 'memory'
    ? createMemoryTransport({ onError })
    : createRedisTransport({ ...redisTransportOptionsFromEnv(env), ...redis, onError });
}
