/**
 * Dedicated connections for blocking commands (XREAD BLOCK), so a blocked read never stalls
 * the shared connection. A connection is borrowed per call and returned afterwards; up to
 * `maxIdle` idle ones are kept, more are opened on demand (one per concurrent blocked read).
 *
 * Abort: the caller gets [] at once. The blocked command is cut short with CLIENT UNBLOCK
 * from the shared connection; if it was not blocked yet (still in flight), the connection
 * cannot be trusted to come back soon and is closed instead of returned to the pool.
 */
import type { Redis } from 'ioredis';

export interface BlockingPool {
  /** Runs `command` on a dedicated connection; resolves null on abort. */
  block(command: (string | number)[], signal?: AbortSignal): Promise<unknown>;
  close(): Promise<void>;
}

interface Lease {
  readonly redis: Redis;
  /** CLIENT ID, for CLIENT UNBLOCK. */
  readonly clientId: number;
}

export function createBlockingPool(shared: Redis, maxIdle: number, onError: (error: unknown) => void): BlockingPool {
  const idle: Lease[] = [];
  const all = new Set<Redis>();
  let closed = false;

  async function acquire(): Promise<Lease> {
    const reused = idle.pop();
    if (reused) return reused;
    const redis = shared.duplicate({ lazyConnect: true, connectionName: 'bedrock-blocking-read' });
    redis.on('error', onError);
    all.add(redis);
    try {
      await redis.connect();
      const clientId = Number(await redis.call('CLIENT', 'ID'));
      return { redis, clientId };
    } catch (error) {
      discard(redis);
      throw error;
    }
  }

  function release(lease: Lease): void {
    if (!all.has(lease.redis)) return; // already discarded
    if (!closed && idle.length < maxIdle && lease.redis.status === 'ready') idle.push(lease);
    else discard(lease.redis);
  }

  function discard(redis: Redis): void {
    all.delete(redis);
    redis.disconnect();
  }

  return {
    async block(command, signal): Promise<unknown> {
      if (closed || signal?.aborted) return null;
      const lease = await acquire();
      if (signal?.aborted || closed) {
        release(lease);
        return null;
      }
      const [name, ...args] = command;
      const pending = lease.redis.call(String(name), ...args);
      if (!signal) {
        try {
          const reply = await pending;
          release(lease);
          return reply;
        } catch (error) {
          discard(lease.redis);
          if (closed) return null;
          throw error;
        }
      }
      return new Promise<unknown>((resolve, reject) => {
        let aborted = false;
        let settled = false;
        /** After an abort: 'reusable' once UNBLOCK confirmed, 'discard' if it did not. */
        let unblock: 'pending' | 'reusable' | 'discard' = 'pending';
        const afterAbort = () => {
          if (unblock === 'discard') discard(lease.redis);
          else if (unblock === 'reusable' && settled) release(lease);
        };
        const onAbort = () => {
          aborted = true;
          resolve(null);
          shared.call('CLIENT', 'UNBLOCK', lease.clientId).then(
            // 1: the blocked command returns (empty) now, and the connection is reusable.
            (unblocked) => {
              unblock = Number(unblocked) === 1 ? 'reusable' : 'discard';
              afterAbort();
            },
            () => {
              unblock = 'discard';
              afterAbort();
            },
          );
        };
        signal.addEventListener('abort', onAbort, { once: true });
        pending.then(
          (reply) => {
            settled = true;
            signal.removeEventListener('abort', onAbort);
            if (aborted) return afterAbort();
            release(lease);
            resolve(reply);
          },
          (error: unknown) => {
            settled = true;
            signal.removeEventListener('abort', onAbort);
            unblock = 'discard';
            discard(lease.redis);
            if (aborted || closed) resolve(null);
            else reject(error);
          },
        );
      });
    },

    async close(): Promise<void> {
      closed = true;
      idle.length = 0;
      for (const redis of [...all]) discard(redis);
    },
  };
}
