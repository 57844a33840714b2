/**
 * Dedicated connections for blocking commands (XREAD BLOCK), so a blocked read never stalls the shared
 * connection. A connection is borrowed per call and returned afterwards; up to `maxIdle` idle ones are kept
 * (per node on a cluster: a blocking read goes to the node serving its key's slot), more are opened on
 * demand (one per concurrent blocked read).
 */
import type { Redis } from 'ioredis';
import type { BlockingTargets } from './redis-connection.ts';

export interface BlockingPool {
  /**
   * Runs `command` (whose key is `key`) on a dedicated connection; resolves null at once on abort. The
   * blocked command is then cut short with CLIENT UNBLOCK sent to the same node; if it was not blocked yet
   * (still in flight), the connection cannot be trusted to come back soon and is closed instead of returned.
   */
  block(key: string, command: (string | number)[], signal?: AbortSignal): Promise<unknown>;
  close(): Promise<void>;
}

interface Lease {
  readonly node: string;
  readonly redis: Redis;
  /** CLIENT ID, for CLIENT UNBLOCK. */
  readonly clientId: number;
}

export function createBlockingPool(targets: BlockingTargets, maxIdle: number, onError: (error: unknown) => void): BlockingPool {
  const idle = new Map<string, Lease[]>();
  const all = new Set<Redis>();
  let idleCount = 0;
  let closed = false;

  async function acquire(node: string): Promise<Lease> {
    const reused = idle.get(node)?.pop();
    if (reused) {
      idleCount--;
      return reused;
    }
    const redis = targets.open(node, 'bedrock-blocking-read');
    redis.on('error', onError);
    all.add(redis);
    try {
      await redis.connect();
      const clientId = Number(await redis.call('CLIENT', 'ID'));
      return { node, redis, clientId };
    } catch (error) {
      discard(redis);
      throw error;
    }
  }

  function release(lease: Lease): void {
    if (!all.has(lease.redis)) return; // already discarded
    if (!closed && idleCount < maxIdle && lease.redis.status === 'ready') {
      let list = idle.get(lease.node);
      if (!list) idle.set(lease.node, (list = []));
      list.push(lease);
      idleCount++;
    } else discard(lease.redis);
  }

  function discard(redis: Redis): void {
    all.delete(redis);
    redis.disconnect();
  }

  function failed(lease: Lease): void {
    discard(lease.redis);
    // A node that fails may have lost its slots (failover): have the map refreshed.
    if (lease.node !== '') targets.refresh();
  }

  return {
    async block(key, command, signal): Promise<unknown> {
      if (closed || signal?.aborted) return null;
      const lease = await acquire(targets.nodeOf(key));
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
          failed(lease);
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
          const control = targets.control(lease.node);
          if (!control) {
            unblock = 'discard';
            afterAbort();
            return;
          }
          control.call('CLIENT', 'UNBLOCK', lease.clientId).then(
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
            failed(lease);
            if (aborted || closed) resolve(null);
            else reject(error);
          },
        );
      });
    },

    async close(): Promise<void> {
      closed = true;
      idle.clear();
      idleCount = 0;
      for (const redis of [...all]) discard(redis);
    },
  };
}
