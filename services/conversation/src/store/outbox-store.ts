/**
 * The outbox table's statements: what the relay (outbox/relay.ts) and the publisher
 * (outbox/publisher.ts) read and mark, under the relay's per-conversation advisory lock.
 */
import type { Pool } from 'pg';

/** Namespace of the per-conversation advisory locks (first key of the two-key form). */
export const RELAY_LOCK_SPACE = 0x6f7574; // "out"

/** An outbox row as read for publishing. */
export interface UnsentOutboxRow {
  readonly id: string;
  readonly effect_id: string;
  readonly conversation_id: string;
  readonly kind: string;
  readonly payload: unknown;
  readonly created_at: Date;
}

export interface OutboxStore {
  /** Whether the relay still has effects of this conversation to publish. */
  hasUnsent(conversationId: string): Promise<boolean>;
  /**
   * In one transaction holding the conversation's relay lock: reads its unsent rows (oldest
   * first), lets `publish` publish them, and marks sent the ids it returns. `waitMs`: wait that
   * long for another holder of the lock (a kick); absent: take it only if free (the sweep).
   * False, doing nothing, when the lock was not taken.
   */
  publishUnsent(
    conversationId: string,
    waitMs: number | undefined,
    publish: (rows: readonly UnsentOutboxRow[]) => Promise<readonly string[]>,
  ): Promise<boolean>;
  /** Conversations with rows unsent for at least `olderThanMs` (0: all), at most `limit`. */
  conversationsWithUnsent(olderThanMs: number, limit: number): Promise<string[]>;
  /** Deletes rows sent more than `retentionMs` ago. */
  deleteSent(retentionMs: number): Promise<void>;
  /** Marks rows sent (without waiting for the WAL flush: a lost mark only means publishing again). */
  markSent(ids: readonly string[]): Promise<void>;
}

/**
 * Marks rows sent. A lost mark only means publishing again, so its commit does not wait for
 * the WAL flush (synchronous_commit off for this statement's transaction alone).
 */
const MARK_SENT = `WITH local AS (SELECT set_config('synchronous_commit', 'off', true))
UPDATE outbox SET sent_at = now() FROM local WHERE id = ANY($1::bigint[])`;

/** Marks rows sent in a statement of their own (group-commit.ts carries most marks in its writes instead). */
export async function markSentAlone(pool: Pool, ids: readonly string[]): Promise<void> {
  await pool.query({ name: 'bedrock-mark-sent', text: MARK_SENT, values: [ids] });
}

export function createOutboxStore(pool: Pool): OutboxStore {
  return {
    async hasUnsent(conversationId) {
      const { rows } = await pool.query('SELECT 1 FROM outbox WHERE conversation_id = $1 AND sent_at IS NULL LIMIT 1', [conversationId]);
      return rows.length > 0;
    },

    async publishUnsent(conversationId, waitMs, publish) {
      const client = await pool.connect();
      try {
        await client.query('BEGIN');
        // Losing this transaction in a crash only means publishing its rows again, which is
        // harmless (outbox/relay.ts): it need not wait for the WAL flush.
        await client.query('SET LOCAL synchronous_commit = off');
        const wait = waitMs !== undefined;
        if (wait) await client.query(`SET LOCAL lock_timeout = '${waitMs}ms'`);
        const lock = await client.query<{ ok: boolean }>(
          wait
            ? 'SELECT true AS ok FROM pg_advisory_xact_lock($1, hashtext($2))'
            : 'SELECT pg_try_advisory_xact_lock($1, hashtext($2)) AS ok',
          [RELAY_LOCK_SPACE, conversationId],
        );
        if (!lock.rows[0]?.ok) {
          await client.query('ROLLBACK');
          return false;
        }
        const { rows } = await client.query<UnsentOutboxRow>(
          'SELECT id, effect_id, conversation_id, kind, payload, created_at FROM outbox WHERE conversation_id = $1 AND sent_at IS NULL ORDER BY id',
          [conversationId],
        );
        const sent = await publish(rows);
        if (sent.length) await client.query('UPDATE outbox SET sent_at = now() WHERE id = ANY($1::bigint[])', [sent]);
        await client.query('COMMIT');
        return true;
      } catch (err) {
        await client.query('ROLLBACK').catch(() => undefined);
        throw err;
      } finally {
        client.release();
      }
    },

    async conversationsWithUnsent(olderThanMs, limit) {
      const { rows } = await pool.query<{ conversation_id: string }>(
        `SELECT DISTINCT conversation_id FROM outbox
          WHERE sent_at IS NULL AND created_at <= now() - ($1::double precision * interval '1 millisecond') LIMIT $2`,
        [olderThanMs, limit],
      );
      return rows.map((r) => r.conversation_id);
    },

    async deleteSent(retentionMs) {
      await pool.query("DELETE FROM outbox WHERE sent_at < now() - ($1::double precision * interval '1 millisecond')", [retentionMs]);
    },

    markSent: (ids) => markSentAlone(pool, ids),
  };
}
