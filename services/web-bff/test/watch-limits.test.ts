/**
 * Watch streams per user (docs/web-bff.md, "Watch streams"): against the real web-bff,
 * conversation service, Postgres and Redis, a user over BEDROCK_WATCH_MAX_PER_USER is refused
 * RESOURCE_EXHAUSTED with the Rejection limit_reached (max_watch_streams) on every path (binary
 * gRPC outside connect, Connect and gRPC-Web through it), another user is not, and a closed
 * stream gives its place back.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Code, ConnectError } from '@connectrpc/connect';
import { rejectionOf, type ConversationEvent } from '@bedrock/contracts';
import { startSystem, type Protocol, type System } from './support/system.ts';

const LIMIT = 5;
let s: System;
beforeAll(async () => {
  s = await startSystem({ label: 'watchlimits', bff: { watch: { maxPerUser: LIMIT } } });
});
afterAll(async () => {
  await s?.close();
});

interface Open {
  readonly abort: AbortController;
  /** Resolves with the error that ended the stream (Canceled once aborted). */
  readonly ended: Promise<ConnectError>;
  /** Resolves once the snapshot arrived. */
  readonly watching: Promise<void>;
}

function watch(token: string, conversationId: string, protocol: Protocol = 'grpc'): Open {
  const abort = new AbortController();
  let onSnapshot!: () => void;
  const watching = new Promise<void>((r) => (onSnapshot = r));
  const ended = (async () => {
    try {
      for await (const res of s.client(token, protocol).watchConversation({ conversationId }, { signal: abort.signal })) {
        if ((res.event as ConversationEvent).kind.case === 'snapshot') onSnapshot();
      }
      return new ConnectError('the server ended the watch', Code.Unavailable);
    } catch (err) {
      return ConnectError.from(err);
    }
  })();
  const started = Promise.race([watching, ended.then((e) => Promise.reject(e))]);
  started.catch(() => undefined); // a refused watch is awaited through `ended`
  return { abort, ended, watching: started };
}

describe('watch streams per user', () => {
  it('refuses one more than the limit on every protocol, not another user, and a closed stream frees its place', async () => {
    const alice = s.client(s.tokens.alice!);
    const ids = await Promise.all([1, 2, 3].map(async () => (await alice.createConversation({ cwd: '/tmp' })).conversation!.id));
    const protocols: Protocol[] = ['grpc', 'connect', 'grpc-web', 'grpc', 'connect-h1'];
    const open = protocols.map((p, i) => watch(s.tokens.alice!, ids[i % ids.length]!, p));
    await Promise.all(open.map((o) => o.watching));

    for (const protocol of ['grpc', 'connect', 'grpc-web', 'connect-h1'] as Protocol[]) {
      const err = await watch(s.tokens.alice!, ids[0]!, protocol).ended;
      expect([protocol, err.code]).toEqual([protocol, Code.ResourceExhausted]);
      const rejection = rejectionOf(err);
      expect(rejection).toMatchObject({ code: 'limit_reached', limit: 'max_watch_streams' });
      expect(rejection!.message).toBe(
        `watch streams limit reached: you have ${LIMIT} watch streams open on this server (at most ${LIMIT} per user); close some (browser tabs, bedrock watch) and watch again`,
      );
    }

    // Bob has his own.
    const bob = s.client(s.tokens.bob!);
    const his = (await bob.createConversation({ cwd: '/tmp' })).conversation!.id;
    const bobs = watch(s.tokens.bob!, his);
    await bobs.watching;

    // One of alice's closes: she may watch again (and not twice).
    open[0]!.abort.abort();
    expect((await open[0]!.ended).code).toBe(Code.Canceled);
    const again = await s.waitFor('a place', async () => {
      const o = watch(s.tokens.alice!, ids[1]!);
      try {
        await o.watching;
        return o;
      } catch {
        return undefined;
      }
    });
    expect((await watch(s.tokens.alice!, ids[1]!).ended).code).toBe(Code.ResourceExhausted);

    for (const o of [...open.slice(1), again, bobs]) o.abort.abort();
    await Promise.all([...open, again, bobs].map((o) => o.ended));
  });
});
