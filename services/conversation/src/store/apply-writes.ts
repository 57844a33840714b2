/**
 * What applying an event reads and writes (apply/applier.ts): `readForApply`, then `writeApplied`,
 * one statement that checks the revision read and writes state, messages, outbox, audit and spend
 * in one commit (docs/conversation.md, "The store"); and the writes made under the row lock.
 */
import type { PoolClient } from 'pg';
import type { AppliedWrite, ApplyRead, ConversationRecord, StoreOptions, TitleWrite } from './records.ts';
import { inTransaction, toRecord, type ConversationRowDb } from './conversation-rows.ts';
import { ADD_TO_DAILY_SPEND, afterWrite, messageValues, noBudgetOf, type WrittenRow } from './applied-rows.ts';
import { packOutboxRows } from './outbox-row.ts';
import { auditJson } from './audit-store.ts';
import { createGroupCommit } from './group-commit.ts';
import { markSentAlone } from './outbox-store.ts';

export interface ApplyStore {
  /**
   * A conversation as applying an event needs it, in one round trip: its row, and the ids of
   * its outbox rows not yet marked sent (apply/applier.ts decides from them who publishes).
   * With `client` (a transaction), the row stays locked until it ends.
   */
  readForApply(id: string, client?: PoolClient): Promise<ApplyRead | null>;
  /**
   * Writes what one transition decided, in ONE statement (so one commit): the new state if
   * the row is still at `expectedRevision`, then its messages and outbox rows. Null, writing
   * nothing, when another writer moved the conversation on first (optimistic versioning).
   * `record` is the row as read; the updated record is built from it and `write`.
   */
  writeApplied(
    record: ConversationRecord,
    write: AppliedWrite,
    client?: PoolClient,
  ): Promise<{ record: ConversationRecord; outboxIds: string[] } | null>;
  /**
   * Marks published outbox rows sent: in the next group commit's statement, or alone shortly
   * after when no write comes (group-commit.ts). A lost mark only means publishing again.
   */
  markSent(ids: readonly string[]): Promise<void>;
  /**
   * Runs `work` in a transaction holding the conversation's row lock (user actions with a
   * client request id: the id is claimed and its outcome stored with the event's writes).
   * Null when the conversation does not exist.
   */
  withLocked<T>(id: string, work: (client: PoolClient, read: ApplyRead) => Promise<T>): Promise<T | null>;
  /**
   * Sets a title given by the owner (title_source 'user': the automatic title never replaces
   * it) and inserts the notification that tells watchers, in the transaction of `client`
   * (which holds the row lock, store.withLocked). Bumps the revision and notify_seq, so an
   * event decided from the row as it was writes nothing and is decided again.
   */
  writeTitle(
    client: PoolClient,
    record: ConversationRecord,
    write: TitleWrite,
  ): Promise<{ record: ConversationRecord; outboxIds: string[] }>;
}

export type ApplyStoreOptions = Pick<StoreOptions, 'pool' | 'groupCommit'>;

/** A conversation and the ids of its unsent outbox rows (the partial index outbox_unsent_idx). */
const READ_FOR_APPLY = `SELECT c.*, ARRAY(SELECT o.id::text FROM outbox o WHERE o.conversation_id = c.id AND o.sent_at IS NULL ORDER BY o.id) AS unsent
  FROM conversations c WHERE c.id = $1`;

/**
 * One statement, one commit: the conditional UPDATE decides (the revision read, and with
 * `onlyWithoutBudget` that the owner has no budget); the inserts (messages, outbox
 * rows, audit rows) join on its result, so a stale version writes nothing; `k` marks rows
 * published earlier sent (group-commit.ts carries the publisher's marks). Outbox ids follow
 * the rows' order (ORDINALITY).
 */
const WRITE_APPLIED = `WITH c AS (
  UPDATE conversations
     SET state = $3::jsonb, state_kind = $4, mode = $5, version = $6, notify_seq = $7, message_seq = $8,
         revision = revision + 1, updated_at = now(), state_updated_at = CASE WHEN $9 THEN now() ELSE state_updated_at END,
         title = COALESCE($15, title), title_source = CASE WHEN $15::text IS NULL THEN title_source ELSE 'message' END,
         cost_micros = cost_micros + $17
   WHERE id = $1 AND revision = $2 AND (NOT $22::boolean OR ${noBudgetOf('conversations.owner_id')})
   RETURNING revision, updated_at, state_updated_at, owner_id
), s AS (
  INSERT INTO user_daily_spend (user_id, day, cost_micros, input_tokens, output_tokens, cache_creation_tokens, cache_read_tokens)
  SELECT c.owner_id, $18::date, $17, ($20::bigint[])[1], ($20::bigint[])[2], ($20::bigint[])[3], ($20::bigint[])[4] FROM c WHERE $17::bigint > 0 OR ($20::bigint[])[1] + ($20::bigint[])[2] + ($20::bigint[])[3] + ($20::bigint[])[4] > 0
  ${ADD_TO_DAILY_SPEND}
), m AS (
  INSERT INTO messages (id, conversation_id, sequence, message_type, actor_kind, content, display_data, usage_data,
                        stop_reason, stop_explanation, created_at)
  SELECT r.id, $1, r.sequence, r.message_type, r.actor_kind, r.content, r.display_data, r.usage_data,
         r.stop_reason, r.stop_explanation, r.created_at
    FROM c, jsonb_to_recordset($10::jsonb) AS r(id text, sequence bigint, message_type text, actor_kind text, content jsonb,
                                              display_data jsonb, usage_data jsonb, stop_reason text, stop_explanation text,
                                              created_at timestamptz)
), o AS (
  INSERT INTO outbox (effect_id, conversation_id, kind, payload)
  SELECT r.effect_id, r.conversation_id, r.kind, r.payload::jsonb
    FROM c, unnest($11::text[], $12::text[], $13::text[], $14::text[]) WITH ORDINALITY AS r(effect_id, conversation_id, kind, payload, n)
   ORDER BY r.n
  ON CONFLICT (effect_id) DO NOTHING
  RETURNING id
), a AS (
  INSERT INTO audit_events (user_id, action, conversation_id, details)
  SELECT r.user_id, r.action, r.conversation_id, r.details
    FROM c, jsonb_to_recordset($16::jsonb) AS r(user_id text, action text, conversation_id text, details jsonb)
), b AS (
  DELETE FROM budget_reservations USING c WHERE budget_reservations.conversation_id = $1 AND $19::boolean
), k AS (
  UPDATE outbox SET sent_at = now()
   WHERE id IN (SELECT id FROM outbox WHERE id = ANY($21::bigint[]) FOR UPDATE SKIP LOCKED)
)
SELECT c.revision, c.updated_at, c.state_updated_at, ARRAY(SELECT o.id::text FROM o ORDER BY o.id) AS outbox_ids FROM c`;

export function createApplyStore(options: ApplyStoreOptions): ApplyStore {
  const { pool } = options;

  /**
   * A conversation as applying an event needs it, in one round trip: its row, and the ids of
   * its outbox rows not yet marked sent (apply/applier.ts decides from them who publishes).
   * With `client` (a transaction), the row stays locked until it ends.
   */
  async function readForApply(id: string, client?: PoolClient): Promise<ApplyRead | null> {
    const { rows } = await (client ?? pool).query<ConversationRowDb & { unsent: string[] }>(
      client
        ? { text: `${READ_FOR_APPLY} FOR UPDATE OF c`, values: [id] }
        : { name: 'bedrock-read-for-apply', text: READ_FOR_APPLY, values: [id] },
    );
    const row = rows[0];
    return row ? { record: toRecord(row), unsentOutbox: row.unsent } : null;
  }

  /** One event's write in one statement of its own; `markIds`: published outbox rows it marks sent (group-commit.ts). */
  async function writeOne(
    record: ConversationRecord,
    write: AppliedWrite,
    client?: PoolClient,
    markIds: readonly string[] = [],
  ): Promise<{ record: ConversationRecord; outboxIds: string[] } | null> {
    // The event's effects, one table row per conversation they belong to (outbox-row.ts).
    const { packed: outbox, holder } = packOutboxRows(write.outbox);
    const { rows } = await (client ?? pool).query<WrittenRow>({
      name: 'bedrock-write-applied',
      text: WRITE_APPLIED,
      values: [
        write.id,
        write.expectedRevision,
        JSON.stringify(write.state),
        write.state.phase.kind,
        write.state.mode,
        write.state.seq,
        write.notifySeq,
        write.messageSeq,
        write.touchState,
        JSON.stringify(write.messages.map(messageValues)),
        outbox.map((row) => row.effectId),
        outbox.map((row) => row.conversationId),
        outbox.map((row) => row.kind),
        outbox.map((row) => JSON.stringify(row.payload)),
        write.title,
        auditJson(write.audit),
        write.costMicros,
        write.spendDay,
        write.releaseReservation,
        [write.tokens.input, write.tokens.output, write.tokens.cacheCreation, write.tokens.cacheRead],
        markIds,
        write.onlyWithoutBudget ?? false,
      ],
    });
    const row = rows[0];
    return row ? afterWrite(record, write, row, holder, outbox.length) : null;
  }

  const group =
    options.groupCommit === false
      ? null
      : createGroupCommit({
          pool,
          single: (record, write, markIds) => writeOne(record, write, undefined, markIds),
          markAlone: (ids) => markSentAlone(pool, ids),
          ...(options.groupCommit ?? {}),
        });

  return {
    readForApply,

    writeApplied(record: ConversationRecord, write: AppliedWrite, client?: PoolClient) {
      // In a caller's transaction the write is its own statement; otherwise it joins the next group commit.
      return client || !group ? writeOne(record, write, client) : group.write(record, write);
    },

    markSent: (ids) => (group ? group.markSent(ids) : markSentAlone(pool, ids)),

    async withLocked<T>(id: string, work: (client: PoolClient, read: ApplyRead) => Promise<T>): Promise<T | null> {
      return inTransaction(pool, async (client) => {
        const read = await readForApply(id, client);
        return read ? work(client, read) : null;
      });
    },

    async writeTitle(
      client: PoolClient,
      record: ConversationRecord,
      write: TitleWrite,
    ): Promise<{ record: ConversationRecord; outboxIds: string[] }> {
      const { rows } = await client.query<ConversationRowDb>(
        `UPDATE conversations SET title = $2, title_source = 'user', notify_seq = $3, revision = revision + 1, updated_at = now()
          WHERE id = $1 RETURNING *`,
        [record.id, write.title, write.notifySeq],
      );
      if (!rows[0]) throw new Error(`conversation ${record.id} vanished under its row lock`);
      const outboxIds: string[] = [];
      for (const row of write.outbox) {
        const inserted = await client.query<{ id: string }>(
          'INSERT INTO outbox (effect_id, conversation_id, kind, payload) VALUES ($1, $2, $3, $4) RETURNING id::text AS id',
          [row.effectId, row.conversationId, row.kind, JSON.stringify(row.payload)],
        );
        outboxIds.push(inserted.rows[0]!.id);
      }
      return { record: toRecord(rows[0]), outboxIds };
    },
  };
}
