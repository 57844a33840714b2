/**
 * WatchConversation through web-bff: snapshot then live events of a real turn, resume after
 * a forced disconnect with no gap and no duplicate, heartbeats, and the two slow-client
 * policies (cut-off with a resumable position; reset of a client that stopped reading).
 */
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { create } from '@bufbuild/protobuf';
import { Code, ConnectError, createClient, type Interceptor } from '@connectrpc/connect';
import { createConnectTransport, createGrpcTransport } from '@connectrpc/connect-node';
import {
  ConversationEventSchema,
  ConversationService,
  StateKind,
  StopReason,
  WatchConversationRequestSchema,
  WatchConversationResponseSchema,
  type ConversationEvent,
} from '@bedrock/contracts';
import { STREAM_START } from '@bedrock/platform';
import { RESUME_DELTA_HEADER, RESUME_SEQUENCE_HEADER } from '../src/http/resume-headers.ts';
import { rawServerStream } from './support/raw-grpc.ts';
import { startSystem, type System } from './support/system.ts';

const key = (e: { sequence: bigint; deltaIndex: number }) => `${e.sequence}/${e.deltaIndex}`;

describe('live watch of a turn', () => {
  let s: System;
  beforeAll(async () => {
    s = await startSystem({ label: 'watch', bff: { watch: { heartbeat: 300 } } });
  });
  afterAll(async () => {
    await s?.close();
  });

  it('sends a snapshot, then state changes, messages and token deltas in order', async () => {
    const alice = s.client(s.tokens.alice);
    const conv = (await alice.createConversation({ cwd: '/tmp' })).conversation!;
    const abort = new AbortController();
    const events: ConversationEvent[] = [];
    const watching = (async () => {
      try {
        for await (const res of alice.watchConversation({ conversationId: conv.id }, { signal: abort.signal })) events.push(res.event!);
      } catch (err) {
        if (ConnectError.from(err).code !== Code.Canceled) throw err;
      }
    })();
    await s.waitFor('snapshot', () => events[0]?.kind.case === 'snapshot');
    await alice.sendMessage({ conversationId: conv.id, text: 'hello' });
    const job = await s.waitFor('llm request', () => s.llmJobs.find((j) => j.conversationId === conv.id));
    await s.waitFor('llm requesting', () =>
      events.some((e) => e.kind.case === 'stateChanged' && e.kind.value.state?.kind === StateKind.LLM_REQUESTING),
    );
    await s.delta(conv.id, job.requestId, 'Hel');
    await s.delta(conv.id, job.requestId, 'lo!');
    await s.send(conv.id, `r/${job.requestId}`, {
      case: 'llmResponse',
      value: {
        requestId: job.requestId,
        stopReason: StopReason.END_TURN,
        usage: { inputTokens: 10n, outputTokens: 2n },
        content: [{ block: { case: 'text', value: { text: 'Hello!' } } }],
      },
    });
    await s.waitFor('idle', () => events.some((e) => e.kind.case === 'stateChanged' && e.kind.value.state?.kind === StateKind.IDLE));
    abort.abort();
    await watching;

    const kinds = events.filter((e) => e.kind.case !== 'heartbeat').map((e) => e.kind.case);
    expect(kinds[0]).toBe('snapshot');
    expect(kinds).toEqual(expect.arrayContaining(['messagePersisted', 'stateChanged', 'tokenDelta']));
    const deltas = events.flatMap((e) => (e.kind.case === 'tokenDelta' ? [e.kind.value.text] : []));
    expect(deltas.join('')).toBe('Hello!');
    const persisted = events.flatMap((e) => (e.kind.case === 'messagePersisted' ? [e.kind.value.message!] : []));
    expect(persisted.map((m) => m.content[0]?.block.value)).toEqual([
      { $typeName: 'bedrock.v1.TextBlock', text: 'hello', citationsJson: '' },
      { $typeName: 'bedrock.v1.TextBlock', text: 'Hello!', citationsJson: '' },
    ]);
    // Positions strictly increase; durable sequences are consecutive after the snapshot's.
    const live = events.filter((e) => e.kind.case !== 'heartbeat');
    for (let i = 1; i < live.length; i++) {
      const [a, b] = [live[i - 1]!, live[i]!];
      expect(a.sequence < b.sequence || (a.sequence === b.sequence && a.deltaIndex < b.deltaIndex)).toBe(true);
    }
    const durable = live.filter((e) => e.deltaIndex === 0).map((e) => Number(e.sequence));
    expect(durable).toEqual(durable.map((_, i) => durable[0]! + i));
  });

  it('every protocol and codec gets the same events (gRPC outside connect, the rest through it)', async () => {
    const alice = s.client(s.tokens.alice);
    const conv = (await alice.createConversation({ cwd: '/tmp' })).conversation!;
    const bearer: Interceptor = (next) => (req) => {
      req.header.set('authorization', `Bearer ${s.tokens.alice}`);
      return next(req);
    };
    const interceptors = [bearer];
    const h2 = { baseUrl: s.bff.grpcUrl, httpVersion: '2' as const, interceptors };
    const clients = {
      grpc: alice,
      grpcWithDeadline: createClient(ConversationService, createGrpcTransport(h2)),
      connectBinary: createClient(ConversationService, createConnectTransport({ ...h2, useBinaryFormat: true })),
      connectJson: createClient(ConversationService, createConnectTransport({ ...h2, useBinaryFormat: false })),
      grpcWebH1: s.client(s.tokens.alice, 'grpc-web-h1'),
    };
    const abort = new AbortController();
    const got = new Map<string, ConversationEvent[]>();
    const watching = Object.entries(clients).map(async ([name, client]) => {
      const events: ConversationEvent[] = [];
      got.set(name, events);
      try {
        const options = name === 'grpcWithDeadline' ? { signal: abort.signal, timeoutMs: 60_000 } : { signal: abort.signal };
        for await (const res of client.watchConversation({ conversationId: conv.id }, options)) events.push(res.event!);
      } catch (err) {
        if (ConnectError.from(err).code !== Code.Canceled) throw err;
      }
    });
    await s.waitFor('snapshots', () => [...got.values()].every((events) => events[0]?.kind.case === 'snapshot'));
    const last = await s.transport.streams.last(conv.id);
    for (const text of ['a', 'b', 'c']) {
      await s.transport.streams.appendEphemeral(
        create(ConversationEventSchema, {
          conversationId: conv.id,
          sequence: last.sequence,
          kind: { case: 'tokenDelta', value: { text } },
        }),
      );
    }
    const deltas = (events: ConversationEvent[]) => events.filter((e) => e.kind.case === 'tokenDelta');
    await s.waitFor('deltas', () => [...got.values()].every((events) => deltas(events).length === 3));
    abort.abort();
    await Promise.all(watching);
    const reference = got.get('grpc')!.filter((e) => e.kind.case !== 'heartbeat');
    expect(deltas(reference).map((e) => (e.kind.value as { text: string }).text)).toEqual(['a', 'b', 'c']);
    for (const [name, events] of got) expect([name, events.filter((e) => e.kind.case !== 'heartbeat')]).toEqual([name, reference]);
  });

  it('a snapshot shared by watchers of one user is never given to another user', async () => {
    const alice = s.client(s.tokens.alice);
    const bob = s.client(s.tokens.bob);
    const conv = (await alice.createConversation({ cwd: '/tmp' })).conversation!;
    const watchFirst = async (client: typeof alice, afterSequence = 0n) => {
      for await (const res of client.watchConversation({ conversationId: conv.id, afterSequence })) return res.event!;
      return undefined;
    };
    // Alice's snapshot is fresh (shared for a second); Bob asks right after, fresh and resuming.
    expect((await watchFirst(alice))?.kind.case).toBe('snapshot');
    for (const after of [0n, 1n]) {
      const err = await watchFirst(bob, after).then(
        () => undefined,
        (e: unknown) => ConnectError.from(e),
      );
      expect(err?.code).toBe(Code.NotFound);
    }
  });

  it('sends heartbeats on an idle stream', async () => {
    const alice = s.client(s.tokens.alice);
    const conv = (await alice.createConversation({ cwd: '/tmp' })).conversation!;
    const seen: string[] = [];
    const started = Date.now();
    for await (const res of alice.watchConversation({ conversationId: conv.id })) {
      seen.push(res.event!.kind.case!);
      if (seen.filter((k) => k === 'heartbeat').length === 2) break;
    }
    expect(seen[0]).toBe('snapshot');
    expect(Date.now() - started).toBeGreaterThanOrEqual(500);
    expect(Date.now() - started).toBeLessThan(5000);
  });

  it('resumes after a forced disconnect with no gap and no duplicate', async () => {
    const alice = s.client(s.tokens.alice);
    const conv = (await alice.createConversation({ cwd: '/tmp' })).conversation!;
    // A TCP proxy in front of the h2c port, so the connection can be cut from outside.
    const target = new URL(s.bff.grpcUrl);
    const sockets = new Set<net.Socket>();
    const proxy = net.createServer((client) => {
      const upstream = net.connect(Number(target.port), target.hostname);
      client.pipe(upstream).pipe(client);
      for (const sock of [client, upstream]) {
        sockets.add(sock);
        sock.on('error', () => undefined);
        sock.on('close', () => sockets.delete(sock));
      }
    });
    await new Promise<void>((r) => proxy.listen(0, '127.0.0.1', r));
    const proxyUrl = `http://127.0.0.1:${(proxy.address() as net.AddressInfo).port}`;
    const bearer = { authorization: `Bearer ${s.tokens.alice}` };
    const viaProxy = () => createClient(ConversationService, createGrpcTransport({ baseUrl: proxyUrl }));

    // The test appends events straight to the conversation's stream, as the relay and gateway do.
    let seq = (await s.transport.streams.last(conv.id)).sequence;
    const publish = async (n: number) => {
      for (let i = 0; i < n; i++) {
        if (i % 4 === 0) {
          seq += 1n;
          await s.transport.streams.appendDurable(
            create(ConversationEventSchema, { conversationId: conv.id, sequence: seq, kind: { case: 'heartbeat', value: {} } }),
          );
        } else {
          await s.transport.streams.appendEphemeral(
            create(ConversationEventSchema, {
              conversationId: conv.id,
              sequence: seq,
              kind: { case: 'tokenDelta', value: { text: `t${i}` } },
            }),
          );
        }
      }
    };

    const received: ConversationEvent[] = [];
    let after = { sequence: 0n, deltaIndex: 0 };
    const consume = async (stopAfter: number) => {
      const stream = viaProxy().watchConversation(
        { conversationId: conv.id, afterSequence: after.sequence, afterDeltaIndex: after.deltaIndex },
        { headers: bearer },
      );
      try {
        for await (const res of stream) {
          const e = res.event!;
          if (e.kind.case === 'heartbeat' && e.deltaIndex === 0 && e.sequence === after.sequence) continue; // a keep-alive, not an event
          received.push(e);
          after = { sequence: e.sequence, deltaIndex: e.deltaIndex };
          if (received.length === stopAfter) for (const sock of sockets) sock.destroy();
        }
        return 'ended';
      } catch (err) {
        return ConnectError.from(err).code;
      }
    };
    await publish(10);
    const first = consume(25);
    await s.waitFor('snapshot', () => received.length > 0);
    await publish(40);
    expect(await first).not.toBe('ended');
    // Events keep coming while the client is away.
    await publish(40);
    const beforeResume = received.length;
    expect(beforeResume).toBeGreaterThanOrEqual(25);
    const second = consume(Number.MAX_SAFE_INTEGER);
    await publish(20);
    const all = await s.transport.streams.read(conv.id, STREAM_START, { limit: 10_000 });
    const snapshotSeq = received[0]!.sequence;
    const expected = all.filter((e) => e.sequence > snapshotSeq || (e.sequence === snapshotSeq && e.deltaIndex > 0)).map(key);
    await s.waitFor('every event after the resume', () => received.length - 1 >= expected.length, 10_000);
    for (const sock of sockets) sock.destroy();
    await second;
    proxy.close();

    expect(received[0]!.kind.case).toBe('snapshot');
    const got = received.slice(1).map(key);
    expect(new Set(got).size).toBe(got.length);
    expect(got).toEqual(expected);
  });
});

describe('slow watchers', () => {
  let s: System;
  beforeAll(async () => {
    s = await startSystem({
      label: 'slow',
      playWorkers: false,
      // Heartbeats every second: a client that just stops iterating is noticed at the next write.
      bff: { watch: { maxLag: 1500, bufferEvents: 20_000, stallTimeout: 2500, heartbeat: 1000 } },
    });
  });
  afterAll(async () => {
    await s?.close();
  });

  /** Appends `n` token deltas of `size` bytes after the stream's last durable event. */
  async function flood(conversationId: string, n: number, size: number): Promise<void> {
    const last = await s.transport.streams.last(conversationId);
    const text = 'x'.repeat(size);
    // Issued together: one connection keeps them in order, and Redis assigns consecutive indexes.
    await Promise.all(
      Array.from({ length: n }, () =>
        s.transport.streams.appendEphemeral(
          create(ConversationEventSchema, { conversationId, sequence: last.sequence, kind: { case: 'tokenDelta', value: { text } } }),
        ),
      ),
    );
  }

  it('cuts a client that reads slower than events arrive with RESOURCE_EXHAUSTED and a position that resumes exactly', async () => {
    const total = 1200;
    const alice = s.client(s.tokens.alice);
    const conv = (await alice.createConversation({ cwd: '/tmp' })).conversation!;
    const snapshotSeq = (await alice.getConversation({ conversationId: conv.id })).sequence;
    // Resume right after the snapshot, then 4.8 MB arrive at once while the client takes ~200 events a second.
    const watching = rawServerStream(
      s.bff.grpcUrl,
      '/bedrock.v1.ConversationService/WatchConversation',
      WatchConversationRequestSchema,
      WatchConversationResponseSchema,
      { conversationId: conv.id, afterSequence: snapshotSeq, afterDeltaIndex: 0 },
      { pauseMs: 20, deadlineMs: 15_000, headers: { authorization: `Bearer ${s.tokens.alice}` } },
    );
    await new Promise((r) => setTimeout(r, 200));
    await flood(conv.id, total, 4096);
    const { messages, trailers } = await watching;
    const got = messages.map((m) => m.event!).filter((e) => e.kind.case === 'tokenDelta');
    expect(trailers['grpc-status']).toBe(String(Code.ResourceExhausted));
    expect(got.length).toBeLessThan(total);
    const last = got.at(-1)!;
    expect(trailers['grpc-message']).toContain(`after_sequence=${last.sequence} after_delta_index=${last.deltaIndex}`);
    expect(trailers[RESUME_SEQUENCE_HEADER]).toBe(String(last.sequence));
    expect(trailers[RESUME_DELTA_HEADER]).toBe(String(last.deltaIndex));

    // Resuming from there delivers exactly the rest (on a loaded machine the catch-up itself may
    // be cut again: a client resumes from each position it is given, as the CLI does).
    const rest: ConversationEvent[] = [];
    let from = { sequence: last.sequence, deltaIndex: last.deltaIndex };
    let resumes = 0;
    while (got.length + rest.length < total && resumes++ < 20) {
      const abort = new AbortController();
      try {
        for await (const res of alice.watchConversation(
          { conversationId: conv.id, afterSequence: from.sequence, afterDeltaIndex: from.deltaIndex },
          { signal: abort.signal },
        )) {
          const e = res.event!;
          if (e.kind.case === 'heartbeat') continue;
          rest.push(e);
          from = { sequence: e.sequence, deltaIndex: e.deltaIndex };
          if (got.length + rest.length === total) break;
        }
      } catch (err) {
        const e = ConnectError.from(err);
        expect(e.code).toBe(Code.ResourceExhausted);
        expect(e.metadata.get(RESUME_DELTA_HEADER)).toBe(String(from.deltaIndex));
      } finally {
        abort.abort();
      }
    }
    const indexes = [...got, ...rest].map((e) => e.deltaIndex);
    expect(indexes).toEqual(Array.from({ length: total }, (_, i) => i + 1));
    await s.waitFor('watchers released', () => s.bff.watchStats().watchers === 0, 5000);
  }, 60_000);

  it('resets the stream of a client that stops reading altogether', async () => {
    const alice = s.client(s.tokens.alice);
    const conv = (await alice.createConversation({ cwd: '/tmp' })).conversation!;
    const before = s.bff.watchStats().stallResets;
    const it = alice.watchConversation({ conversationId: conv.id })[Symbol.asyncIterator]();
    await it.next();
    await flood(conv.id, 1000, 4096);
    await s.waitFor('stall reset', () => s.bff.watchStats().stallResets > before, 20_000);
    await s
      .waitFor('watcher released', () => s.bff.watchStats().watchers === 0, 5000)
      .catch((err: unknown) => {
        throw new Error(`${String(err)}: ${JSON.stringify(s.bff.watchStats())}`);
      });
    let code: Code | undefined;
    try {
      for (;;) if ((await it.next()).done) break;
    } catch (err) {
      code = ConnectError.from(err).code;
    }
    expect(code).toBeDefined();
  });
});

describe('shutdown', () => {
  it('ends open watches with UNAVAILABLE naming the resume, once the grace period is over', async () => {
    const s = await startSystem({ label: 'shutdown', playWorkers: false, bff: { server: { shutdownGrace: 200 } } });
    try {
      const alice = s.client(s.tokens.alice);
      const conv = (await alice.createConversation({ cwd: '/tmp' })).conversation!;
      const watches = Array.from({ length: 3 }, async () => {
        try {
          for await (const res of alice.watchConversation({ conversationId: conv.id })) void res;
          return undefined;
        } catch (err) {
          return ConnectError.from(err);
        }
      });
      await s.waitFor('watching', () => s.bff.watchStats().watchers === 3);
      await s.bff.stop();
      for (const err of await Promise.all(watches)) {
        expect(err?.code).toBe(Code.Unavailable);
        expect(err?.rawMessage).toContain('resume from the last event you saw');
      }
    } finally {
      await s.close();
    }
  });
});
