/**
 * Runs the transport contract against both implementations: the in-process one (a single
 * shared instance, as every service of the embedded process shares it) and the Redis one
 * (a fresh transport per "replica", on the real Redis with a prefix unique to this run).
 */
import { Redis } from 'ioredis';
import { createMemoryTransport, createRedisTransport } from '../src/index.ts';
import type { Transport } from '../src/index.ts';
import { transportContract } from './transport-contract.ts';

const REDIS_URL = process.env.REDIS_URL || 'redis://127.0.0.1:6379';

let memory: Transport | undefined;
transportContract('in-process', {
  async make() {
    memory ??= createMemoryTransport();
    return memory;
  },
});

const prefix = `bedrock-test-${process.pid}-${Math.random().toString(36).slice(2, 8)}`;
transportContract('redis', {
  async make() {
    return createRedisTransport({ redisUrl: REDIS_URL, prefix });
  },
  async cleanup() {
    await deleteKeys(prefix);
  },
});

/** Deletes every key under the prefix (BullMQ's included). */
export async function deleteKeys(keyPrefix: string): Promise<void> {
  const redis = new Redis(REDIS_URL);
  try {
    let cursor = '0';
    do {
      const [next, keys] = await redis.scan(cursor, 'MATCH', `${keyPrefix}:*`, 'COUNT', 1000);
      if (keys.length > 0) await redis.del(...keys);
      cursor = next;
    } while (cursor !== '0');
  } finally {
    await redis.quit();
  }
}
