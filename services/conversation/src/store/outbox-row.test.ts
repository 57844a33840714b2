import { describe, expect, it } from '@jest/globals';
import { MalformedOutboxRow, outboxRowFromDb } from './outbox-row.ts';

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
