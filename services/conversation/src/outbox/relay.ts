/**
 * The outbox relay: publishes rows written by applyEvent after their transaction committed,
 * then marks them sent. Delivery is at least once (a crash between publish and mark means a
 * second publish), which is harmless: job ids de-duplicate, notifications have fixed stream
 * positions, and results that answer nothing are no-ops in the state machine.
 *
 * Rows of one conversation are published in order by one replica at a time (an advisory
 * lock per conversation), so its notification stream never sees sequence n+1 before n.
 */
import { fromJson, type DescMessage, type JsonValue } from '@bufbuild/protobuf';
import type { Pool } from 'pg';
import {
  CancelSignalSchema,
  ConversationEventJobSchema,
  ConversationEventSchema,
  LlmRequestJobSchema,
  ToolExecJobSchema,
} from '@bedrock/contracts';
import type { Producer, Transport } from '@bedrock/platform';
import type { Logger } from '@bedrock/platform/server';
import type { JobSchemaName, OutboxRow } from './effects-to-outbox.ts';

const SCHEMAS: Record<JobSchemaName, DescMessage> = {
  LlmRequestJob: LlmRequestJobSchema,
  ToolExecJob: ToolExecJobSchema,
  ConversationEventJob: ConversationEventJobSchema,
};

/** Namespace of the per-conversation advisory locks (first key of the two-key form). */
const RELAY_LOCK_SPACE = 0x6f7574; // "out"
/** How long a kick waits for another publisher of the same conversation before leaving the rows to the sweep. */
const KICK_LOCK_TIMEOUT_MS = 5000;

export interface RelayOptions {
  readonly pool: Pool;
  readonly transport: Transport;
  readonly logger: Logger;
  /** How often unsent rows are looked for, besides the kicks after each commit. Default 500 ms. */
  readonly pollIntervalMs?: number;
  /** Sent rows are deleted after this long. Default 1 h. */
  readonly retentionMs?: number;
  /** Called after each published row (metrics). */
  readonly onPublished?: (kind: OutboxRow['kind'], lagMs: number) => void;
}

export interface OutboxRelay {
  /** Publishes a conversation's unsent rows now (after a commit); resolves when done. */
  kick(conversationId: string): Promise<void>;
  /** Publishes everything unsent (any conversation); returns the number of rows published. */
  sweep(): Promise<number>;
  start(): void;
  stop(): Promise<void>;
}

interface DbRow {
  id: string;
  kind: OutboxRow['kind'];
  payload: OutboxRow['payload'];
  created_at: Date;
}

export function createOutboxRelay(options: RelayOptions): OutboxRelay {
  const { pool, transport, logger } = options;
  const pollIntervalMs = options.pollIntervalMs ?? 500;
  const retentionMs = options.retentionMs ?? 60 * 60 * 1000;
  const producers = new Map<string, Producer<DescMessage>>();
  let timer: NodeJS.Timeout | null = null;
  let stopped = false;
  let lastCleanup = 0;
  const inFlight = new Set<Promise<unknown>>();

  function producer(queue: string, schema: JobSchemaName): Producer<DescMessage> {
    const key = `${queue}\u0000${schema}`;
    let p = producers.get(key);
    if (!p) {
      p = transport.queues.producer(queue, SCHEMAS[schema]);
      producers.set(key, p);
    }
    return p;
  }

  async function publish(row: DbRow): Promise<void> {
    switch (row.kind) {
      case 'job': {
        const p = row.payload as Extract<OutboxRow, { kind: 'job' }>['payload'];
        const schema = SCHEMAS[p.schema];
        // A row re-published late keeps its original due time.
        const delayMs = Math.max(0, p.delayMs - (Date.now() - row.created_at.getTime()));
        await producer(p.queue, p.schema).add(p.jobId, fromJson(schema, p.message as JsonValue), { delayMs });
        return;
      }
      case 'remove_job': {
        const p = row.payload as Extract<OutboxRow, { kind: 'remove_job' }>['payload'];
        await producer(p.queue, 'ConversationEventJob').remove(p.jobId);
        return;
      }
      case 'cancel': {
        const p = row.payload as Extract<OutboxRow, { kind: 'cancel' }>['payload'];
        await transport.cancels.publish(fromJson(CancelSignalSchema, p.message as JsonValue));
        return;
      }
      case 'notification': {
        const p = row.payload as Extract<OutboxRow, { kind: 'notification' }>['payload'];
        await transport.streams.appendDurable(fromJson(ConversationEventSchema, p.message as JsonValue));
        return;
      }
    }
  }

  /**
   * `wait` (after a commit): wait for whoever is publishing this conversation, then publish
   * what is left. That publisher may have read the unsent rows before this commit, so skipping
   * would leave the new rows for the next poll. The periodic sweep skips busy conversations.
   */
  async function publishConversation(conversationId: string, wait = false): Promise<number> {
    const client = await pool.connect();
    let published = 0;
    try {
      await client.query('BEGIN');
      // Losing this transaction in a crash only means publishing its rows again, which is
      // harmless (see above): it need not wait for the WAL flush. One fsync per event, not two.
      await client.query('SET LOCAL synchronous_commit = off');
      if (wait) await client.query(`SET LOCAL lock_timeout = '${KICK_LOCK_TIMEOUT_MS}ms'`);
      const lock = await client.query<{ ok: boolean }>(
        wait ? 'SELECT true AS ok FROM pg_advisory_xact_lock($1, hashtext($2))' : 'SELECT pg_try_advisory_xact_lock($1, hashtext($2)) AS ok',
        [RELAY_LOCK_SPACE, conversationId],
      );
      if (!lock.rows[0]?.ok) {
        // The sweep: another replica is publishing this conversation right now; a later sweep takes what it leaves.
        await client.query('ROLLBACK');
        return 0;
      }
      const { rows } = await client.query<DbRow>(
        'SELECT id, kind, payload, created_at FROM outbox WHERE conversation_id = $1 AND sent_at IS NULL ORDER BY id',
        [conversationId],
      );
      const sent: string[] = [];
      let failure: unknown = null;
      for (const row of rows) {
        try {
          await publish(row);
        } catch (err) {
          failure = err; // stop here: later rows must not overtake this one
          break;
        }
        sent.push(row.id);
        options.onPublished?.(row.kind, Date.now() - row.created_at.getTime());
      }
      if (sent.length) await client.query('UPDATE outbox SET sent_at = now() WHERE id = ANY($1::bigint[])', [sent]);
      await client.query('COMMIT');
      published = sent.length;
      if (failure) throw failure;
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

  async function sweep(): Promise<number> {
    const { rows } = await pool.query<{ conversation_id: string }>(
      'SELECT DISTINCT conversation_id FROM outbox WHERE sent_at IS NULL LIMIT 200',
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

  async function loop(): Promise<void> {
    if (stopped) return;
    try {
      await track(sweep());
    } catch (err) {
      logger.warn({ err }, 'outbox sweep failed');
    }
    if (!stopped) timer = setTimeout(() => void loop(), pollIntervalMs);
  }

  return {
    async kick(conversationId: string): Promise<void> {
      if (stopped) return;
      try {
        await track(publishConversation(conversationId, true));
      } catch (err) {
        // The periodic sweep publishes it later; the caller's transaction is committed already.
        logger.warn({ err, conversation_id: conversationId }, 'outbox publish failed; the sweep will retry');
      }
    },
    sweep: () => track(sweep()),
    start() {
      stopped = false;
      void loop();
    },
    async stop() {
      stopped = true;
      if (timer) clearTimeout(timer);
      await Promise.allSettled([...inFlight]);
    },
  };
}
