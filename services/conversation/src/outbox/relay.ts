/**
 * The outbox relay: the safety net behind the applier's own publishing (outbox/publisher.ts).
 * It publishes rows left unsent — by a replica that crashed between commit and publish, by a
 * publish that failed, or because another replica's rows of the same conversation were still
 * unsent when this one committed — and marks them sent.
 *
 * Rows of one conversation are published in order by one relay at a time (an advisory lock
 * per conversation), oldest first, so its notification stream never sees sequence n+1 before
 * n. Delivery is at least once, which is harmless: job ids de-duplicate, notifications have
 * fixed stream positions, and results that answer nothing are no-ops in the state machine.
 */
import type { Pool } from 'pg';
import type { Logger } from '@bedrock/platform/server';
import { outboxRowsFromDb, type StoredOutboxRow } from '../store/outbox-row.ts';
import type { PublishRows } from './publish-rows.ts';

/** Namespace of the per-conversation advisory locks (first key of the two-key form). */
export const RELAY_LOCK_SPACE = 0x6f7574; // "out"
/** How long a kick waits for another publisher of the same conversation before leaving the rows to the sweep. */
const KICK_LOCK_TIMEOUT_MS = 5000;

export interface RelayOptions {
  readonly pool: Pool;
  readonly publishRows: PublishRows;
  readonly logger: Logger;
  /** How often unsent rows are looked for. Default 500 ms. */
  readonly pollIntervalMs?: number;
  /**
   * The periodic sweeps after the first leave rows younger than this to the replica that
   * committed them (it publishes them itself, within milliseconds). Default 2000 ms.
   */
  readonly graceMs?: number;
  /** Sent rows are deleted after this long. Default 1 h. */
  readonly retentionMs?: number;
}

export interface OutboxRelay {
  /**
   * Publishes a conversation's unsent rows now, in order, waiting for another relay holding
   * it. True when they are all out; false when that failed (the sweep retries).
   */
  kick(conversationId: string): Promise<boolean>;
  /** Publishes every unsent row (any conversation) now; returns the number published. */
  sweep(): Promise<number>;
  start(): void;
  stop(): Promise<void>;
}

interface DbRow {
  id: string;
  effect_id: string;
  conversation_id: string;
  kind: string;
  payload: unknown;
  created_at: Date;
}

export function createOutboxRelay(options: RelayOptions): OutboxRelay {
  const { pool, logger, publishRows } = options;
  const pollIntervalMs = options.pollIntervalMs ?? 500;
  const graceMs = options.graceMs ?? 2000;
  const retentionMs = options.retentionMs ?? 60 * 60 * 1000;
  let timer: NodeJS.Timeout | null = null;
  let stopped = false;
  let lastCleanup = 0;
  const inFlight = new Set<Promise<unknown>>();

  /**
   * `wait` (a kick): wait for whoever is publishing this conversation, then publish what is
   * left. The periodic sweep skips conversations another relay holds.
   */
  async function publishConversation(conversationId: string, wait = false): Promise<number> {
    const client = await pool.connect();
    let published = 0;
    try {
      await client.query('BEGIN');
      // Losing this transaction in a crash only means publishing its rows again, which is
      // harmless (see above): it need not wait for the WAL flush.
      await client.query('SET LOCAL synchronous_commit = off');
      if (wait) await client.query(`SET LOCAL lock_timeout = '${KICK_LOCK_TIMEOUT_MS}ms'`);
      const lock = await client.query<{ ok: boolean }>(
        wait
          ? 'SELECT true AS ok FROM pg_advisory_xact_lock($1, hashtext($2))'
          : 'SELECT pg_try_advisory_xact_lock($1, hashtext($2)) AS ok',
        [RELAY_LOCK_SPACE, conversationId],
      );
      if (!lock.rows[0]?.ok) {
        await client.query('ROLLBACK');
        return 0;
      }
      const { rows } = await client.query<DbRow>(
        'SELECT id, effect_id, conversation_id, kind, payload, created_at FROM outbox WHERE conversation_id = $1 AND sent_at IS NULL ORDER BY id',
        [conversationId],
      );
      const batch: StoredOutboxRow[] = [];
      const malformed: string[] = [];
      for (const r of rows) {
        try {
          // One table row may hold the effects of one event (outbox-row.ts): they go out in their order.
          for (const row of outboxRowsFromDb(r.effect_id, r.conversation_id, r.kind, r.payload)) {
            batch.push({ id: r.id, createdAt: r.created_at.getTime(), row });
          }
        } catch (err) {
          // Never publishable: marked sent so it does not hold back the rows after it.
          logger.error({ err, conversation_id: conversationId, outbox_id: r.id }, 'malformed outbox row skipped');
          malformed.push(r.id);
        }
      }
      await publishRows(batch);
      const sent = [...new Set(batch.map((r) => r.id)), ...malformed];
      if (sent.length) await client.query('UPDATE outbox SET sent_at = now() WHERE id = ANY($1::bigint[])', [sent]);
      await client.query('COMMIT');
      published = batch.length + malformed.length;
    } catch (err) {
      await client.query('ROLLBACK').catch(() => undefined);
      throw err;
    } finally {
      client.release();
    }
    return published;
  }

  function track<T>(p: Promise<T>): Promise<T> {
    inFlight.add(p);
    void p.finally(() => inFlight.delete(p)).catch(() => undefined);
    return p;
  }

  /** `olderThanMs`: only rows at least this old (0: all). */
  async function sweep(olderThanMs = 0): Promise<number> {
    const { rows } = await pool.query<{ conversation_id: string }>(
      `SELECT DISTINCT conversation_id FROM outbox
        WHERE sent_at IS NULL AND created_at <= now() - ($1::double precision * interval '1 millisecond') LIMIT 200`,
      [olderThanMs],
    );
    let total = 0;
    for (const { conversation_id } of rows) {
      try {
        total += await publishConversation(conversation_id);
      } catch (err) {
        logger.warn({ err, conversation_id }, 'outbox publish failed; will retry');
      }
    }
    if (Date.now() - lastCleanup > 60_000) {
      lastCleanup = Date.now();
      await pool.query("DELETE FROM outbox WHERE sent_at < now() - ($1::double precision * interval '1 millisecond')", [retentionMs]);
    }
    return total;
  }

  /** The first sweep after start takes everything (a replica that died left it); later ones leave fresh rows alone. */
  async function loop(first = false): Promise<void> {
    if (stopped) return;
    try {
      await track(sweep(first ? 0 : graceMs));
    } catch (err) {
      logger.warn({ err }, 'outbox sweep failed');
    }
    if (!stopped) timer = setTimeout(() => void loop(), pollIntervalMs);
  }

  return {
    async kick(conversationId: string): Promise<boolean> {
      if (stopped) return false;
      try {
        await track(publishConversation(conversationId, true));
        return true;
      } catch (err) {
        // The periodic sweep publishes it later; the rows are committed already.
        logger.warn({ err, conversation_id: conversationId }, 'outbox publish failed; the sweep will retry');
        return false;
      }
    },
    sweep: () => track(sweep()),
    start() {
      stopped = false;
      void loop(true);
    },
    async stop() {
      stopped = true;
      if (timer) clearTimeout(timer);
      await Promise.allSettled([...inFlight]);
    },
  };
}
