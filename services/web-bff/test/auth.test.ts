/**
 * Authentication and ownership through the real web-bff and conversation service: every RPC
 * without a token or with a wrong one is UNAUTHENTICATED; another user's conversation is
 * NOT_FOUND for every RPC that names one; sub-agents are hidden from listings.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Writable } from 'node:stream';
import { Code, ConnectError, createClient, type Client } from '@connectrpc/connect';
import { createGrpcTransport } from '@connectrpc/connect-node';
import { ConversationService, ServerTool, StopReason, ThinkingLevel, USER_HEADER } from '@bedrock/contracts';
import { createLogger, createTokenStore, generateToken, serviceTokenInterceptor, tokenEntriesOf } from '@bedrock/platform/server';
import { createWebBff } from '../src/create-web-bff.ts';
import { testBffConfig } from './support/bff-config.ts';
import { startSystem, type System } from './support/system.ts';

let s: System;
let aliceConversation: string;
beforeAll(async () => {
  s = await startSystem({ label: 'auth' });
  const created = await s.client(s.tokens.alice).createConversation({ cwd: '/tmp' });
  aliceConversation = created.conversation!.id;
});
afterAll(async () => {
  await s?.close();
});

type Svc = Client<typeof ConversationService>;

/** Every RPC of the service, naming `id` where it takes a conversation. */
function everyRpc(id: string): Record<string, (c: Svc) => Promise<unknown>> {
  return {
    CreateConversation: (c) => c.createConversation({ cwd: '/tmp' }),
    ListConversations: (c) => c.listConversations({}),
    GetConversation: (c) => c.getConversation({ conversationId: id }),
    SendMessage: (c) => c.sendMessage({ conversationId: id, text: 'hi' }),
    Cancel: (c) => c.cancel({ conversationId: id }),
    RespondToModeUpgrade: (c) => c.respondToModeUpgrade({ conversationId: id, approve: true }),
    DowngradeMode: (c) => c.downgradeMode({ conversationId: id }),
    TriggerContinuation: (c) => c.triggerContinuation({ conversationId: id }),
    UpdateConversationSettings: (c) => c.updateConversationSettings({ conversationId: id, thinking: ThinkingLevel.LOW }),
    WatchConversation: async (c) => {
      for await (const _ of c.watchConversation({ conversationId: id })) return;
    },
  };
}

async function codeOf(p: Promise<unknown>): Promise<Code | 'ok'> {
  try {
    await p;
    return 'ok';
  } catch (err) {
    return ConnectError.from(err).code;
  }
}

describe('authentication', () => {
  const cases: [string, () => string | undefined][] = [
    ['no token', () => undefined],
    ['a wrong token', () => `${s.tokens.alice}x`],
    ['an empty bearer', () => ''],
  ];
  for (const [what, token] of cases) {
    it(`refuses every RPC with ${what} as UNAUTHENTICATED`, async () => {
      for (const protocol of ['grpc', 'connect-h1', 'grpc-web-h1'] as const) {
        const client = s.client(token(), protocol);
        const codes: Record<string, Code | 'ok'> = {};
        for (const [name, rpc] of Object.entries(everyRpc(aliceConversation))) codes[name] = await codeOf(rpc(client));
        expect(Object.values(codes).every((c) => c === Code.Unauthenticated)).toBe(true);
        expect(Object.keys(codes)).toHaveLength(10);
      }
    });
  }

  it('says why in the message and never echoes the token', async () => {
    const err = ConnectError.from(
      await s
        .client(undefined)
        .listConversations({})
        .catch((e: unknown) => e),
    );
    expect(err.rawMessage).toMatch(/missing bearer token/);
    const wrong = `${s.tokens.alice}-nope`;
    const err2 = ConnectError.from(
      await s
        .client(wrong)
        .listConversations({})
        .catch((e: unknown) => e),
    );
    expect(err2.rawMessage).toBe('invalid bearer token');
    expect(err2.rawMessage).not.toContain(wrong);
  });

  it("serves a valid token's own conversations", async () => {
    const ok = await s.client(s.tokens.alice).listConversations({});
    expect(ok.conversations.map((c) => c.id)).toContain(aliceConversation);
  });
});

describe('service identity towards the conversation service', () => {
  /** A second web-bff in front of the same conversation service, presenting `serviceToken`. */
  async function otherBff(serviceToken: string | undefined) {
    const lines: string[] = [];
    const destination = new Writable({
      write(chunk: Buffer, _enc, done) {
        lines.push(chunk.toString());
        done();
      },
    });
    const user = generateToken();
    const bff = createWebBff(testBffConfig({ upstream: { conversationUrls: [s.conversation.grpcUrl] } }), {
      logger: createLogger({ service: 'web-bff', level: 'warn', destination }),
      tokens: createTokenStore(tokenEntriesOf({ alice: user })),
      ...(serviceToken === undefined ? {} : { serviceToken }),
    });
    await bff.start();
    const client = createClient(
      ConversationService,
      createGrpcTransport({ baseUrl: bff.grpcUrl, interceptors: [serviceTokenInterceptor(user)] }),
    );
    return { bff, client, log: () => lines.join('') };
  }

  for (const [what, token] of [
    ['no service token', undefined],
    ['a service token the conversation service does not list', generateToken()],
  ] as const) {
    it(`with ${what}, web-bff gets nothing: INTERNAL to the user, the fix in its log`, async () => {
      const other = await otherBff(token);
      try {
        const err = ConnectError.from(await other.client.getConversation({ conversationId: aliceConversation }).catch((e: unknown) => e));
        expect([err.code, err.rawMessage]).toEqual([Code.Internal, 'internal error']);
        expect(other.log()).toContain("the conversation service refused web-bff's service token: check BEDROCK_SERVICE_TOKEN_FILE");
        if (token === undefined) expect(other.log()).toContain('no service token (BEDROCK_SERVICE_TOKEN_FILE)');
        else expect(other.log()).not.toContain(token);
      } finally {
        await other.bff.stop();
      }
    });
  }
});

describe('ownership', () => {
  it("answers NOT_FOUND to bob for every RPC on alice's conversation", async () => {
    const bob = s.client(s.tokens.bob);
    const rpcs = everyRpc(aliceConversation);
    const codes: Record<string, Code | 'ok'> = {};
    for (const [name, rpc] of Object.entries(rpcs)) {
      if (name === 'CreateConversation' || name === 'ListConversations') continue;
      codes[name] = await codeOf(rpc(bob));
    }
    expect(codes).toEqual({
      GetConversation: Code.NotFound,
      SendMessage: Code.NotFound,
      Cancel: Code.NotFound,
      RespondToModeUpgrade: Code.NotFound,
      DowngradeMode: Code.NotFound,
      TriggerContinuation: Code.NotFound,
      UpdateConversationSettings: Code.NotFound,
      WatchConversation: Code.NotFound,
    });
    // Resuming a watch (no snapshot) is checked too.
    const resumed = await codeOf(
      (async () => {
        for await (const _ of bob.watchConversation({ conversationId: aliceConversation, afterSequence: 1n })) return;
      })(),
    );
    expect(resumed).toBe(Code.NotFound);
    // Listing under alice's conversation as a parent, and continuing from it.
    expect(await codeOf(bob.listConversations({ parentId: aliceConversation }))).toBe(Code.NotFound);
    expect(await codeOf(bob.createConversation({ cwd: '/tmp', continueFromId: aliceConversation }))).toBe(Code.NotFound);
    // And bob's list does not show it.
    const list = await bob.listConversations({});
    expect(list.conversations.map((c) => c.id)).not.toContain(aliceConversation);
  });

  it('ignores a bedrock-user-id header sent by a client', async () => {
    const bob = s.client(s.tokens.bob);
    const err = await bob
      .getConversation({ conversationId: aliceConversation }, { headers: { [USER_HEADER]: 'alice' } })
      .catch((e: unknown) => ConnectError.from(e));
    expect((err as ConnectError).code).toBe(Code.NotFound);
  });

  it('hides sub-agents from listings; their parent lists them; only the owner can read them', async () => {
    const alice = s.client(s.tokens.alice);
    const parent = (await alice.createConversation({ cwd: '/tmp' })).conversation!.id;
    await alice.sendMessage({ conversationId: parent, text: 'split the work' });
    const job = await s.waitFor('llm request', () => s.llmJobs.find((j) => j.conversationId === parent));
    await s.send(parent, `r/${job.requestId}`, {
      case: 'llmResponse',
      value: {
        requestId: job.requestId,
        stopReason: StopReason.TOOL_USE,
        usage: { inputTokens: 10n, outputTokens: 5n },
        content: [
          {
            block: {
              case: 'toolUse',
              value: { id: 'sp1', name: 'spawn_agents', inputJson: JSON.stringify({ tasks: [{ task: 'look at a' }] }) },
            },
          },
        ],
      },
    });
    const children = await s.waitFor('sub-agent listed under its parent', async () => {
      const page = await alice.listConversations({ parentId: parent });
      return page.conversations.length > 0 && page.conversations;
    });
    const child = children[0]!;
    expect(child.parentId).toBe(parent);
    expect(child.userInitiated).toBe(false);
    const top = await alice.listConversations({});
    expect(top.conversations.map((c) => c.id)).toContain(parent);
    expect(top.conversations.map((c) => c.id)).not.toContain(child.id);
    expect((await alice.getConversation({ conversationId: child.id })).conversation!.parentId).toBe(parent);
    expect(await codeOf(s.client(s.tokens.bob).getConversation({ conversationId: child.id }))).toBe(Code.NotFound);
  });

  it('passes validation errors through with their code and message', async () => {
    const err = ConnectError.from(
      await s
        .client(s.tokens.alice)
        .createConversation({ cwd: '../relative' })
        .catch((e: unknown) => e),
    );
    expect(err.code).toBe(Code.InvalidArgument);
    expect(err.rawMessage).toMatch(/leaves the workspace \('\.\.'\): give a directory inside it/);

    // A server tool this deployment does not allow (none by default): the service's sentence, as it wrote it.
    const tool = ConnectError.from(
      await s
        .client(s.tokens.alice)
        .updateConversationSettings({ conversationId: aliceConversation, serverTools: { tools: [ServerTool.WEB_SEARCH] } })
        .catch((e: unknown) => e),
    );
    expect(tool.code).toBe(Code.InvalidArgument);
    expect(tool.rawMessage).toMatch(/web_search/);
    expect(tool.rawMessage).not.toMatch(/\.\.|internal/);
  });

  it("changes the owner's settings through web-bff", async () => {
    const res = await s
      .client(s.tokens.alice)
      .updateConversationSettings({ conversationId: aliceConversation, thinking: ThinkingLevel.LOW, serverTools: { tools: [] } });
    expect(res.conversation).toMatchObject({ id: aliceConversation, thinking: ThinkingLevel.LOW, serverTools: [] });
    const got = await s.client(s.tokens.alice).getConversation({ conversationId: aliceConversation });
    expect(got.conversation!.thinking).toBe(ThinkingLevel.LOW);
  });
});
