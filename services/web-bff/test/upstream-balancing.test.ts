/**
 * web-bff spreads its calls over every conversation replica of BEDROCK_CONVERSATION_URL and
 * moves off a dead one at once. The replicas here are small stand-ins serving the internal
 * ConversationService (they count calls), so a test can stop or break one at will; the
 * public side is the real web-bff.
 */
import http2 from 'node:http2';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Code, ConnectError, createClient, type Client } from '@connectrpc/connect';
import { createGrpcTransport } from '@connectrpc/connect-node';
import { AdminService, ConversationService, McpService, ThinkingLevel, WorkspaceService } from '@bedrock/contracts';
import { MethodOptions_IdempotencyLevel } from '@bufbuild/protobuf/wkt';
import {
  createLogger,
  createTokenStore,
  generateToken,
  serviceTokenInterceptor,
  startGrpcServer,
  tokenEntriesOf,
  type GrpcServer,
} from '@bedrock/platform/server';
import { createWebBff, type WebBff } from '../src/create-web-bff.ts';
import { testBffConfig } from './support/bff-config.ts';
import { retrySafe } from '../src/upstream/conversation-client.ts';

const quiet = createLogger({ service: 'replica', level: 'silent' });

interface Replica {
  readonly name: string;
  server: GrpcServer;
  readonly calls: string[];
  /** The request_id of each SendMessage it took. */
  readonly sendIds: string[];
}

async function replica(name: string, port = 0): Promise<Replica> {
  const calls: string[] = [];
  const sendIds: string[] = [];
  const server = await startGrpcServer({
    port,
    host: '127.0.0.1',
    logger: quiet,
    routes: (router) =>
      router
        .service(McpService, {
          addMcpServer: () => {
            calls.push('AddMcpServer');
            return {};
          },
        })
        .service(ConversationService, {
          listConversations: () => {
            calls.push('ListConversations');
            return { conversations: [] };
          },
          getConversation: (req) => {
            calls.push('GetConversation');
            return { conversation: { id: req.conversationId, cwd: `/served-by/${name}` } };
          },
          sendMessage: (req) => {
            calls.push('SendMessage');
            sendIds.push(req.requestId);
            return {};
          },
        }),
  });
  return { name, server, calls, sendIds };
}

/** Takes each call and drops its connection: the call reached it, then broke. */
async function breakingReplica(): Promise<{ url: string; hits: { n: number }; close(): Promise<void> }> {
  const hits = { n: 0 };
  const server = http2.createServer();
  server.on('stream', (stream) => {
    hits.n++;
    stream.session?.destroy();
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    hits,
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}

async function bffFor(urls: string[]) {
  const lines: string[] = [];
  const destination = new Writable({
    write(chunk: Buffer, _enc, done) {
      lines.push(chunk.toString());
      done();
    },
  });
  const user = generateToken();
  const bff = createWebBff(testBffConfig({ upstream: { conversationUrls: urls } }), {
    logger: createLogger({ service: 'web-bff', level: 'info', destination }),
    tokens: createTokenStore(tokenEntriesOf({ alice: user })),
    serviceToken: generateToken(),
  });
  await bff.start();
  const transport = createGrpcTransport({ baseUrl: bff.grpcUrl, interceptors: [serviceTokenInterceptor(user)] });
  const client = createClient(ConversationService, transport);
  return { bff, client, mcp: createClient(McpService, transport), log: () => lines.map((l) => JSON.parse(l) as Record<string, unknown>) };
}

describe('web-bff over several conversation replicas', () => {
  let a: Replica;
  let b: Replica;
  let bff: WebBff;
  let client: Client<typeof ConversationService>;
  let log: () => Array<Record<string, unknown>>;

  beforeAll(async () => {
    a = await replica('a');
    b = await replica('b');
    ({ bff, client, log } = await bffFor([a.server.url, b.server.url]));
  });
  afterAll(async () => {
    await bff?.stop();
    await a?.server.close(0);
    await b?.server.close(0);
  });

  it('spreads calls over every replica (BEDROCK_CONVERSATION_URL lists both)', async () => {
    for (let i = 0; i < 10; i++) await client.listConversations({});
    expect([a.calls.length, b.calls.length]).toEqual([5, 5]);
  });

  it('a replica that dies takes no call with it: every call is answered by the other, at once', async () => {
    await a.server.close(0);
    const before = b.calls.length;
    const started = Date.now();
    // Not even the first call after the death fails: it never reached the dead replica, so it is sent to the other.
    for (let i = 0; i < 6; i++) {
      expect((await client.getConversation({ conversationId: `c${i}` })).conversation?.cwd).toBe('/served-by/b');
      await client.sendMessage({ conversationId: `c${i}`, text: 'hi' });
    }
    expect(Date.now() - started).toBeLessThan(2_000);
    expect(b.calls.length - before).toBe(12);
    const down = log().find((l) => l.msg === 'conversation replica failed; calls go to the other replicas');
    expect(down).toMatchObject({ level: 'warn', upstream: 'conversation', address: a.server.url });
  });

  it('the replica is used again once it is back', async () => {
    const port = Number(new URL(a.server.url).port);
    a = await replica('a', port);
    await new Promise((r) => setTimeout(r, 1_200)); // past its 1 s back-off
    for (let i = 0; i < 6; i++) await client.listConversations({});
    expect(a.calls.length).toBeGreaterThan(0);
    expect(log().some((l) => l.msg === 'conversation replica answers again')).toBe(true);
  });
});

describe('a call whose connection broke after it reached a replica', () => {
  it('is sent again to another replica when it is a read, or a change carrying a request_id (web-bff gives one to a change sent without)', async () => {
    const broken = await breakingReplica();
    const good = await replica('good');
    // The broken replica first, so round robin starts there.
    const { bff, client } = await bffFor([broken.url, good.server.url]);
    try {
      expect((await client.getConversation({ conversationId: 'x' })).conversation?.cwd).toBe('/served-by/good');
      expect(broken.hits.n).toBe(1);

      // Past the broken replica's back-off, a SendMessage without a request_id reaches it, breaks,
      // and is sent again to the good replica with web-bff's own id: the client sees it succeed.
      await new Promise((r) => setTimeout(r, 1_100));
      await client.sendMessage({ conversationId: 'x', text: 'hi' });
      expect(broken.hits.n).toBe(2);
      expect(good.sendIds).toHaveLength(1);
      expect(good.sendIds[0]).toMatch(/^bff-[0-9a-f-]{36}$/);

      // A client's own id goes upstream as it is.
      await new Promise((r) => setTimeout(r, 2_100)); // past the doubled back-off
      await client.sendMessage({ conversationId: 'x', text: 'hi', requestId: 'client-1' });
      expect(broken.hits.n).toBe(3);
      expect(good.sendIds.slice(1)).toEqual(['client-1']);
    } finally {
      await bff.stop();
      await good.server.close(0);
      await broken.close();
    }
  });

  it('is never sent again when it may have changed something and carries no request_id', async () => {
    const broken = await breakingReplica();
    const good = await replica('good');
    const { bff, mcp } = await bffFor([broken.url, good.server.url]);
    try {
      let ok = 0;
      let err: ConnectError | undefined;
      for (let i = 0; i < 3 && !err; i++) {
        err = await mcp.addMcpServer({ name: 'fs', command: 'true' }).then(
          () => void ok++,
          (e: unknown) => ConnectError.from(e),
        );
      }
      expect([err?.code, err?.rawMessage]).toEqual([Code.Unavailable, 'the conversation service is unavailable; try again shortly']);
      // The AddMcpServer that reached the broken replica was not repeated on the good one.
      expect(good.calls).toEqual(Array.from({ length: ok }, () => 'AddMcpServer'));
      expect(broken.hits.n).toBe(1);
    } finally {
      await bff.stop();
      await good.server.close(0);
      await broken.close();
    }
  });
});

describe('which calls may be sent twice', () => {
  it('reads, settings changes, and requests that carry a request_id (the conversation service answers a repeat with the first outcome)', () => {
    const m = ConversationService.method;
    expect(retrySafe(m.getConversation, { conversationId: 'c' })).toBe(true);
    expect(retrySafe(m.listConversations, {})).toBe(true);
    expect(retrySafe(m.sendMessage, { conversationId: 'c', text: 'hi' })).toBe(false);
    expect(retrySafe(m.sendMessage, { conversationId: 'c', text: 'hi', requestId: '' })).toBe(false);
    expect(retrySafe(m.sendMessage, { conversationId: 'c', text: 'hi', requestId: 'r-1' })).toBe(true);
    expect(retrySafe(m.createConversation, { cwd: '/tmp' })).toBe(false);
    expect(retrySafe(m.cancel, { conversationId: 'c' })).toBe(false);
    // Settings are set, not added to: a repeat changes nothing more.
    expect(retrySafe(m.updateConversationSettings, { conversationId: 'c', thinking: ThinkingLevel.LOW })).toBe(true);
    expect(retrySafe(m.renameConversation, { conversationId: 'c', title: 't' })).toBe(true);
    expect(retrySafe(m.getUsage, {})).toBe(true);
  });

  it('is said by the proto alone: every Get and List method of the public services is declared free of side effects', () => {
    const undeclared = [ConversationService, WorkspaceService, AdminService]
      .flatMap((s) => s.methods)
      .filter((m) => /^(Get|List)/.test(m.name) && m.methodKind === 'unary')
      .filter((m) => m.idempotency !== MethodOptions_IdempotencyLevel.NO_SIDE_EFFECTS)
      .map((m) => m.name);
    expect(undeclared).toEqual([]);
  });
});
