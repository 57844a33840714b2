/**
 * A dropped connection to the conversation service reaches clients as UNAVAILABLE (which
 * they retry, with the same request id for a change), never as ABORTED or INTERNAL.
 * connect-node reports a reset socket as ABORTED ("read ECONNRESET") and a stream whose
 * connection closed under it as CANCELED: the first part records those shapes from a real
 * HTTP/2 client and checks mapUpstreamError; the second goes through the real web-bff.
 */
import http2 from 'node:http2';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Code, ConnectError, createClient, type Client } from '@connectrpc/connect';
import { createGrpcTransport } from '@connectrpc/connect-node';
import { setTrailerStatus } from '@connectrpc/connect/protocol-grpc';
import { fromBinary } from '@bufbuild/protobuf';
import { ConversationService, SendMessageRequestSchema, rejectionError, rejectionOf } from '@bedrock/contracts';
import { createLogger, createTokenStore, generateToken, serviceTokenInterceptor, tokenEntriesOf } from '@bedrock/platform/server';
import { createWebBff, type WebBff } from '../src/create-web-bff.ts';
import { testBffConfig } from './support/bff-config.ts';
import { mapUpstreamError } from '../src/upstream/upstream-errors.ts';
import { startTcpProxy, type TcpProxy } from './support/tcp-proxy.ts';

const quiet = createLogger({ service: 'test', level: 'silent' });
const UNAVAILABLE = [Code.Unavailable, 'the conversation service is unavailable; try again shortly'];

/**
 * A stand-in conversation service on a bare HTTP/2 server (so a broken call leaves no handler
 * behind): SendMessage "refuse" answers FAILED_PRECONDITION with a rejection detail, "abort"
 * answers ABORTED, anything else never answers (a call in flight for the test to break).
 */
let upstream: { url: string; close(): Promise<void> };
let arrived = 0;
beforeAll(async () => {
  const server = http2.createServer();
  server.on('stream', (stream) => {
    const chunks: Buffer[] = [];
    stream.on('data', (c: Buffer) => chunks.push(c));
    stream.on('error', () => undefined);
    stream.on('end', () => {
      arrived++;
      const body = Buffer.concat(chunks);
      const req = fromBinary(SendMessageRequestSchema, body.subarray(5));
      const answer = (status: Code, message: string, extra: Record<string, string> = {}) => {
        stream.respond({ ':status': 200, 'content-type': 'application/grpc' }, { waitForTrailers: true });
        stream.on('wantTrailers', () =>
          stream.sendTrailers({ 'grpc-status': String(status), 'grpc-message': encodeURIComponent(message), ...extra }),
        );
        stream.end();
      };
      if (req.text === 'refuse') {
        // The status with its Rejection detail, as a gRPC server writes it (grpc-status-details-bin).
        const trailer = setTrailerStatus(new Headers(), rejectionError({ code: 'agent_busy', message: 'agent is busy: cancel first' }));
        answer(Code.FailedPrecondition, 'agent is busy: cancel first', {
          'grpc-status-details-bin': trailer.get('grpc-status-details-bin')!,
        });
      } else if (req.text === 'abort') answer(Code.Aborted, 'answered with ABORTED');
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  upstream = {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
});
afterAll(async () => {
  await upstream?.close();
});

const errorOf = (call: Promise<unknown>): Promise<ConnectError> =>
  call.then(
    () => {
      throw new Error('expected the call to fail');
    },
    (err: unknown) => ConnectError.from(err),
  );

/** Starts a call through a fresh proxy and breaks its connection once the call has arrived. */
async function broken(
  how: 'reset' | 'end',
  call: (client: Client<typeof ConversationService>) => Promise<unknown>,
  client?: Client<typeof ConversationService>,
  proxy?: TcpProxy,
) {
  const before = arrived;
  const p = errorOf(call(client!));
  for (let i = 0; i < 500 && arrived === before; i++) await new Promise((r) => setTimeout(r, 10));
  expect(arrived).toBe(before + 1);
  proxy![how]();
  return p;
}

describe('mapUpstreamError, with the errors a real HTTP/2 client gives', () => {
  let proxy: TcpProxy;
  let client: Client<typeof ConversationService>;
  beforeAll(async () => {
    proxy = await startTcpProxy(Number(new URL(upstream.url).port));
    client = createClient(ConversationService, createGrpcTransport({ baseUrl: proxy.url }));
  });
  afterAll(async () => {
    await proxy?.close();
  });
  const live = () => new AbortController().signal;

  it('a reset connection is UNAVAILABLE (connect-node says ABORTED "read ECONNRESET" or CANCELED, by timing)', async () => {
    // The operator's case: the client saw ABORTED. connect-node builds it from the socket's error like this.
    const econnreset = Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET', errno: -104, syscall: 'read' });
    const aborted = new ConnectError(econnreset.message, Code.Aborted, undefined, undefined, econnreset);
    expect([mapUpstreamError(aborted, quiet, 'SendMessage', live()).code]).toEqual([Code.Unavailable]);
    // And what a real reset gives here, whichever shape it takes.
    for (let i = 0; i < 3; i++) {
      const raw = await broken('reset', (c) => c.sendMessage({ conversationId: 'c', text: 'slow' }), client, proxy);
      expect([Code.Aborted, Code.Canceled, Code.Internal]).toContain(raw.code);
      const mapped = mapUpstreamError(raw, quiet, 'SendMessage', live());
      expect([mapped.code, mapped.rawMessage]).toEqual(UNAVAILABLE);
    }
  });

  it('a connection closed under the call (CANCELED "http/2 stream closed") is UNAVAILABLE', async () => {
    const raw = await broken('end', (c) => c.sendMessage({ conversationId: 'c', text: 'slow' }), client, proxy);
    expect(raw.code).toBe(Code.Canceled);
    expect(raw.rawMessage).toMatch(/http\/2 stream closed with error code CANCEL/);
    const mapped = mapUpstreamError(raw, quiet, 'SendMessage', live());
    expect([mapped.code, mapped.rawMessage]).toEqual(UNAVAILABLE);
  });

  it("a connection that cannot be made is UNAVAILABLE; the caller's own cancel stays CANCELED", async () => {
    const nowhere = createClient(ConversationService, createGrpcTransport({ baseUrl: 'http://127.0.0.1:9' }));
    const refused = await errorOf(nowhere.sendMessage({ conversationId: 'c', text: 'x' }));
    expect([mapUpstreamError(refused, quiet, 'SendMessage', live()).code]).toEqual([Code.Unavailable]);

    const caller = new AbortController();
    const p = errorOf(client.sendMessage({ conversationId: 'c', text: 'slow' }, { signal: caller.signal }));
    await new Promise((r) => setTimeout(r, 100));
    caller.abort();
    const cancelled = mapUpstreamError(await p, quiet, 'SendMessage', caller.signal);
    expect(cancelled.code).toBe(Code.Canceled);
  });

  it('statuses the service answered pass through as before (code, message, rejection detail)', async () => {
    const refused = mapUpstreamError(
      await errorOf(client.sendMessage({ conversationId: 'c', text: 'refuse' })),
      quiet,
      'SendMessage',
      live(),
    );
    expect([refused.code, refused.rawMessage, rejectionOf(refused)?.code]).toEqual([
      Code.FailedPrecondition,
      'agent is busy: cancel first',
      'agent_busy',
    ]);
    expect(refused.metadata.has('grpc-status-details-bin')).toBe(false);
    const aborted = mapUpstreamError(
      await errorOf(client.sendMessage({ conversationId: 'c', text: 'abort' })),
      quiet,
      'SendMessage',
      live(),
    );
    expect([aborted.code, aborted.rawMessage]).toEqual([Code.Aborted, 'answered with ABORTED']);
  });
});

describe('through web-bff', () => {
  let proxy: TcpProxy;
  let bff: WebBff;
  let client: Client<typeof ConversationService>;
  beforeAll(async () => {
    proxy = await startTcpProxy(Number(new URL(upstream.url).port));
    const user = generateToken();
    bff = createWebBff(testBffConfig({ upstream: { conversationUrls: [proxy.url] } }), {
      logger: createLogger({ service: 'web-bff', level: 'silent', destination: new Writable({ write: (_c, _e, done) => done() }) }),
      tokens: createTokenStore(tokenEntriesOf({ alice: user })),
      serviceToken: generateToken(),
    });
    await bff.start();
    client = createClient(
      ConversationService,
      createGrpcTransport({ baseUrl: bff.grpcUrl, interceptors: [serviceTokenInterceptor(user)] }),
    );
  });
  afterAll(async () => {
    await bff?.stop();
    await proxy?.close();
  });

  it.each([
    ['reset', 'with a request id', 'r-1'],
    ['reset', 'without one', ''],
    ['end', 'with a request id', 'r-2'],
    ['end', 'without one', ''],
  ] as const)('a SendMessage whose upstream connection is %s (%s) answers UNAVAILABLE', async (how, _label, requestId) => {
    // Past the back-off of the previous case's failure, so the call goes out at once.
    await new Promise((r) => setTimeout(r, 1_100));
    const err = await broken(how, (c) => c.sendMessage({ conversationId: 'c', text: 'slow', requestId }), client, proxy);
    expect([err.code, err.rawMessage]).toEqual(UNAVAILABLE);
  });
});
