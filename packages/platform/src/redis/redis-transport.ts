/**
 * The distributed mode's transport: BullMQ queues and Redis Streams, pub/sub and a registry
 * hash on one Redis. Connections: one shared (commands, publish, BullMQ producers), one for
 * cancel subscriptions (opened on first subscribe), two per consumer (BullMQ Worker), and one
 * per concurrent blocking stream read (pooled).
 */
import { Redis } from 'ioredis';
import type { Transport } from '../interfaces.ts';
import { createRedisCancelBus } from './redis-cancel-bus.ts';
import { redisKeys } from './redis-keys.ts';
import { createRedisQueues } from './redis-queues.ts';
import { createRedisRunnerRegistry } from './redis-runner-registry.ts';
import { createRedisStreams } from './redis-streams.ts';
import { DEFAULT_REDIS_PREFIX } from './redis-transport-options.ts';
import type { RedisTransportOptions } from './redis-transport-options.ts';

export function createRedisTransport(options: RedisTransportOptions): Transport {
  const onError = options.onError ?? ((error: unknown) => console.error('bedrock redis transport:', error));
  const keys = redisKeys(options.prefix ?? DEFAULT_REDIS_PREFIX);
  // maxRetriesPerRequest null: commands wait out a Redis restart instead of failing after 20
  // reconnects (BullMQ requires it on connections it blocks on; we keep one policy for all).
  const connection = new Redis(options.redisUrl, { maxRetriesPerRequest: null, connectionName: 'bedrock-transport' });
  connection.on('error', onError);

  const queues = createRedisQueues({
    redisUrl: options.redisUrl,
    bullPrefix: keys.bullPrefix,
    connection,
    completedRetentionMs: options.completedRetentionMs,
    failedRetentionMs: options.failedRetentionMs,
    onError,
  });
  const streams = createRedisStreams({
    connection,
    keys,
    maxLen: options.streamMaxLen,
    ttlMs: options.streamTtlMs,
    maxIdleBlockingConnections: options.maxIdleBlockingConnections,
    onError,
  });
  const cancels = createRedisCancelBus({ connection, channel: keys.cancelChannel, onError });
  const runners = createRedisRunnerRegistry(connection, keys);

  let closing: Promise<void> | undefined;
  async function close(): Promise<void> {
    await Promise.all([queues.close(), streams.close(), cancels.close(), runners.close()]);
    await connection.quit().catch(() => connection.disconnect());
  }
  return {
    queues,
    streams,
    cancels,
    runners,
    close() {
      closing ??= close();
      return closing;
    },
  };
}
