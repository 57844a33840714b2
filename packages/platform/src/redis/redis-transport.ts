/**
 * The distributed mode's transport: BullMQ queues and Redis Streams, pub/sub and a registry
 * hash on one Redis. Connections: one shared (commands, publish, BullMQ producers), one for
 * cancel subscriptions (opened on first subscribe), two per consumer (BullMQ Worker), and one
 * per concurrent blocking stream read (pooled). The run ledger uses the shared connection.
 */
import { createRedisClient } from './redis-connection.ts';
import { logBackgroundErrors } from '../background-errors.ts';
import type { Transport } from '../interfaces.ts';
import { createRedisCancelBus } from './redis-cancel-bus.ts';
import { redisKeys } from './redis-keys.ts';
import { tracedQueues } from '../traced-queues.ts';
import { createRedisQueues } from './redis-queues.ts';
import { createRedisRunLedger } from './redis-run-ledger.ts';
import { createRedisRunnerRegistry } from './redis-runner-registry.ts';
import { createRedisStreams } from './redis-streams.ts';
import { DEFAULT_REDIS_PREFIX } from './redis-transport-options.ts';
import { quitOrDisconnect } from './quit.ts';
import type { RedisTransportOptions } from './redis-transport-options.ts';

export function createRedisTransport(options: RedisTransportOptions): Transport {
  const onError = options.onError ?? logBackgroundErrors('redis transport');
  const keys = redisKeys(options.prefix ?? DEFAULT_REDIS_PREFIX, { queuePartitions: options.queuePartitions ?? 1 });
  // ioredis' default retry policy here (a command fails after ~20 reconnect attempts) so that
  // request paths fail rather than hang while Redis is away. BullMQ workers open their own
  // connections, which wait indefinitely as BullMQ requires.
  // On a cluster (options.cluster) every connection is an ioredis Cluster, or one to a node
  // (blocking reads); the key layout keeps every multi-key operation in one slot (redis-keys.ts).
  const connection = createRedisClient(options.redisUrl, options.cluster ?? false, { connectionName: 'bedrock-transport' });
  connection.on('error', onError);

  // Every queue hop traced (a no-op while tracing is off).
  const queues = tracedQueues(
    createRedisQueues({
      redisUrl: options.redisUrl,
      cluster: options.cluster ?? false,
      keys,
      connection,
      completedRetentionMs: options.completedRetentionMs,
      failedRetentionMs: options.failedRetentionMs,
      lockDurationMs: options.lockDurationMs,
      stalledIntervalMs: options.stalledIntervalMs,
      onError,
    }),
    'bullmq',
  );
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
  // Liveness uses the job lock's window: work is found dead as fast as a dead consumer's job.
  const runs = createRedisRunLedger({ connection, keys, retentionMs: options.completedRetentionMs, aliveTtlMs: options.lockDurationMs });

  let closing: Promise<void> | undefined;
  async function close(): Promise<void> {
    await Promise.all([queues.close(), streams.close(), cancels.close(), runners.close(), runs.close()]);
    await quitOrDisconnect(connection);
  }
  return {
    queues,
    streams,
    cancels,
    runners,
    runs,
    async ping() {
      // Not connected: say so at once rather than queue a PING behind the reconnects.
      if (connection.status !== 'ready') throw new Error(`connection is ${connection.status}`);
      const answer = await connection.ping();
      if (answer !== 'PONG') throw new Error(`PING answered ${answer}`);
    },
    close() {
      closing ??= close();
      return closing;
    },
  };
}
