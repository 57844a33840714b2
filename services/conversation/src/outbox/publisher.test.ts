import { describe, expect, it } from '@jest/globals';
import type { Pool } from 'pg';
import { createLogger } from '@bedrock/platform/server';
import type { StoredOutboxRow } from '../store/outbox-row.ts';
import { createOutboxPublisher } from './publisher.ts';

const logger = createLogger({ service: 'publisher-test', level: 'fatal' });

function row(id: string, conversationId = 'c1', sequence = Number(id)): StoredOutboxRow {
  return {
    id,
    createdAt: Date.now(),
    row: { effectId: `${conversationId}/n/${sequence}`, conversationId, kind: 'notification', payload: { sequence, message: {} } },
  };
}

function harness(options: { failPublish?: (rows: readonly StoredOutboxRow[]) => boolean; kick?: () => boolean } = {}) {
  const published: string[][] = [];
  const marked: string[][] = [];
  const kicked: string[] = [];
  const gates: (() => void)[] = [];
  let hold = false;
  const pool = {
    async query(config: { values: [string[]] }) {
      marked.push([...config.values[0]]);
      return { rows: [], rowCount: config.values[0].length };
    },
  } as unknown as Pool;
  const publisher = createOutboxPublisher({
    pool,
    logger,
    async publishRows(rows) {
      if (hold) await new Promise<void>((resolve) => gates.push(resolve));
      if (options.failPublish?.(rows)) throw new Error('redis is away');
      published.push(rows.map((r) => r.id));
    },
    relay: {
      async kick(conversationId) {
        kicked.push(conversationId);
        return options.kick ? options.kick() : true;
      },
    },
  });
  return {
    publisher,
    published,
    marked,
    kicked,
    holdPublishes: () => (hold = true),
    release: () => {
      hold = false;
      gates.splice(0).forEach((open) => open());
    },
  };
}

describe('outbox publisher', () => {
  it('publishes its own rows at once and marks those of one tick in one statement', async () => {
    const h = harness();
    await Promise.all([
      h.publisher.publishCommitted('c1', [], [row('1'), row('2')]),
      h.publisher.publishCommitted('c2', [], [row('3', 'c2')]),
    ]);
    await h.publisher.drain();
    expect(h.published).toEqual([['1', '2'], ['3']]);
    expect(h.marked).toEqual([['1', '2', '3']]);
    expect(h.kicked).toEqual([]);
  });

  it('counts rows it published (or is publishing) as its own, and hands the batch to the relay when an earlier row is not', async () => {
    const h = harness();
    await h.publisher.publishCommitted('c1', [], [row('1')]);
    // Row 1 is ours (marked or in flight): the next batch goes out directly.
    await h.publisher.publishCommitted('c1', ['1'], [row('2')]);
    expect(h.kicked).toEqual([]);
    // Row 7 was written by another replica and is still unsent: the relay publishes 7 and 8 in order.
    await h.publisher.publishCommitted('c1', ['7'], [row('8')]);
    expect(h.kicked).toEqual(['c1']);
    expect(h.published).toEqual([['1'], ['2']]);
  });

  it("keeps one conversation's batches in commit order while an earlier publish is slow", async () => {
    const h = harness();
    h.holdPublishes();
    const first = h.publisher.publishCommitted('c1', [], [row('1')]);
    const second = h.publisher.publishCommitted('c1', ['1'], [row('2')]);
    await new Promise((r) => setImmediate(r));
    expect(h.published).toEqual([]);
    h.release();
    await Promise.all([first, second]);
    expect(h.published).toEqual([['1'], ['2']]);
  });

  it('after a failed publish sends the conversation through the relay until the relay succeeds', async () => {
    let failing = true;
    let relayWorks = false;
    const h = harness({ failPublish: () => failing, kick: () => relayWorks });
    await h.publisher.publishCommitted('c1', [], [row('1')]);
    expect(h.published).toEqual([]);
    failing = false;
    // Row 1 never went out: row 2 must not overtake it.
    await h.publisher.publishCommitted('c1', [], [row('2')]);
    expect(h.kicked).toEqual(['c1']);
    expect(h.published).toEqual([]);
    await h.publisher.publishCommitted('c1', [], [row('3')]);
    expect(h.kicked).toEqual(['c1', 'c1']);
    relayWorks = true;
    await h.publisher.publishCommitted('c1', [], [row('4')]);
    expect(h.kicked).toEqual(['c1', 'c1', 'c1']);
    // The relay caught up: direct again.
    await h.publisher.publishCommitted('c1', [], [row('5')]);
    expect(h.published).toEqual([['5']]);
  });

  it('publishes nothing after stop (a replica that dies after its commits)', async () => {
    const h = harness();
    await h.publisher.stop();
    await h.publisher.publishCommitted('c1', [], [row('1')]);
    expect(h.published).toEqual([]);
    expect(h.kicked).toEqual([]);
  });
});
