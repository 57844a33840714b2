/**
 * Group commit against a real Postgres: writes of several conversations share one statement,
 * each still all or nothing on its own revision, and one write the database refuses fails alone.
 */
import { afterAll, beforeAll, describe, expect, it, jest } from '@jest/globals';
import pg from 'pg';
import { createTestDatabase, type TestDatabase } from '@bedrock/testkit/database';
import { initialState, makeContext } from '../core/index.ts';
import { migrate } from '../db/migrate.ts';
import { createConversationStore, type ConversationStore } from './conversation-store.ts';
import type { AppliedWrite, ConversationRecord } from './records.ts';
import { NO_TOKENS } from './records.ts';

let db: TestDatabase;
let pool: pg.Pool;
let store: ConversationStore;
/** The writes of each statement, as the `bedrock_write_batch_size` metric sees them. */
const sizes: number[] = [];

beforeAll(async () => {
  db = await createTestDatabase('group_commit');
  pool = new pg.Pool({ connectionString: db.url, max: 4 });
  await migrate(pool);
  store = createConversationStore({ pool, groupCommit: { onBatch: (writes) => sizes.push(writes) } });
});
afterAll(async () => {
  await pool?.end();
  await db?.drop();
});

let serial = 0;
async function conversation(ownerId = 'alice'): Promise<ConversationRecord> {
  const id = `gc-${++serial}`;
  const context = makeContext({ conversationId: id, sandboxAvailable: false });
  return store.create({
    id,
    ownerId,
    slug: id,
    cwd: '/tmp',
    model: 'test-model',
    sandboxAvailable: false,
    contextWindow: 1000,
    state: initialState(context),
  });
}

/** A write that adds one user message, one notification and (with `cost`) spend, from `record` as read. */
function writeOf(record: ConversationRecord, text: string, cost = 0): AppliedWrite {
  const seq = record.messageSeq + 1;
  const notify = record.notifySeq + 1;
  return {
    id: record.id,
    expectedRevision: record.revision,
    state: { ...record.state, seq: record.state.seq + 1 },
    notifySeq: notify,
    messageSeq: seq,
    touchState: true,
    messages: [
      {
        id: `${record.id}/m/${seq}`,
        conversationId: record.id,
        sequence: seq,
        type: 'user',
        content: [{ type: 'text', text }],
        usage: null,
        stopReason: null,
        stopExplanation: '',
        createdAt: new Date(),
      },
    ],
    outbox: [
      {
        effectId: `${record.id}/n/${notify}`,
        conversationId: record.id,
        kind: 'notification',
        payload: { sequence: notify, message: { text } },
      },
      {
        effectId: `${record.id}/j/${notify}`,
        conversationId: record.id,
        kind: 'remove_job',
        payload: { queue: 'q', jobId: `${record.id}-${notify}` },
      },
    ],
    title: null,
    audit: [{ userId: record.ownerId, action: 'mode_downgraded', conversationId: record.id, details: { text } }],
    costMicros: cost,
    spendDay: '2026-11-28',
    tokens: cost ? { input: 10, output: 1, cacheCreation: 0, cacheRead: 0 } : NO_TOKENS,
    releaseReservation: false,
  };
}

/** Counts the statements of one name (the batch's by default) sent until `stop`. */
function countBatches(name = 'bedrock-write-batch'): { stop(): number } {
  const query = jest.spyOn(pool, 'query');
  return {
    stop() {
      const n = query.mock.calls.filter(([q]) => (q as { name?: string }).name === name).length;
      query.mockRestore();
      return n;
    },
  };
}

describe('group commit', () => {
  it('writes several conversations in one statement, each with its own rows and outbox ids', async () => {
    // Two statements in flight at once: of five writes at once, the last three share one.
    const records = await Promise.all([
      conversation('bob'),
      conversation('bob'),
      conversation('carol'),
      conversation('dave'),
      conversation('dave'),
    ]);
    const batches = countBatches();
    try {
      // The first write goes alone; the rest arrive while it is in flight and share the next statements.
      const results = await Promise.all(records.flatMap((r) => [store.writeApplied(r, writeOf(r, `hi ${r.id}`, 1000))]));
      const more = await Promise.all(
        records.map((r, i) => store.writeApplied(results[i]!.record, writeOf(results[i]!.record, 'again', 500))),
      );
      expect(batches.stop()).toBeGreaterThanOrEqual(1);
      expect(Math.max(...sizes)).toBeGreaterThanOrEqual(2);
      for (const [i, r] of records.entries()) {
        const first = results[i]!;
        const second = more[i]!;
        expect(first.record.revision).toBe(r.revision + 1);
        expect(second.record.revision).toBe(r.revision + 2);
        expect(second.record.costMicros).toBe(1500);
        // One table row per event holds both effects: both effects name its id.
        for (const written of [first, second]) {
          expect(written.outboxIds).toHaveLength(2);
          expect(written.outboxIds[0]).toBe(written.outboxIds[1]);
          const { rows } = await pool.query<{ conversation_id: string; effect_id: string }>(
            'SELECT conversation_id, effect_id FROM outbox WHERE id = $1',
            [written.outboxIds[0]],
          );
          expect(rows[0]!.conversation_id).toBe(r.id);
        }
        const stored = await store.get(r.id);
        expect(stored!.revision).toBe(r.revision + 2);
        expect(stored!.messageSeq).toBe(2);
        const { rows: messages } = await pool.query<{ sequence: string }>(
          'SELECT sequence FROM messages WHERE conversation_id = $1 ORDER BY sequence',
          [r.id],
        );
        expect(messages.map((m) => Number(m.sequence))).toEqual([1, 2]);
        const { rows: audit } = await pool.query('SELECT 1 FROM audit_events WHERE conversation_id = $1', [r.id]);
        expect(audit).toHaveLength(2);
      }
      // Spend of one owner's two conversations, summed (one upsert may not touch a row twice).
      const { rows: spend } = await pool.query<{ user_id: string; cost_micros: string; input_tokens: string }>(
        `SELECT user_id, cost_micros, input_tokens FROM user_daily_spend WHERE user_id IN ('bob', 'carol') AND day = '2026-11-28' ORDER BY user_id`,
      );
      expect(spend.map((s) => [s.user_id, Number(s.cost_micros), Number(s.input_tokens)])).toEqual([
        ['bob', 3000, 40],
        ['carol', 1500, 20],
      ]);
      const { rows: dave } = await pool.query<{ cost_micros: string }>(`SELECT cost_micros FROM user_daily_spend WHERE user_id = 'dave'`);
      expect(dave.map((s) => Number(s.cost_micros))).toEqual([3000]);
    } finally {
      batches.stop();
    }
  });

  it('writes nothing for a conversation whose revision moved, and the others still', async () => {
    const [a, b, c] = await Promise.all([conversation(), conversation(), conversation()]);
    // The first two writes go alone (two statements in flight); the next two gather into one batch.
    const blocker = await conversation();
    const batches = countBatches();
    const stale = { ...b!, revision: b!.revision - 1 };
    const results = await Promise.all([
      store.writeApplied(blocker, writeOf(blocker, 'first')),
      store.writeApplied(a!, writeOf(a!, 'a')),
      store.writeApplied(stale, writeOf(stale, 'stale')),
      store.writeApplied(c!, writeOf(c!, 'c')),
    ]);
    expect(batches.stop()).toBe(1);
    expect(results[1]).not.toBeNull();
    expect(results[2]).toBeNull();
    expect(results[3]).not.toBeNull();
    expect((await store.get(b!.id))!.revision).toBe(b!.revision);
    const { rows } = await pool.query('SELECT 1 FROM outbox WHERE conversation_id = $1', [b!.id]);
    expect(rows).toHaveLength(0);
    const { rows: messages } = await pool.query('SELECT 1 FROM messages WHERE conversation_id = $1', [b!.id]);
    expect(messages).toHaveLength(0);
  });

  it('writes a write checked for "no budget" only for owners without one, alone and in a batch', async () => {
    await pool.query(
      `INSERT INTO user_limits (user_id, daily_budget_micros, updated_by) VALUES ('rich', 100, 'root'), ('zero', 0, 'root')`,
    );
    const [blocker, alone, free, rich, zero, richAgain] = await Promise.all([
      conversation(),
      conversation('rich'),
      conversation('erin'),
      conversation('rich'),
      conversation('zero'),
      conversation('rich'),
    ]);
    const checked = (r: ConversationRecord): AppliedWrite => ({ ...writeOf(r, 'llm'), onlyWithoutBudget: true });
    // Alone (its own statement): the owner's budget makes it miss.
    expect(await store.writeApplied(alone!, checked(alone!))).toBeNull();
    // In one batch: each decided on its own owner's limits.
    const batches = countBatches();
    const results = await Promise.all([
      store.writeApplied(blocker!, writeOf(blocker!, 'first')),
      store.writeApplied(free!, checked(free!)),
      store.writeApplied(rich!, checked(rich!)),
      store.writeApplied(zero!, checked(zero!)),
      store.writeApplied(richAgain!, writeOf(richAgain!, 'reserved first')),
    ]);
    expect(batches.stop()).toBeGreaterThanOrEqual(1);
    expect(results.map((r) => r !== null)).toEqual([true, true, false, true, true]);
    for (const r of [alone!, rich!]) {
      expect((await store.get(r.id))!.revision).toBe(r.revision);
      const { rows } = await pool.query('SELECT 1 FROM messages WHERE conversation_id = $1', [r.id]);
      expect(rows).toHaveLength(0);
    }
  });

  it('fails only the write the database refuses', async () => {
    const [a, b, c, blocker, earlier] = await Promise.all([conversation(), conversation(), conversation(), conversation(), conversation()]);
    await store.writeApplied(earlier!, writeOf(earlier!, 'earlier'));
    const bad = writeOf(b!, 'bad');
    // A message id that is taken already: its primary key refuses the insert, and so the batch's statement.
    const refused: AppliedWrite = { ...bad, messages: [{ ...bad.messages[0]!, id: `${earlier!.id}/m/1` }] };
    const batches = countBatches();
    const settled = await Promise.allSettled([
      store.writeApplied(blocker!, writeOf(blocker!, 'first')),
      store.writeApplied(a!, writeOf(a!, 'a')),
      store.writeApplied(b!, refused),
      store.writeApplied(c!, writeOf(c!, 'c')),
    ]);
    expect(batches.stop()).toBe(1);
    expect(settled.map((s) => s.status)).toEqual(['fulfilled', 'fulfilled', 'rejected', 'fulfilled']);
    expect((await store.get(a!.id))!.revision).toBe(a!.revision + 1);
    expect((await store.get(b!.id))!.revision).toBe(b!.revision);
    expect((await store.get(c!.id))!.revision).toBe(c!.revision + 1);
  });

  it('writes two events of one conversation in order, in separate statements', async () => {
    const a = await conversation();
    const first = writeOf(a, 'one');
    const afterFirst: ConversationRecord = {
      ...a,
      revision: a.revision + 1,
      messageSeq: 1,
      notifySeq: a.notifySeq + 1,
      state: first.state,
    };
    const [one, two] = await Promise.all([store.writeApplied(a, first), store.writeApplied(afterFirst, writeOf(afterFirst, 'two'))]);
    expect(one!.record.revision).toBe(a.revision + 1);
    expect(two!.record.revision).toBe(a.revision + 2);
  });

  it('marks published rows sent in the next write, or alone when none comes', async () => {
    const [a, b] = await Promise.all([conversation(), conversation()]);
    const written = (await store.writeApplied(a, writeOf(a, 'one')))!;
    const sentAt = async (id: string) =>
      (await pool.query<{ sent_at: Date | null }>('SELECT sent_at FROM outbox WHERE id = $1', [id])).rows[0]!.sent_at;
    expect(await sentAt(written.outboxIds[0]!)).toBeNull();
    // A write comes before the delay is up: the mark rides in its statement.
    const markStatements = countBatches('bedrock-mark-sent');
    const marked = store.markSent([written.outboxIds[0]!]);
    const next = await store.writeApplied(b, writeOf(b, 'two'));
    await marked;
    expect(markStatements.stop()).toBe(0);
    expect(await sentAt(written.outboxIds[0]!)).not.toBeNull();
    // No write comes: the mark goes alone.
    const alone = countBatches('bedrock-mark-sent');
    await store.markSent([next!.outboxIds[0]!]);
    expect(alone.stop()).toBe(1);
    expect(await sentAt(next!.outboxIds[0]!)).not.toBeNull();
  });
});
