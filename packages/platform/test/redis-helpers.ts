/** Helpers for tests on the real Redis. */
import { Redis } from 'ioredis';

export const REDIS_URL = process.env.REDIS_URL || 'redis://127.0.0.1:6379';

/** A key prefix no other test run shares. */
export function uniquePrefix(name: string): string {
  return `bedrock-test-${name}-${process.pid}-${Math.random().toString(36).slice(2, 8)}`;
}

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
