/** The web UI's resumable watch (ui/src/watch.ts) against an in-memory ConversationService. */
import { describe, expect, it } from '@jest/globals';
import { create } from '@bufbuild/protobuf';
import { Code, ConnectError, createClient, createRouterTransport } from '@connectrpc/connect';
import {
  ConversationEventSchema,
  ConversationService,
  HeartbeatSchema,
  SnapshotSchema,
  StateChangedSchema,
  TokenDeltaSchema,
  type ConversationEvent,
  type WatchConversationRequest,
} from '@bedrock/contracts';
import { watch } from '../ui/src/watch.ts';

const ev = (sequence: bigint, deltaIndex: number, kind: ConversationEvent['kind']) => ({
  event: create(ConversationEventSchema, { conversationId: 'c1', sequence, deltaIndex, kind }),
});

function until(check: () => boolean, ms = 5000): Promise<void> {
  const end = Date.now() + ms;
  return new Promise((resolve, reject) => {
    const tick = () => (check() ? resolve() : Date.now() > end ? reject(new Error('timed out')) : setTimeout(tick, 10));
    tick();
  });
}

describe('the UI watch loop', () => {
  it('resumes after a disconnect from the last (sequence, delta_index) seen, ignoring heartbeats', async () => {
    const calls: WatchConversationRequest[] = [];
    const transport = createRouterTransport(({ service }) =>
      service(ConversationService, {
        async *watchConversation(req, ctx) {
          calls.push(req);
          if (calls.length === 1) {
            yield ev(5n, 0, { case: 'snapshot', value: create(SnapshotSchema) });
            yield ev(5n, 1, { case: 'tokenDelta', value: create(TokenDeltaSchema, { requestId: 'r', text: 'hi' }) });
            yield ev(9n, 9, { case: 'heartbeat', value: create(HeartbeatSchema) });
            throw new ConnectError('stream reset', Code.Unavailable);
          }
          yield ev(6n, 0, { case: 'stateChanged', value: create(StateChangedSchema) });
          // Stay open, as a live stream does, until the client stops watching.
          await new Promise((resolve) => ctx.signal.addEventListener('abort', resolve));
        },
      }),
    );
    const seen: string[] = [];
    const connected: boolean[] = [];
    const stop = watch(createClient(ConversationService, transport), 'c1', {
      event: (e) => seen.push(`${e.kind.case}@${e.sequence}.${e.deltaIndex}`),
      connected: (ok) => connected.push(ok),
      failed: (err) => seen.push(`failed ${String(err)}`),
    });
    try {
      await until(() => seen.includes('stateChanged@6.0'));
    } finally {
      stop();
    }
    expect(calls.map((c) => [c.afterSequence, c.afterDeltaIndex])).toEqual([
      [0n, 0],
      [5n, 1],
    ]);
    expect(seen).toEqual(['snapshot@5.0', 'tokenDelta@5.1', 'heartbeat@9.9', 'stateChanged@6.0']);
    expect(connected).toEqual([true, false, true]);
  });

  it('gives up, without retrying, when the conversation is not found', async () => {
    let calls = 0;
    const transport = createRouterTransport(({ service }) =>
      service(ConversationService, {
        // eslint-disable-next-line require-yield
        async *watchConversation() {
          calls++;
          throw new ConnectError('conversation c1 not found', Code.NotFound);
        },
      }),
    );
    const failures: unknown[] = [];
    const stop = watch(createClient(ConversationService, transport), 'c1', {
      event: () => undefined,
      connected: () => undefined,
      failed: (err) => failures.push(err),
    });
    await until(() => failures.length === 1);
    await new Promise((r) => setTimeout(r, 700));
    stop();
    expect(calls).toBe(1);
    expect(ConnectError.from(failures[0]).rawMessage).toBe('conversation c1 not found');
  });
});
