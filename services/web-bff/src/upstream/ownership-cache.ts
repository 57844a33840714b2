/**
 * (user, conversation) pairs the conversation service has confirmed. Ownership never changes
 * after creation, so a confirmed pair stays true; the cache only saves a GetConversation
 * when a watcher resumes. Bounded: the oldest pairs are forgotten first. A conversation deleted
 * through this replica is forgotten at once.
 */
export interface OwnershipCache {
  has(user: string, conversationId: string): boolean;
  remember(user: string, conversationId: string): void;
  forget(user: string, conversationId: string): void;
}

export function createOwnershipCache(maxEntries: number): OwnershipCache {
  const pairs = new Set<string>();
  const key = (user: string, id: string) => `${user}\u0000${id}`;
  return {
    has: (user, id) => pairs.has(key(user, id)),
    forget: (user, id) => void pairs.delete(key(user, id)),
    remember(user, id) {
      const k = key(user, id);
      if (pairs.has(k)) return;
      pairs.add(k);
      if (pairs.size > maxEntries) {
        const oldest = pairs.values().next().value;
        if (oldest !== undefined) pairs.delete(oldest);
      }
    },
  };
}
