/**
 * Snapshots for watchers that start from the beginning, shared per (user, conversation): watchers
 * of one conversation attaching together (a page reload of many tabs, a benchmark, a reconnect
 * storm after a web-bff restart) make one GetConversation as that user, not one each.
 * Authorization stays the conversation service's: the key includes the user.
 */
import { create } from '@bufbuild/protobuf';
import { ConversationEventSchema } from '@bedrock/contracts';
import type { WatchSnapshot } from '@bedrock/platform/watch';
import { SharedEvent } from './shared-response.ts';

export class SharedSnapshot extends SharedEvent {
  /** The notification sequence the snapshot reflects. */
  get sequence(): bigint {
    return this.event.sequence;
  }
}

export interface SnapshotCache {
  /** A snapshot for `user`, from `fetch` (called as that user) or one shared with a call of the same user. */
  get(user: string, conversationId: string, fetch: () => Promise<WatchSnapshot>): Promise<SharedSnapshot>;
}

export function toSharedSnapshot(conversationId: string, s: WatchSnapshot): SharedSnapshot {
  return new SharedSnapshot(
    create(ConversationEventSchema, {
      conversationId,
      sequence: s.sequence,
      kind: { case: 'snapshot', value: { conversation: s.conversation, messages: s.messages, subAgents: s.subAgents ?? [] } },
    }),
  );
}

/**
 * A snapshot is reused for `shareMs` after it arrived; a watcher given one that is a little old
 * still misses nothing, because it then streams every event after the snapshot's sequence. It is
 * only ever shared among calls of the user the service answered; failures are not kept beyond
 * the call in flight.
 */
export function createSnapshotCache(shareMs: number): SnapshotCache {
  const entries = new Map<string, Promise<SharedSnapshot>>();
  return {
    get(user, conversationId, fetch) {
      const key = `${user}\u0000${conversationId}`;
      const cached = entries.get(key);
      if (cached) return cached;
      const promise = fetch().then((s) => toSharedSnapshot(conversationId, s));
      entries.set(key, promise);
      const forget = () => {
        if (entries.get(key) === promise) entries.delete(key);
      };
      promise.then(() => setTimeout(forget, shareMs).unref(), forget);
      return promise;
    },
  };
}
