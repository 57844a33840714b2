/**
 * Postgres state of conversations: plain data access, no decisions. One object composed of the
 * stores per concern (conversations, apply-writes, deletions, outbox-store; records.ts holds their
 * records). State is written before its effects are published (docs/conversation.md, "The store").
 */
import { createConversationsStore, type ConversationsStore } from './conversations.ts';
import { createApplyStore, type ApplyStore } from './apply-writes.ts';
import { createDeletionStore, type DeletionStore } from './deletions.ts';
import { createOutboxStore } from './outbox-store.ts';
import type { StoreOptions } from './records.ts';
import { findOutcome, pruneOutcomes, type PriorOutcome, type RequestKey } from './request-outcomes.ts';

export type * from './records.ts';
export { NO_TOKENS } from './records.ts';
export { BUSY_STATE_SQL } from './conversation-rows.ts';
export { InvalidCursorError } from './conversations.ts';

export interface ConversationStore extends ConversationsStore, ApplyStore, DeletionStore {
  /** The stored outcome of a request id, if one was committed. */
  findRequest(key: RequestKey): Promise<PriorOutcome | null>;
  /** Deletes request outcomes older than `retentionMs` (BEDROCK_REQUEST_ID_RETENTION); returns how many. */
  pruneRequests(retentionMs: number): Promise<number>;
  /** Whether the relay still has effects of this conversation to publish. */
  hasUnsentOutbox(id: string): Promise<boolean>;
}

export function createConversationStore(options: StoreOptions): ConversationStore {
  const { pool } = options;
  const outbox = createOutboxStore(pool);
  return {
    ...createConversationsStore(pool),
    ...createApplyStore(options),
    ...createDeletionStore(pool),
    findRequest: (key) => findOutcome(pool, key),
    pruneRequests: (retentionMs) => pruneOutcomes(pool, retentionMs),
    hasUnsentOutbox: (id) => outbox.hasUnsent(id),
  };
}
