/**
 * Group commit (docs/conversation.md, "Group commit"): the writes of applied events of different
 * conversations that arrive while earlier ones are being written go together in the next
 * statement: ONE statement, so one round trip, one commit and one WAL flush for all of them.
 * Each conversation's write is still all or nothing (its own revision check gates its messages,
 * outbox, audit and spend rows), and a batch holds at most one write per conversation.
 */
import type { Pool } from 'pg';
import type { AppliedWrite, ConversationRecord } from './records.ts';
import { ADD_TO_DAILY_SPEND, afterWrite, messageValues, noBudgetOf, type WrittenRow } from './applied-rows.ts';
import { packOutboxRows } from './outbox-row.ts';
import { auditRowValues } from './audit-store.ts';

export type WriteResult = { record: ConversationRecord; outboxIds: string[] } | null;

export interface GroupCommitOptions {
  readonly pool: Pool;
  /**
   * One write alone, in a statement of its own (apply-writes.ts), marking `markIds` sent in it: a
   * batch of one is written this way, and each write of a batch whose statement failed, so one
   * bad write fails alone.
   */
  readonly single: (record: ConversationRecord, write: AppliedWrite, markIds?: readonly string[]) => Promise<WriteResult>;
  /** Statements in flight at once (each on a connection of its own). Default 2: one is written while the next gathers. */
  readonly maxInFlight?: number;
  /** Writes in one statement at most. Default 64. */
  readonly maxBatch?: number;
  /** Called with the number of writes of each statement. */
  readonly onBatch?: (writes: number) => void;
  /** Marks outbox rows sent in a statement of their own (outbox-store.ts), for marks no write came to carry. */
  readonly markAlone: (ids: readonly string[]) => Promise<void>;
  /** How long marks wait for a write to ride with before they go alone. Default 10 ms. */
  readonly markDelayMs?: number;
}

export interface GroupCommit {
  /** Writes one applied event with the others that are waiting; resolves as writeApplied does. */
  write(record: ConversationRecord, write: AppliedWrite): Promise<WriteResult>;
  /**
   * Marks published outbox rows sent in the next write's statement (no commit of their own), or
   * alone when no write comes within `markDelayMs`. Resolves once they are marked; rejects if
   * marking failed (a lost mark only means the relay publishes the rows again).
   */
  markSent(ids: readonly string[]): Promise<void>;
}

/**
 * The batch as JSON documents: `w` one entry per conversation, then its messages, outbox rows
 * (each naming the conversation that wrote it, `writer`, and its place in the batch, `n`) and
 * audit rows. The conditional UPDATE decides per conversation; every insert joins on its result.
 * Spend is summed per owner and day first (one upsert may not touch a row twice), in key order,
 * as rows are locked in id order, so two replicas' batches do not deadlock over them. `k` marks
 * rows published since the last statement sent (the publisher's marks ride along; a row a relay
 * holds locked is skipped: that relay marks it).
 */
const WRITE_BATCH = `WITH w AS (
  SELECT * FROM jsonb_to_recordset($1::jsonb) AS w(id text, expected bigint, state jsonb, kind text, mode text, version bigint,
         notify_seq bigint, message_seq bigint, touch boolean, title text, cost bigint, day date, release boolean,
         input bigint, output bigint, cache_creation bigint, cache_read bigint, no_budget boolean)
), c AS (
  UPDATE conversations AS t
     SET state = w.state, state_kind = w.kind, mode = w.mode, version = w.version, notify_seq = w.notify_seq, message_seq = w.message_seq,
         revision = t.revision + 1, updated_at = now(), state_updated_at = CASE WHEN w.touch THEN now() ELSE t.state_updated_at END,
         title = COALESCE(w.title, t.title), title_source = CASE WHEN w.title IS NULL THEN t.title_source ELSE 'message' END,
         cost_micros = t.cost_micros + w.cost
    FROM w
   WHERE t.id = w.id AND t.revision = w.expected AND (NOT w.no_budget OR ${noBudgetOf('t.owner_id')})
  RETURNING t.id, t.revision, t.updated_at, t.state_updated_at, t.owner_id, w.cost, w.day, w.release,
            w.input, w.output, w.cache_creation, w.cache_read
), s AS (
  INSERT INTO user_daily_spend (user_id, day, cost_micros, input_tokens, output_tokens, cache_creation_tokens, cache_read_tokens)
  SELECT owner_id, day, sum(cost)::bigint, sum(input)::bigint, sum(output)::bigint, sum(cache_creation)::bigint, sum(cache_read)::bigint
    FROM c WHERE cost > 0 OR input + output + cache_creation + cache_read > 0
   GROUP BY owner_id, day ORDER BY owner_id, day
  ${ADD_TO_DAILY_SPEND}
), m AS (
  INSERT INTO messages (id, conversation_id, sequence, message_type, actor_kind, content, display_data, usage_data,
                        stop_reason, stop_explanation, created_at)
  SELECT r.id, c.id, r.sequence, r.message_type, r.actor_kind, r.content, r.display_data, r.usage_data,
         r.stop_reason, r.stop_explanation, r.created_at
    FROM jsonb_to_recordset($2::jsonb) AS r(writer text, id text, sequence bigint, message_type text, actor_kind text,
                                          content jsonb, display_data jsonb, usage_data jsonb, stop_reason text,
                                          stop_explanation text, created_at timestamptz)
    JOIN c ON c.id = r.writer
), ob AS (
  SELECT * FROM jsonb_to_recordset($3::jsonb) AS r(n int, writer text, effect_id text, conversation_id text, kind text, payload jsonb)
), o AS (
  INSERT INTO outbox (effect_id, conversation_id, kind, payload)
  SELECT ob.effect_id, ob.conversation_id, ob.kind, ob.payload FROM ob JOIN c ON c.id = ob.writer ORDER BY ob.n
  ON CONFLICT (effect_id) DO NOTHING
  RETURNING id, effect_id
), a AS (
  INSERT INTO audit_events (user_id, action, conversation_id, details)
  SELECT r.user_id, r.action, r.conversation_id, r.details
    FROM jsonb_to_recordset($4::jsonb) AS r(writer text, user_id text, action text, conversation_id text, details jsonb)
    JOIN c ON c.id = r.writer
), b AS (
  DELETE FROM budget_reservations USING c WHERE budget_reservations.conversation_id = c.id AND c.release
), k AS (
  UPDATE outbox SET sent_at = now()
   WHERE id IN (SELECT id FROM outbox WHERE id = ANY($5::bigint[]) FOR UPDATE SKIP LOCKED)
)
SELECT c.id, c.revision, c.updated_at, c.state_updated_at,
       ARRAY(SELECT o.id::text FROM o JOIN ob ON ob.effect_id = o.effect_id WHERE ob.writer = c.id ORDER BY o.id) AS outbox_ids
  FROM c`;

interface Pending {
  readonly record: ConversationRecord;
  readonly write: AppliedWrite;
  readonly resolve: (result: WriteResult) => void;
  readonly reject: (err: unknown) => void;
}

export function createGroupCommit(options: GroupCommitOptions): GroupCommit {
  const { pool, single } = options;
  const maxInFlight = options.maxInFlight ?? 2;
  const maxBatch = options.maxBatch ?? 64;
  const waiting: Pending[] = [];
  let inFlight = 0;
  /** Conversations with a write in flight: a later write of one waits for it, so each conversation's writes stay in order. */
  const writing = new Set<string>();
  /** Marks waiting for a statement to carry them, and who waits for them. */
  let marks: { ids: string[]; done: { resolve: () => void; reject: (err: unknown) => void }[] } = { ids: [], done: [] };
  let markTimer: ReturnType<typeof setTimeout> | null = null;
  const markDelayMs = options.markDelayMs ?? 10;

  /** The marks waiting now, taken by the statement that carries them. */
  function takeMarks(): typeof marks {
    const taken = marks;
    marks = { ids: [], done: [] };
    if (markTimer) clearTimeout(markTimer);
    markTimer = null;
    return taken;
  }

  function settleMarks(taken: typeof marks, err?: unknown): void {
    for (const d of taken.done) {
      if (err === undefined) d.resolve();
      else d.reject(err);
    }
  }

  /** Marks no statement carried: in one of their own. */
  function markAlone(taken: typeof marks): void {
    if (taken.ids.length === 0) return;
    options.markAlone(taken.ids).then(
      () => settleMarks(taken),
      (err: unknown) => settleMarks(taken, err),
    );
  }

  /** The next batch: the oldest waiting writes, one per conversation and none of a conversation being written. */
  function take(): Pending[] {
    const batch: Pending[] = [];
    const skipped = new Set<string>();
    for (let i = 0; i < waiting.length && batch.length < maxBatch;) {
      const p = waiting[i]!;
      if (writing.has(p.write.id) || skipped.has(p.write.id)) {
        skipped.add(p.write.id);
        i++;
        continue;
      }
      writing.add(p.write.id);
      batch.push(p);
      waiting.splice(i, 1);
    }
    return batch;
  }

  function pump(): void {
    while (inFlight < maxInFlight && waiting.length > 0) {
      const batch = take();
      if (batch.length === 0) return;
      options.onBatch?.(batch.length);
      inFlight++;
      void run(batch).finally(() => {
        for (const p of batch) writing.delete(p.write.id);
        inFlight--;
        pump();
      });
    }
  }

  async function run(batch: Pending[]): Promise<void> {
    const carried = takeMarks();
    if (batch.length === 1) {
      const [p] = batch as [Pending];
      try {
        p.resolve(await single(p.record, p.write, carried.ids));
        settleMarks(carried);
      } catch (err) {
        markAlone(carried);
        p.reject(err);
      }
      return;
    }
    let written: Map<string, WrittenRow>;
    const rows = batch.map((p) => packOutboxRows(p.write.outbox));
    try {
      written = await writeBatch(batch, rows, carried.ids);
    } catch {
      // A deadlock with another replica's batch, or one write the database refuses: each alone,
      // so only a write that fails by itself fails; the marks alone too.
      markAlone(carried);
      await Promise.all(batch.map((p) => single(p.record, p.write).then(p.resolve, p.reject)));
      return;
    }
    settleMarks(carried);
    batch.forEach((p, i) => {
      const row = written.get(p.write.id);
      p.resolve(row ? afterWrite(p.record, p.write, row, rows[i]!.holder, rows[i]!.packed.length) : null);
    });
  }

  async function writeBatch(
    batch: readonly Pending[],
    rows: ReturnType<typeof packOutboxRows>[],
    markIds: readonly string[],
  ): Promise<Map<string, WrittenRow>> {
    // Rows are locked in the order of `w`: by id, the same order on every replica.
    const order = batch.map((_, i) => i).sort((a, b) => (batch[a]!.write.id < batch[b]!.write.id ? -1 : 1));
    const writes: unknown[] = [];
    const messages: unknown[] = [];
    const outbox: unknown[] = [];
    const audit: unknown[] = [];
    for (const i of order) {
      const { write } = batch[i]!;
      writes.push({
        id: write.id,
        expected: write.expectedRevision,
        state: write.state,
        kind: write.state.phase.kind,
        mode: write.state.mode,
        version: write.state.seq,
        notify_seq: write.notifySeq,
        message_seq: write.messageSeq,
        touch: write.touchState,
        title: write.title,
        cost: write.costMicros,
        day: write.spendDay,
        release: write.releaseReservation,
        no_budget: write.onlyWithoutBudget ?? false,
        input: write.tokens.input,
        output: write.tokens.output,
        cache_creation: write.tokens.cacheCreation,
        cache_read: write.tokens.cacheRead,
      });
      for (const m of write.messages) messages.push({ writer: write.id, ...messageValues(m) });
      for (const row of rows[i]!.packed)
        outbox.push({
          n: outbox.length,
          writer: write.id,
          effect_id: row.effectId,
          conversation_id: row.conversationId,
          kind: row.kind,
          payload: row.payload,
        });
      for (const a of write.audit) audit.push({ writer: write.id, ...auditRowValues(a) });
    }
    const { rows: result } = await pool.query<WrittenRow & { id: string }>({
      name: 'bedrock-write-batch',
      text: WRITE_BATCH,
      values: [JSON.stringify(writes), JSON.stringify(messages), JSON.stringify(outbox), JSON.stringify(audit), markIds],
    });
    return new Map(result.map((r) => [r.id, r]));
  }

  return {
    write(record, write) {
      return new Promise<WriteResult>((resolve, reject) => {
        waiting.push({ record, write, resolve, reject });
        pump();
      });
    },

    markSent(ids) {
      if (ids.length === 0) return Promise.resolve();
      return new Promise<void>((resolve, reject) => {
        marks.ids.push(...ids);
        marks.done.push({ resolve, reject });
        markTimer ??= setTimeout(() => markAlone(takeMarks()), markDelayMs);
      });
    },
  };
}
