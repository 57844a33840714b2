import type { RedisClient } from './redis-connection.ts';

/**
 * QUIT waits for Redis to answer, which never happens while Redis is unreachable; closing a
 * transport must not hang on that, so after `timeoutMs` (default 2000 ms) the socket is just dropped.
 */
export async function quitOrDisconnect(redis: RedisClient, timeoutMs = 2000): Promise<void> {
  if (redis.status === 'end') return;
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([
      redis.quit(),
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error('QUIT timed out')), timeoutMs);
      }),
    ]);
  } catch {
    redis.disconnect();
  } finally {
    clearTimeout(timer);
  }
}
