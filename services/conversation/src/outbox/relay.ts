/**
 * The outbox relay: the safety net behind the applier's own publishing (outbox/publisher.ts).
 * It publishes rows left unsent, one conversation at a time under its advisory lock, oldest
 * first, and marks them sent; at least once (docs/conversation.md, "The outbox").
 */
import type { Pool } from 'pg';
import type { Logger } from '@bedrock/platform/server';
import { outboxRowsFromDb, type StoredOutboxRow } from '../store/outbox-row.ts';
import { createOutboxStore } from '../store/outbox-store.ts';
import type { PublishRows } from './publish-rows.ts';

/** How long a kick waits for another publisher of the same conversation before leaving the rows to the sweep. */
const KICK_LOCK_TIMEOUT_MS = 5000;
/** How many conversations one sweep publishes at most. */
const SWEEP_BATCH = 200;

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

export function createOutboxRelay(options: RelayOptions): OutboxRelay {
  const { logger, publishRows } = options;
  const outbox = createOutboxStore(options.pool);
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
    let published = 0;
    const locked = await outbox.publishUnsent(conversationId, wait ? KICK_LOCK_TIMEOUT_MS : undefined, async (rows) => {
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
      published = batch.length + malformed.length;
      return [...new Set(batch.map((r) => r.id)), ...malformed];
    });
    return locked ? published : 0;
  }

  function track<T>(p: Promise<T>): Promise<T> {
    inFlight.add(p);
    void p.finally(() => inFlight.delete(p)).catch(() => undefined);
    return p;
  }

  /** `olderThanMs`: only rows at least this old (0: all). */
  async function sweep(olderThanMs = 0): Promise<number> {
    const conversations = await outbox.conversationsWithUnsent(olderThanMs, SWEEP_BATCH);
    let total = 0;
    for (const conversation_id of conversations) {
      try {
        total += await publishConversation(conversation_id);
      } catch (err) {
        logger.warn({ err, conversation_id }, 'outbox publish failed; will retry');
      }
    }
    if (Date.now() - lastCleanup > 60_000) {
      lastCleanup = Date.now();
      await outbox.deleteSent(retentionMs);
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
