/**
 * Pushed deliveries to caught-up gRPC watchers (BEDROCK_WATCH_DELIVERY=push, the default): a
 * watcher whose client stops reading is not queued the events it misses; once its stream
 * drains it gets a fresh snapshot and then the live events, with no error. Also: pushed
 * events reach many watchers of one conversation in order, each exactly once.
 */
import http2 from 'node:http2';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { create, fromBinary, toBinary } from '@bufbuild/protobuf';
import {
  ConversationEventSchema,
  WatchConversationRequestSchema,
  WatchConversationResponseSchema,
  type ConversationEvent,
} from '@bedrock/contracts';
import { startSystem, type System } from './support/system.ts';

const WATCH = '/bedrock.v1.ConversationService/WatchConversation';

/** A raw gRPC watch whose reading the test pauses and resumes (pausing stops HTTP/2 window updates). */
function rawWatch(baseUrl: string, token: string, conversationId: string) {
  const session = http2.connect(baseUrl);
  session.on('error', () => undefined);
  const stream = session.request({
    ':method': 'POST',
    ':path': WATCH,
    'content-type': 'application/grpc+proto',
    te: 'trailers',
    authorization: `Bearer ${token}`,
  });
  const body = toBinary(WatchConversationRequestSchema, create(WatchConversationRequestSchema, { conversationId }));
  const frame = Buffer.alloc(5 + body.length);
  frame.writeUInt32BE(body.length, 1);
  Buffer.from(body).copy(frame, 5);
  stream.end(frame);
  const events: ConversationEvent[] = [];
  const trailers: Record<string, string> = {};
  let pending = Buffer.alloc(0);
  stream.on('data', (chunk: Buffer) => {
    pending = Buffer.concat([pending, chunk]);
    while (pending.length >= 5) {
      const length = pending.readUInt32BE(1);
      if (pending.length < 5 + length) break;
      events.push(fromBinary(WatchConversationResponseSchema, pending.subarray(5, 5 + length)).event!);
      pending = pending.subarray(5 + length);
    }
  });
  stream.on('trailers', (h) => Object.assign(trailers, h));
  stream.on('error', () => undefined);
  return {
    events,
    trailers,
    pause: () => stream.pause(),
    resume: () => stream.resume(),
    close: () => {
      stream.close(http2.constants.NGHTTP2_CANCEL);
      session.close();
    },
  };
}

describe('pushed deliveries', () => {
  let s: System;
  beforeAll(async () => {
    s = await startSystem({
      label: 'push',
      playWorkers: false,
      // A small buffer, so that a client that stops reading falls behind it; no cut-off or reset during the test.
      bff: { watch: { bufferEvents: 16, maxLag: 60_000, stallTimeout: 60_000, heartbeat: 60_000 } },
    });
  });
  afterAll(async () => {
    await s?.close();
  });

  async function delta(conversationId: string, sequence: bigint, text: string): Promise<void> {
    await s.transport.streams.appendEphemeral(
      create(ConversationEventSchema, { conversationId, sequence, kind: { case: 'tokenDelta', value: { text } } }),
    );
  }

  const texts = (events: ConversationEvent[]) => events.flatMap((e) => (e.kind.case === 'tokenDelta' ? [e.kind.value.text] : []));

  it('reach every watcher of a conversation in order, exactly once', async () => {
    const alice = s.client(s.tokens.alice);
    const conv = (await alice.createConversation({ cwd: '/tmp' })).conversation!;
    const watchers = Array.from({ length: 20 }, () => rawWatch(s.bff.grpcUrl, s.tokens.alice!, conv.id));
    try {
      await s.waitFor('snapshots', () => watchers.every((w) => w.events.length === 1), 10_000);
      const seq = watchers[0]!.events[0]!.sequence;
      const want = Array.from({ length: 200 }, (_, i) => `d${i}`);
      for (const text of want) await delta(conv.id, seq, text);
      await s.waitFor('deliveries', () => watchers.every((w) => texts(w.events).length >= want.length), 10_000);
      for (const w of watchers) expect(texts(w.events)).toEqual(want);
    } finally {
      for (const w of watchers) w.close();
    }
  }, 30_000);

  it('a watcher that stops reading gets a fresh snapshot once it drains, not the events it missed', async () => {
    const alice = s.client(s.tokens.alice);
    const conv = (await alice.createConversation({ cwd: '/tmp' })).conversation!;
    const slow = rawWatch(s.bff.grpcUrl, s.tokens.alice!, conv.id);
    const steady = rawWatch(s.bff.grpcUrl, s.tokens.alice!, conv.id);
    try {
      await s.waitFor('snapshots', () => slow.events.length === 1 && steady.events.length === 1, 10_000);
      expect(slow.events[0]!.kind.case).toBe('snapshot');
      const seq = slow.events[0]!.sequence;
      slow.pause();
      // 400 deltas of 1 KiB, one by one: far more than the HTTP/2 window and the buffer of 16.
      const missed = Array.from({ length: 400 }, (_, i) => `m${i}:${'x'.repeat(1024)}`);
      for (const text of missed) await delta(conv.id, seq, text);
      await s.waitFor('the steady watcher got them', () => texts(steady.events).length === missed.length, 10_000);
      const beforeResume = slow.events.length;
      slow.resume();
      // What the stream had taken before the client stopped, then a snapshot.
      await s.waitFor('a second snapshot', () => slow.events.slice(1).some((e) => e.kind.case === 'snapshot'), 10_000);
      const after = ['live-1', 'live-2', 'live-3'];
      for (const text of after) await delta(conv.id, seq, text);
      await s.waitFor('the live events', () => texts(slow.events).includes('live-3'), 10_000);

      const at = slow.events.findIndex((e, i) => i > 0 && e.kind.case === 'snapshot');
      const sentBefore = texts(slow.events.slice(0, at));
      // Sent before it stopped: a prefix of what came, in order, far fewer than all of it.
      expect(sentBefore).toEqual(missed.slice(0, sentBefore.length));
      expect(sentBefore.length).toBeLessThan(missed.length / 2);
      expect(beforeResume).toBeLessThanOrEqual(sentBefore.length + 1);
      // After the snapshot: none of the missed deltas, then exactly the live ones.
      expect(texts(slow.events.slice(at + 1))).toEqual(after);
      expect(slow.trailers['grpc-status']).toBeUndefined();
      // The steady watcher was not disturbed: everything, once, in order.
      await s.waitFor('steady live', () => texts(steady.events).includes('live-3'), 10_000);
      expect(texts(steady.events)).toEqual([...missed, ...after]);
    } finally {
      slow.close();
      steady.close();
    }
  }, 60_000);
});
