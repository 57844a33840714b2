import { describe, expect, it } from '@jest/globals';
import { EFFECTS_KIND, MalformedOutboxRow, outboxRowFromDb, outboxRowsFromDb, packOutboxRows, type OutboxRow } from './outbox-row.ts';

describe('outboxRowFromDb', () => {
  it('checks each kind into the union', () => {
    expect(outboxRowFromDb('e1', 'c1', 'job', { queue: 'q', schema: 'ToolExecJob', jobId: 'j', delayMs: 0, message: { a: 1 } })).toEqual({
      effectId: 'e1',
      conversationId: 'c1',
      kind: 'job',
      payload: { queue: 'q', schema: 'ToolExecJob', jobId: 'j', delayMs: 0, message: { a: 1 } },
    });
    expect(outboxRowFromDb('e2', 'c1', 'remove_job', { queue: 'q', jobId: 'j' }).kind).toBe('remove_job');
    expect(outboxRowFromDb('e3', 'c1', 'cancel', { message: {} }).kind).toBe('cancel');
    expect(outboxRowFromDb('e4', 'c1', 'notification', { sequence: 4, message: {} }).kind).toBe('notification');
  });

  it('refuses what it cannot publish, naming the row and the field', () => {
    expect(() => outboxRowFromDb('e1', 'c1', 'job', { queue: 'q', schema: 'NoSuchJob', jobId: 'j', delayMs: 0, message: {} })).toThrow(
      new MalformedOutboxRow('outbox row e1: payload.schema is missing or of the wrong type'),
    );
    expect(() => outboxRowFromDb('e2', 'c1', 'notification', { message: {} })).toThrow(/e2: payload.sequence/);
    expect(() => outboxRowFromDb('e3', 'c1', 'telegram', {})).toThrow(/e3: unknown kind "telegram"/);
    expect(() => outboxRowFromDb('e4', 'c1', 'cancel', null)).toThrow(/e4: payload is not an object/);
  });
});

describe('one table row per event and conversation', () => {
  const rows: OutboxRow[] = [
    { effectId: 'n1', conversationId: 'c1', kind: 'notification', payload: { sequence: 7, kind: 'stateChanged', message: { a: 1 } } },
    {
      effectId: 'j1',
      conversationId: 'c1',
      kind: 'job',
      payload: { queue: 'q', schema: 'ToolExecJob', jobId: 'j', delayMs: 0, message: {} },
    },
    {
      effectId: 'p1',
      conversationId: 'parent',
      kind: 'job',
      payload: { queue: 'e', schema: 'ConversationEventJob', jobId: 'k', delayMs: 0, message: {} },
    },
    { effectId: 'x1', conversationId: 'c1', kind: 'cancel', payload: { message: {} } },
  ];

  it("packs an event's effects per conversation, and unpacks them as they were, in order", () => {
    const { packed, holder } = packOutboxRows(rows);
    expect(packed.map((p) => [p.effectId, p.conversationId, p.kind])).toEqual([
      ['n1+2', 'c1', EFFECTS_KIND],
      ['p1', 'parent', 'job'],
    ]);
    expect(holder).toEqual([0, 0, 1, 0]);
    // Through JSON, as Postgres stores it.
    const back = packed.flatMap((p) => outboxRowsFromDb(p.effectId, p.conversationId, p.kind, JSON.parse(JSON.stringify(p.payload))));
    expect(back).toEqual([rows[0], rows[1], rows[3], rows[2]]);
  });

  it('leaves a single effect a row of its own kind', () => {
    const { packed, holder } = packOutboxRows([rows[1]!]);
    expect(packed).toEqual([rows[1]]);
    expect(holder).toEqual([0]);
  });

  it('refuses a packed row it cannot publish, naming the row', () => {
    expect(() => outboxRowsFromDb('n1+2', 'c1', EFFECTS_KIND, {})).toThrow(/n1\+2: payload is not a list of effects/);
    expect(() => outboxRowsFromDb('n1+2', 'c1', EFFECTS_KIND, [{ kind: 'cancel', payload: { message: {} } }])).toThrow(
      /effect 0 has no effect id/,
    );
    expect(() => outboxRowsFromDb('n1+2', 'c1', EFFECTS_KIND, [{ effectId: 'a', kind: 'job', payload: {} }])).toThrow(MalformedOutboxRow);
  });
});
