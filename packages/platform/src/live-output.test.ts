/**
 * The live-output appender against both notification streams: the in-process one and the
 * Redis one (on the real Redis, with a key prefix unique to this run).
 */
import { afterAll, describe, expect, it } from '@jest/globals';
import { create } from '@bufbuild/protobuf';
import { ConversationEventSchema, TokenDeltaKind, type TokenDelta } from '@bedrock/contracts';
import { createLiveOutput, type LiveOutputOptions } from './live-output.ts';
import { createMemoryStreams } from './memory/memory-streams.ts';
import { createRedisTransport } from './redis/redis-transport.ts';
import { STREAM_START, type NotificationStreams } from './interfaces.ts';
import { REDIS_URL, deleteKeys, uniquePrefix } from '../test/redis-helpers.ts';

const durable = (conversationId: string, sequence: bigint) =>
  create(ConversationEventSchema, { conversationId, sequence, kind: { case: 'heartbeat', value: {} } });

interface Tag {
  blockIndex: number;
  kind: TokenDeltaKind;
}
const tag = (blockIndex: number, kind = TokenDeltaKind.TEXT): Tag => ({ blockIndex, kind });

/** The gateway's use: token deltas tagged by block and kind. */
function deltas(streams: NotificationStreams, conversationId: string, extra: Partial<LiveOutputOptions<Tag>> = {}) {
  return createLiveOutput<Tag>({
    streams,
    conversationId,
    sequence: 1n,
    kind: (text, t) => ({ case: 'tokenDelta', value: { requestId: 'r', blockIndex: t.blockIndex, kind: t.kind, text } }),
    sameTag: (a, b) => a.blockIndex === b.blockIndex && a.kind === b.kind,
    ...extra,
  });
}

async function deltasOf(streams: NotificationStreams, conversationId: string): Promise<TokenDelta[]> {
  const events = await streams.read(conversationId, STREAM_START, { limit: 10_000 });
  return events.flatMap((e) => (e.kind.case === 'tokenDelta' ? [e.kind.value] : []));
}

async function outputOf(streams: NotificationStreams, conversationId: string): Promise<string[]> {
  const events = await streams.read(conversationId, STREAM_START, { limit: 10_000 });
  return events.flatMap((e) => (e.kind.case === 'toolOutput' ? [e.kind.value.text] : []));
}

const prefix = uniquePrefix('live-output');
const redis = createRedisTransport({ redisUrl: REDIS_URL, prefix });
const memory = createMemoryStreams();
afterAll(async () => {
  await redis.close();
  await memory.close();
  await deleteKeys(prefix);
});

let n = 0;
const newId = () => `lo-${process.pid}-${++n}`;

describe.each([
  ['in-process', () => memory],
  ['redis', () => redis.streams],
])('live output (%s streams)', (_name, streamsOf) => {
  it('appends everything in order, merging what arrives while an append is in flight', async () => {
    const streams = streamsOf();
    const id = newId();
    await streams.appendDurable(durable(id, 1n));
    const out = deltas(streams, id);
    const pieces = Array.from({ length: 300 }, (_, i) => `t${i} `);
    for (const [i, p] of pieces.entries()) out.push(p, tag(i < 150 ? 0 : 2));
    await out.flush();
    const got = await deltasOf(streams, id);
    expect(
      got
        .filter((d) => d.blockIndex === 0)
        .map((d) => d.text)
        .join(''),
    ).toBe(pieces.slice(0, 150).join(''));
    expect(
      got
        .filter((d) => d.blockIndex === 2)
        .map((d) => d.text)
        .join(''),
    ).toBe(pieces.slice(150).join(''));
    expect(got.map((d) => d.blockIndex)).toEqual([...got.map((d) => d.blockIndex)].sort());
    expect(out.appended).toBeLessThan(pieces.length);
    expect(out.appended).toBe(got.length);
    // A push after a flush starts a new drain.
    out.push('end', tag(2));
    await out.flush();
    expect((await deltasOf(streams, id)).at(-1)?.text).toBe('end');
  });

  it('never merges text of different tags', async () => {
    const streams = streamsOf();
    const id = newId();
    await streams.appendDurable(durable(id, 1n));
    const out = deltas(streams, id);
    out.push('Hmm, ', tag(0, TokenDeltaKind.THINKING));
    out.push('let me see. ', tag(0, TokenDeltaKind.THINKING));
    out.push('same index, other kind', tag(0));
    out.push(' and more', tag(0));
    out.push('Answer', tag(1));
    out.push('.', tag(1));
    await out.flush();
    expect((await deltasOf(streams, id)).map((d) => [d.blockIndex, d.kind, d.text])).toEqual([
      [0, TokenDeltaKind.THINKING, 'Hmm, '],
      [0, TokenDeltaKind.THINKING, 'let me see. '],
      [0, TokenDeltaKind.TEXT, 'same index, other kind and more'],
      [1, TokenDeltaKind.TEXT, 'Answer.'],
    ]);
  });

  it('waits for the durable event it follows when that is not in the stream yet', async () => {
    const streams = streamsOf();
    const id = newId();
    const out = deltas(streams, id);
    out.push('early ', tag(0));
    setTimeout(() => void streams.appendDurable(durable(id, 1n)), 50);
    out.push('bird', tag(0));
    await out.flush();
    expect((await deltasOf(streams, id)).map((d) => d.text).join('')).toBe('early bird');
  });

  it('gives up waiting for the durable event after waitForDurableMs, dropping everything', async () => {
    const streams = streamsOf();
    const id = newId();
    const out = deltas(streams, id, { waitForDurableMs: 100 });
    out.push('never', tag(0));
    await out.flush();
    await streams.appendDurable(durable(id, 1n));
    out.push('after', tag(0));
    await out.flush();
    expect(await deltasOf(streams, id)).toEqual([]);
    expect(out.appended).toBe(0);
  });

  it('drops everything, without waiting, once the conversation has moved past its sequence', async () => {
    const streams = streamsOf();
    const id = newId();
    await streams.appendDurable(durable(id, 1n));
    await streams.appendDurable(durable(id, 2n));
    const out = deltas(streams, id, { waitForDurableMs: 5_000 });
    const started = Date.now();
    out.push('late', tag(0));
    await out.flush();
    expect(Date.now() - started).toBeLessThan(1_000);
    expect(await deltasOf(streams, id)).toEqual([]);
  });

  it("keeps at most maxChars and at most one append per minIntervalMs (the runner's use); close sends the rest at once", async () => {
    const streams = streamsOf();
    const id = newId();
    await streams.appendDurable(durable(id, 1n));
    const out = createLiveOutput<null>({
      streams,
      conversationId: id,
      sequence: 1n,
      kind: (text) => ({ case: 'toolOutput', value: { toolUseId: 'tu', text } }),
      // Long, so that close's "at once" shows against it on a busy machine too.
      minIntervalMs: 10_000,
      maxChars: 25,
    });
    const started = performance.now();
    out.push('0123456789', null); // appended at once
    await new Promise((r) => setTimeout(r, 20));
    out.push('abcdefghij', null); // waits out the interval, merged with the next
    out.push('ABCDEFGHIJ', null); // cut to 5
    out.push('dropped', null);
    await new Promise((r) => setTimeout(r, 20));
    expect(await outputOf(streams, id)).toEqual(['0123456789']);
    await out.close();
    expect(performance.now() - started).toBeLessThan(5_000);
    out.push('after close', null);
    await out.flush();
    expect(await outputOf(streams, id)).toEqual(['0123456789', 'abcdefghijABCDE']);
  });

  it('reports a failed append, drops its text and goes on', async () => {
    const real = streamsOf();
    const id = newId();
    await real.appendDurable(durable(id, 1n));
    let failures = 1;
    const streams: NotificationStreams = {
      ...real,
      appendEphemeral: async (event) => {
        if (failures-- > 0) throw new Error('boom');
        return real.appendEphemeral(event);
      },
      last: (c) => real.last(c),
    };
    const errors: unknown[] = [];
    const out = deltas(streams, id, { onError: (err) => errors.push(err) });
    out.push('lost', tag(0));
    await out.flush();
    out.push('kept', tag(0));
    await out.close();
    expect(errors).toHaveLength(1);
    expect((await deltasOf(real, id)).map((d) => d.text)).toEqual(['kept']);
  });
});
