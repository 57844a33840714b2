/**
 * UpdateConversationSettings through the real web-bff, in front of a stand-in conversation service
 * that records what reaches it: forwarded as the caller with its body intact on every protocol; the
 * service's answers and refusals pass through as they are; a call without a token never gets
 * there. (auth.test.ts checks the same RPC against the real conversation service.)
 */
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Code, ConnectError, createClient, type Client } from '@connectrpc/connect';
import { createConnectTransport, createGrpcTransport, createGrpcWebTransport } from '@connectrpc/connect-node';
import {
  ConversationService,
  ServerTool,
  ThinkingLevel,
  USER_HEADER,
  rejectionError,
  rejectionOf,
  type UpdateConversationSettingsRequest,
} from '@bedrock/contracts';
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

interface Seen {
  readonly req: UpdateConversationSettingsRequest;
  readonly user: string | null;
  readonly authorization: string | null;
}

const NOT_ALLOWED = 'server_tools: web_fetch is not allowed by this deployment (BEDROCK_SERVER_TOOLS allows web_search).';

let upstream: GrpcServer;
let bff: WebBff;
const seen: Seen[] = [];
const serviceToken = generateToken();
const tokens = { alice: generateToken(), bob: generateToken() };

beforeAll(async () => {
  upstream = await startGrpcServer({
    port: 0,
    host: '127.0.0.1',
    logger: createLogger({ service: 'stand-in', level: 'silent' }),
    routes: (router) =>
      router.service(ConversationService, {
        updateConversationSettings: (req, ctx) => {
          seen.push({ req, user: ctx.requestHeader.get(USER_HEADER), authorization: ctx.requestHeader.get('authorization') });
          if (req.conversationId !== 'alices' || ctx.requestHeader.get(USER_HEADER) !== 'alice') {
            throw new ConnectError(`conversation ${req.conversationId} not found`, Code.NotFound);
          }
          if (req.serverTools?.tools.includes(ServerTool.WEB_FETCH)) {
            throw rejectionError({ code: 'server-tool-not-allowed', message: NOT_ALLOWED }, Code.InvalidArgument);
          }
          const tools = req.serverTools ? req.serverTools.tools : [ServerTool.WEB_SEARCH];
          return { conversation: { id: req.conversationId, thinking: req.thinking || ThinkingLevel.HIGH, serverTools: tools } };
        },
      }),
  });
  bff = createWebBff(testBffConfig({ upstream: { conversationUrls: [upstream.url] } }), {
    logger: createLogger({ service: 'web-bff', level: 'silent', destination: new Writable({ write: (_c, _e, done) => done() }) }),
    tokens: createTokenStore(tokenEntriesOf(tokens)),
    serviceToken,
  });
  await bff.start();
});
afterAll(async () => {
  await bff?.stop();
  await upstream?.close(0);
});

type Protocol = 'connect-h1' | 'connect-json-h1' | 'grpc' | 'grpc-web-h1';

function client(token: string | undefined, protocol: Protocol = 'connect-h1'): Client<typeof ConversationService> {
  const interceptors = token === undefined ? [] : [serviceTokenInterceptor(token)];
  switch (protocol) {
    case 'connect-h1':
      return createClient(
        ConversationService,
        createConnectTransport({ baseUrl: bff.httpUrl, httpVersion: '1.1', useBinaryFormat: true, interceptors }),
      );
    case 'connect-json-h1':
      return createClient(ConversationService, createConnectTransport({ baseUrl: bff.httpUrl, httpVersion: '1.1', interceptors }));
    case 'grpc':
      return createClient(ConversationService, createGrpcTransport({ baseUrl: bff.grpcUrl, interceptors }));
    case 'grpc-web-h1':
      return createClient(ConversationService, createGrpcWebTransport({ baseUrl: bff.httpUrl, httpVersion: '1.1', interceptors }));
  }
}

async function failure(p: Promise<unknown>): Promise<ConnectError> {
  try {
    await p;
  } catch (err) {
    return ConnectError.from(err);
  }
  throw new Error('expected the call to fail');
}

describe('UpdateConversationSettings through web-bff', () => {
  // As the caller: the service token and the user id. Intact: an unset server-tool selection
  // ("unchanged") stays unset and an empty one ("all off") stays set.
  for (const protocol of ['connect-h1', 'connect-json-h1', 'grpc', 'grpc-web-h1'] as const) {
    it(`forwards the call as the caller with its body intact (${protocol})`, async () => {
      seen.length = 0;
      const c = client(tokens.alice, protocol);
      const off = await c.updateConversationSettings({ conversationId: 'alices', thinking: ThinkingLevel.LOW, serverTools: { tools: [] } });
      expect(off.conversation).toMatchObject({ id: 'alices', thinking: ThinkingLevel.LOW, serverTools: [] });
      const unchanged = await c.updateConversationSettings({ conversationId: 'alices', thinking: ThinkingLevel.MAX });
      expect(unchanged.conversation).toMatchObject({ thinking: ThinkingLevel.MAX, serverTools: [ServerTool.WEB_SEARCH] });
      const on = await c.updateConversationSettings({ conversationId: 'alices', serverTools: { tools: [ServerTool.WEB_SEARCH] } });
      expect(on.conversation).toMatchObject({ thinking: ThinkingLevel.HIGH, serverTools: [ServerTool.WEB_SEARCH] });

      expect(seen.map((s) => [s.user, s.authorization])).toEqual(Array(3).fill(['alice', `Bearer ${serviceToken}`]));
      const [first, second, third] = seen.map((s) => s.req);
      // An empty selection is "turn every server tool off": it must arrive set, not dropped.
      expect(first).toMatchObject({ conversationId: 'alices', thinking: ThinkingLevel.LOW });
      expect(first!.serverTools).toBeDefined();
      expect(first!.serverTools!.tools).toEqual([]);
      // No selection is "leave the server tools as they are".
      expect(second!.thinking).toBe(ThinkingLevel.MAX);
      expect(second!.serverTools).toBeUndefined();
      expect(third!.thinking).toBe(ThinkingLevel.UNSPECIFIED);
      expect(third!.serverTools!.tools).toEqual([ServerTool.WEB_SEARCH]);
    });
  }

  it("passes INVALID_ARGUMENT through with the service's sentence and its rejection detail", async () => {
    for (const protocol of ['connect-h1', 'grpc'] as const) {
      const err = await failure(
        client(tokens.alice, protocol).updateConversationSettings({
          conversationId: 'alices',
          serverTools: { tools: [ServerTool.WEB_FETCH] },
        }),
      );
      expect([err.code, err.rawMessage]).toEqual([Code.InvalidArgument, NOT_ALLOWED]);
      expect(rejectionOf(err)).toMatchObject({ code: 'server-tool-not-allowed', message: NOT_ALLOWED });
    }
  });

  it("answers NOT_FOUND for another user's conversation (the service decides, as the caller)", async () => {
    seen.length = 0;
    const err = await failure(client(tokens.bob).updateConversationSettings({ conversationId: 'alices', thinking: ThinkingLevel.OFF }));
    expect([err.code, err.rawMessage]).toEqual([Code.NotFound, 'conversation alices not found']);
    expect(seen.map((s) => s.user)).toEqual(['bob']);
  });

  it('refuses a call without a valid token before it reaches the service', async () => {
    seen.length = 0;
    for (const token of [undefined, `${tokens.alice}x`]) {
      const err = await failure(client(token).updateConversationSettings({ conversationId: 'alices', thinking: ThinkingLevel.OFF }));
      expect(err.code).toBe(Code.Unauthenticated);
    }
    expect(seen).toEqual([]);
  });
});
