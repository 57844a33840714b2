/**
 * The committing replica publishes its outbox rows at once, in bulk (publish-rows.ts), in commit
 * order per conversation, and marks them sent in batches; rows before its own that are not its own,
 * or its own failure, leave them all to the relay (docs/conversation.md, "The outbox").
 */
import type { Pool } from 'pg';
import type { Logger } from '@bedrock/platform/server';
import type { StoredOutboxRow } from '../store/outbox-row.ts';
import { createOutboxStore } from '../store/outbox-store.ts';
import { createKeyedChain } from '../keyed-chain.ts';
import type { PublishRows } from './publish-rows.ts';
import type { OutboxRelay } from './relay.ts';

export interface PublisherOptions {
  readonly pool: Pool;
  readonly publishRows: PublishRows;
  readonly relay: Pick<OutboxRelay, 'kick'>;
  readonly logger: Logger;
  /** How published rows are marked sent. Default: a statement of their own (the store's group commit carries them in its writes). */
  readonly markSent?: (ids: readonly string[]) => Promise<void>;
}

export interface OutboxPublisher {
  /**
   * Publishes rows just committed for `conversationId`; `unsentBefore` are the ids of its rows
   * that were unsent when the event was read. Resolves once they are out (or left to the
   * relay after a failure); never rejects.
   */
  publishCommitted(conversationId: string, unsentBefore: readonly string[], rows: readonly StoredOutboxRow[]): Promise<void>;
  /** Waits for publishes and marks in progress. */
  drain(): Promise<void>;
  /** Publishes nothing more (rows committed later are left to the relay, as after a crash); waits for what is in progress. */
  stop(): Promise<void>;
}

/** How long ids marked sent here are remembered (a read that predates the mark still counts them as ours). */
const SETTLED_MEMORY_MS = 10_000;

export function createOutboxPublisher(options: PublisherOptions): OutboxPublisher {
  const { publishRows, relay, logger } = options;
  const outbox = createOutboxStore(options.pool);
  const markSent = options.markSent ?? ((ids: readonly string[]) => outbox.markSent(ids));
  /** Published (or being published) by this replica, not yet marked sent. */
  const inFlight = new Set<string>();
  /** Marked sent by this replica recently: two generations, rotated every SETTLED_MEMORY_MS. */
  let settled = new Set<string>();
  let settledOld = new Set<string>();
  let rotatedAt = Date.now();
  /** Per conversation: its batches one after another, each told the last one's outcome (true: out directly or through the relay). */
  const chains = createKeyedChain<boolean>();
  /** Conversations with rows this replica failed to publish: the relay publishes them (and what follows) until it succeeds. */
  const behind = new Set<string>();
  let pendingMarks: string[] = [];
  let marking: Promise<void> | null = null;
  let stopped = false;

  const ours = (id: string) => inFlight.has(id) || settled.has(id) || settledOld.has(id);

  function remember(ids: readonly string[]): void {
    if (Date.now() - rotatedAt > SETTLED_MEMORY_MS) {
      settledOld = settled;
      settled = new Set();
      rotatedAt = Date.now();
    }
    for (const id of ids) {
      inFlight.delete(id);
      settled.add(id);
    }
  }

  /** Marks everything queued so far in one statement; the WAL flush is not waited for (a lost mark only re-publishes). */
  async function flushMarks(): Promise<void> {
    while (pendingMarks.length) {
      const ids = pendingMarks;
      pendingMarks = [];
      try {
        await markSent(ids);
        remember(ids);
      } catch (err) {
        // Unmarked rows are published again by the relay's sweep; harmless.
        logger.warn({ err, rows: ids.length }, 'marking outbox rows sent failed; the relay will publish them again');
        for (const id of ids) inFlight.delete(id);
      }
    }
  }

  function queueMarks(ids: readonly string[]): void {
    pendingMarks.push(...ids);
    if (marking) return; // the running flush takes them (it loops until nothing is pending)
    marking = new Promise<void>((resolve) => setImmediate(resolve)).then(flushMarks).finally(() => {
      marking = null;
      if (pendingMarks.length) queueMarks([]);
    });
  }

  async function drain(): Promise<void> {
    await Promise.allSettled(chains.pending());
    while (marking) await marking;
  }

  return {
    publishCommitted(conversationId, unsentBefore, rows) {
      if (stopped) return Promise.resolve();
      const ids = rows.map((r) => r.id);
      for (const id of ids) inFlight.add(id);
      const foreign = unsentBefore.some((id) => !ours(id));
      const link = chains.run(conversationId, async (previousOut) => {
        if (foreign || previousOut === false || behind.has(conversationId)) {
          // Rows before ours are not ours, or ours failed: the relay publishes them all, in order.
          for (const id of ids) inFlight.delete(id);
          const out = await relay.kick(conversationId);
          if (out) behind.delete(conversationId);
          else behind.add(conversationId);
          return out;
        }
        if (rows.length === 0) return true;
        try {
          await publishRows(rows);
        } catch (err) {
          logger.warn({ err, conversation_id: conversationId }, 'publishing effects failed; the relay will retry');
          for (const id of ids) inFlight.delete(id);
          behind.add(conversationId);
          return false;
        }
        queueMarks(ids);
        return true;
      });
      return link.then(() => undefined);
    },

    drain,

    async stop() {
      stopped = true;
      await drain();
    },
  };
}
