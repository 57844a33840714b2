import { describe, it, expect } from '@jest/globals';
import { create } from '@bufbuild/protobuf';
import { ConversationEventSchema, TokenDeltaKind, type TokenDelta } from '@bedrock/contracts';
import { createMemoryStreams, STREAM_START, type NotificationStreams } from '@bedrock/platform';
import { createDeltaPublisher } from './delta-publisher.ts';

const durable = (conversationId: string, sequence: bigint) =>
  create(ConversationEventSchema, { conversationId, sequence, kind: { case: 'heartbeat', value: {} } });

async function deltasOf(streams: NotificationStreams, conversationId: string): Promise<TokenDelta[]> {
  const events = await streams.read(conversationId, STREAM_START, { limit: 10_000 });
  return events.flatMap((e) => (e.kind.case === 'tokenDelta' ? [e.kind.value] : []));
}

describe('delta publisher', () => {
  it('appends every delta in order, merging those that arrive while an append is in flight', async () => {
    const streams = createMemoryStreams();
    await streams.appendDurable(durable('c1', 1n));
    const publisher = createDeltaPublisher({ streams, conversationId: 'c1', sequence: 1n, requestId: 'r1' });
    const pieces = Array.from({ length: 500 }, (_, i) => `t${i} `);
    for (const [i, p] of pieces.entries()) publisher.push(i < 250 ? 0 : 2, p);
    await publisher.flush();
    const deltas = await deltasOf(streams, 'c1');
    expect(deltas.filter((d) => d.blockIndex === 0).map((d) => d.text).join('')).toBe(pieces.slice(0, 250).join(''));
    expect(deltas.filter((d) => d.blockIndex === 2).map((d) => d.text).join('')).toBe(pieces.slice(250).join(''));
    expect(deltas.map((d) => d.blockIndex)).toEqual([...deltas.map((d) => d.blockIndex)].sort());
    expect(deltas.every((d) => d.requestId === 'r1')).toBe(true);
    expect(publisher.appended).toBeLessThan(pieces.length);
    // A push after a flush starts a new drain.
    publisher.push(2, 'end');
    await publisher.flush();
    expect((await deltasOf(streams, 'c1')).at(-1)?.text).toBe('end');
    await streams.close();
  });

  it('never merges thinking with text, nor deltas of different blocks; each append carries its kind', async () => {
    const streams = createMemoryStreams();
    await streams.appendDurable(durable('c4', 1n));
    const publisher = createDeltaPublisher({ streams, conversationId: 'c4', sequence: 1n, requestId: 'r4' });
    // Pushed in one tick: everything after the first append in flight is pending at once.
    publisher.push(0, 'Hmm, ', TokenDeltaKind.THINKING);
    publisher.push(0, 'let me see. ', TokenDeltaKind.THINKING);
    publisher.push(0, 'same index, other kind', TokenDeltaKind.TEXT);
    publisher.push(0, ' and more', TokenDeltaKind.TEXT);
    publisher.push(1, 'Answer', TokenDeltaKind.TEXT);
    publisher.push(1, '.');
    await publisher.flush();
    const deltas = await deltasOf(streams, 'c4');
    expect(deltas.map((d) => [d.blockIndex, d.kind, d.text])).toEqual([
      [0, TokenDeltaKind.THINKING, 'Hmm, '],
      [0, TokenDeltaKind.THINKING, 'let me see. '],
      [0, TokenDeltaKind.TEXT, 'same index, other kind and more'],
      [1, TokenDeltaKind.TEXT, 'Answer.'],
    ]);
    await streams.close();
  });

  it('waits for the durable event it follows when that is not in the stream yet', async () => {
    const streams = createMemoryStreams();
    const publisher = createDeltaPublisher({ streams, conversationId: 'c2', sequence: 1n, requestId: 'r2' });
    publisher.push(0, 'early ');
    setTimeout(() => void streams.appendDurable(durable('c2', 1n)), 50);
    publisher.push(0, 'bird');
    await publisher.flush();
    expect((await deltasOf(streams, 'c2')).map((d) => d.text).join('')).toBe('early bird');
    await streams.close();
  });

  it('drops deltas once the conversation has moved past their sequence', async () => {
    const streams = createMemoryStreams();
    await streams.appendDurable(durable('c3', 1n));
    await streams.appendDurable(durable('c3', 2n));
    const publisher = createDeltaPublisher({ streams, conversationId: 'c3', sequence: 1n, requestId: 'r3', waitForDurableMs: 5_000 });
    const started = Date.now();
    publisher.push(0, 'late');
    await publisher.flush();
    expect(Date.now() - started).toBeLessThan(1_000);
    expect(await deltasOf(streams, 'c3')).toEqual([]);
    await streams.close();
  });
});
