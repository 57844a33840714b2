/**
 * Cancel broadcast on Redis pub/sub. One subscriber connection per bus, opened on the first
 * subscribe; every local handler shares it. Messages are CancelSignal protobuf JSON.
 * Pub/sub is fire-and-forget: a runner that is disconnected at the moment misses the signal,
 * which is why the conversation never waits for the cancelled work (see docs/architecture.md).
 */
import { fromJsonString, toJsonString } from '@bufbuild/protobuf';
import { CancelSignalSchema } from '@bedrock/contracts';
import type { CancelSignal } from '@bedrock/contracts';
import type { RedisClient } from './redis-connection.ts';
import { duplicateClient } from './redis-connection.ts';
import type { CancelBus } from '../interfaces.ts';
import { quitOrDisconnect } from './quit.ts';

export interface RedisCancelBusOptions {
  /** Shared connection used to publish; owned by the caller. */
  readonly connection: RedisClient;
  readonly channel: string;
  readonly onError: (error: unknown) => void;
}

export function createRedisCancelBus(options: RedisCancelBusOptions): CancelBus {
  const { connection, channel, onError } = options;
  const handlers = new Set<(signal: CancelSignal) => void>();
  let subscriber: RedisClient | undefined;
  let subscribed = false;
  let closed = false;
  // SUBSCRIBE/UNSUBSCRIBE run one at a time so concurrent calls cannot interleave.
  let chain: Promise<unknown> = Promise.resolve();

  function serial<T>(step: () => Promise<T>): Promise<T> {
    const next = chain.then(step);
    chain = next.catch(() => undefined);
    return next;
  }

  function onMessage(from: string, message: string): void {
    if (from !== channel) return;
    let signal: CancelSignal;
    try {
      signal = fromJsonString(CancelSignalSchema, message, { ignoreUnknownFields: true });
    } catch (error) {
      onError(error);
      return;
    }
    for (const handler of [...handlers]) {
      try {
        // Each handler its own copy, as if it had its own subscription.
        handler(handlers.size === 1 ? signal : fromJsonString(CancelSignalSchema, message, { ignoreUnknownFields: true }));
      } catch (error) {
        onError(error);
      }
    }
  }

  return {
    async publish(signal: CancelSignal): Promise<void> {
      if (closed) throw new Error('cancel bus is closed');
      await connection.publish(channel, toJsonString(CancelSignalSchema, signal));
    },

    async subscribe(handler: (signal: CancelSignal) => void): Promise<() => Promise<void>> {
      if (closed) throw new Error('cancel bus is closed');
      const entry = (signal: CancelSignal) => handler(signal);
      await serial(async () => {
        if (!subscriber) {
          subscriber = duplicateClient(connection, 'bedrock-cancel-subscriber');
          subscriber.on('error', onError);
          subscriber.on('message', onMessage);
        }
        // ioredis resolves SUBSCRIBE once Redis confirms it, so a publish after this is seen.
        if (!subscribed) await subscriber.subscribe(channel);
        subscribed = true;
        handlers.add(entry);
      });
      let active = true;
      return async () => {
        if (!active) return;
        active = false;
        await serial(async () => {
          handlers.delete(entry);
          if (handlers.size === 0 && subscribed && subscriber && !closed) {
            subscribed = false;
            await subscriber.unsubscribe(channel);
          }
        });
      };
    },

    async close(): Promise<void> {
      closed = true;
      await serial(async () => {
        handlers.clear();
        subscribed = false;
        if (subscriber) await quitOrDisconnect(subscriber);
        subscriber = undefined;
      });
    },
  };
}
