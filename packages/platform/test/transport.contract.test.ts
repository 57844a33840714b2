/**
 * Runs the transport contract against both implementations: the in-process one (a single
 * shared instance, as every service of the embedded process shares it) and the Redis one
 * (a fresh transport per "replica", on the real Redis with a prefix unique to this run), the
 * Redis one again with its queues in 4 partitions, and the partitions' own cases.
 */
import { createMemoryTransport, createRedisTransport } from '../src/index.ts';
import type { Transport } from '../src/index.ts';
import { transportContract } from './transport-contract.ts';
import { REDIS_URL, deleteKeys, uniquePrefix } from './redis-helpers.ts';
import { queuePartitionsContract } from './queue-partitions-contract.ts';
import { Redis } from 'ioredis';

let memory: Transport | undefined;
transportContract('in-process', {
  async make() {
    memory ??= createMemoryTransport();
    return memory;
  },
});

const prefix = uniquePrefix('contract');
transportContract('redis', {
  async make() {
    return createRedisTransport({ redisUrl: REDIS_URL, prefix });
  },
  async cleanup() {
    await deleteKeys(prefix);
  },
});

queuePartitionsContract('redis', {
  masters: 1,
  async make(p, queuePartitions) {
    return createRedisTransport({ redisUrl: REDIS_URL, prefix: p, queuePartitions });
  },
  async exists(key) {
    const redis = new Redis(REDIS_URL);
    try {
      return (await redis.exists(key)) === 1;
    } finally {
      await redis.quit();
    }
  },
  async cleanup(p) {
    await deleteKeys(p);
  },
});

const partitionedPrefix = uniquePrefix('contract-partitioned');
transportContract('redis with 4 queue partitions', {
  async make() {
    return createRedisTransport({ redisUrl: REDIS_URL, prefix: partitionedPrefix, queuePartitions: 4 });
  },
  async cleanup() {
    await deleteKeys(partitionedPrefix);
  },
});
