/**
 * ForkConversation through the whole product (web-bff, the conversation service, the real llm-gateway
 * and tool-runner) against the strict local Messages API server: a turn with signed thinking and two
 * tools is forked at each message boundary and a message sent in each fork; every turn completes, the
 * server saw no invalid request, the source is unchanged. Once on PostgreSQL, once on the embedded PGlite
 * (migration 008 runs there too).
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Code, ConnectError, createClient, type Client } from '@connectrpc/connect';
import { createConnectTransport } from '@connectrpc/connect-node';
import { ConversationService, MessageType, Mode, StateKind, type GetConversationResponse } from '@bedrock/contracts';
import { startMessagesApiServer, type MessagesApiServer, type ReceivedRequest, type ScriptedResponse } from '@bedrock/offline-model';
import { createTestDatabase, type TestDatabase } from '@bedrock/testkit/database';
import { startEmbedded, type RunningEmbedded } from '../src/index.ts';

/** The text of the request's last user turn, and whether it starts with tool results. */
function lastUserTurn(request: ReceivedRequest): { text: string; results: boolean } {
  const last = request.body?.messages.at(-1);
  if (!last || last.role !== 'user') return { text: '', results: false };
  const blocks = typeof last.content === 'string' ? [{ type: 'text', text: last.content }] : last.content;
  return {
    text: blocks.map((b) => (b.type === 'text' ? (b.text ?? '') : '')).join(' '),
    results: blocks[0]?.type === 'tool_result',
  };
}

/** The model: a turn with signed thinking and two tools for "Look around", then an answer to anything else. */
function respond(request: ReceivedRequest): ScriptedResponse {
  const { text, results } = lastUserTurn(request);
  if (results && !text)
    return {
      kind: 'message',
      content: [
        { type: 'thinking', thinking: 'Both ran.' },
        { type: 'text', text: 'Two lines.' },
      ],
    };
  if (text === 'Look around') {
    return {
      kind: 'message',
      content: [
        { type: 'thinking', thinking: 'List it twice.' },
        { type: 'text', text: 'Running two commands.' },
        { type: 'tool_use', name: 'bash', input: { command: 'echo one' } },
        { type: 'tool_use', name: 'bash', input: { command: 'echo two' } },
      ],
    };
  }
  return {
    kind: 'message',
    content: [
      { type: 'thinking', thinking: 'A fork.' },
      { type: 'text', text: `Answered: ${text.slice(-40)}` },
    ],
  };
}

describe.each(['postgres', 'pglite'] as const)('forks on %s through the whole product', (database) => {
  let llm: MessagesApiServer;
  let db: TestDatabase | undefined;
  let bedrock: RunningEmbedded;
  let client: Client<typeof ConversationService>;
  let dataDir: string;
  let cwd: string;

  beforeAll(async () => {
    llm = await startMessagesApiServer({ fallback: respond });
    if (database === 'postgres') db = await createTestDatabase('embedded_forks');
    dataDir = mkdtempSync(join(tmpdir(), 'bedrock-forks-data-'));
    cwd = mkdtempSync(join(tmpdir(), 'bedrock-forks-cwd-'));
    bedrock = await startEmbedded({
      env: {
        ...process.env,
        BEDROCK_DATA_DIR: dataDir,
        BEDROCK_PORT: '0',
        BEDROCK_GRPC_PORT: '0',
        ANTHROPIC_API_KEY: 'test-key',
        ANTHROPIC_BASE_URL: llm.url,
        BEDROCK_DEFAULT_MODEL: 'claude-haiku-4-5',
        DATABASE_URL: db?.url ?? '',
        LOG_LEVEL: 'warn',
      },
    });
    client = createClient(
      ConversationService,
      createConnectTransport({
        baseUrl: bedrock.httpUrl,
        httpVersion: '1.1',
        interceptors: [
          (next) => (req) => {
            req.header.set('authorization', `Bearer ${bedrock.token}`);
            return next(req);
          },
        ],
      }),
    );
  }, 120_000);

  afterAll(async () => {
    await bedrock?.stop();
    await llm?.close();
    await db?.drop();
    for (const dir of [dataDir, cwd]) if (dir) rmSync(dir, { recursive: true, force: true });
  }, 60_000);

  /** Waits until the conversation is at rest in `kind` with at least `messages` messages. */
  async function settled(id: string, kind: StateKind, messages: number): Promise<GetConversationResponse> {
    const deadline = Date.now() + 30_000;
    for (;;) {
      const got = await client.getConversation({ conversationId: id });
      if (got.conversation!.state!.kind === kind && got.messages.length >= messages) return got;
      if (got.conversation!.state!.kind === StateKind.ERROR) throw new Error(`${id} failed: ${got.conversation!.state!.errorMessage}`);
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${id} (${StateKind[got.conversation!.state!.kind]})`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  /** Forks `source` at `at` and has a turn in the fork; returns the fork's messages. */
  async function forkAndTalk(source: string, at: number, copied: number) {
    const fork = (await client.forkConversation({ conversationId: source, atMessage: BigInt(at) })).conversation!;
    expect(fork.state!.kind).toBe(StateKind.IDLE);
    expect(fork.mode).toBe(fork.sandboxAvailable ? Mode.RESTRICTED : Mode.UNRESTRICTED);
    expect(fork.forkedFrom?.conversationId).toBe(source);
    expect((await client.getConversation({ conversationId: fork.id })).messages).toHaveLength(copied);
    await client.sendMessage({ conversationId: fork.id, text: `Carry on from message ${at}` });
    const got = await settled(fork.id, StateKind.IDLE, copied + 2);
    const answer = got.messages.at(-1)!;
    expect(answer.type).toBe(MessageType.AGENT);
    // The model answered the fork's new message (after a user message it joins that one's turn).
    expect(answer.content.map((b) => (b.block.case === 'text' ? b.block.value.text : '')).join('')).toMatch(
      new RegExp(`^Answered: .*Carry on from message ${at}$`),
    );
    return got.messages;
  }

  it('forks at every boundary of a turn with thinking and tools; every fork takes a message the strict API accepts', async () => {
    const source = (await client.createConversation({ cwd })).conversation!.id;
    await client.sendMessage({ conversationId: source, text: 'Look around' });
    const before = await settled(source, StateKind.IDLE, 5);
    expect(before.messages.map((m) => MessageType[m.type])).toEqual(['USER', 'AGENT', 'TOOL', 'TOOL', 'AGENT']);

    await forkAndTalk(source, 1, 1); // after a user message
    for (const at of [2, 3]) {
      // Between the tool calls and their results.
      const err = ConnectError.from(
        await client.forkConversation({ conversationId: source, atMessage: BigInt(at) }).catch((e: unknown) => e),
      );
      expect(err.code).toBe(Code.InvalidArgument);
      expect(err.rawMessage).toMatch(/fork at message 1 \(before the call\) or at message 4 \(after its results\)$/);
    }
    await forkAndTalk(source, 4, 4); // after the tool results (the thinking before them goes back signed)
    await forkAndTalk(source, 5, 5); // after an assistant text with signed thinking

    // After a continuation summary: the source is exhausted, a fork of it is not.
    await client.triggerContinuation({ conversationId: source });
    const exhausted = await settled(source, StateKind.CONTEXT_EXHAUSTED, 6);
    expect(exhausted.messages.at(-1)!.type).toBe(MessageType.CONTINUATION);
    const whole = await forkAndTalk(source, 0, 6);
    expect(whole.slice(0, 6).map((m) => m.content)).toEqual(exhausted.messages.map((m) => m.content));

    // The source is as it was (its summary added by its own continuation).
    const after = await client.getConversation({ conversationId: source });
    expect(after.messages).toEqual(exhausted.messages);
    expect(after.messages.slice(0, 5)).toEqual(before.messages);
    expect(llm.violations).toEqual([]);
    // The fork requests really carried the copied, signed thinking back to the server.
    const signedBack = llm.requests.filter((r) =>
      r.body?.messages.some((m) => typeof m.content !== 'string' && m.content.some((b) => b.type === 'thinking')),
    );
    expect(signedBack.length).toBeGreaterThanOrEqual(4);
    const listed = await client.listConversations({ query: 'Fork of Look around' });
    expect(listed.conversations).toHaveLength(4);
  }, 120_000);
});
