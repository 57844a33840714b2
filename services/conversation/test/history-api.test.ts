/**
 * Claim-check LLM jobs (docs/conversation.md, "LLM request jobs"): a job names its conversation
 * and history position, not the history, and ConversationHistoryService answers the history
 * to the llm-gateway only — against the real server, Postgres and Redis.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createClient, type Interceptor } from '@connectrpc/connect';
import { createGrpcTransport } from '@connectrpc/connect-node';
import { ConversationHistoryService, Role, StateKind } from '@bedrock/contracts';
import { generateToken, serviceTokenInterceptor } from '@bedrock/platform/server';
import { text, textOf } from './support/blocks.ts';
import { Code, rpcError, startHarness, type Harness } from './support/harness.ts';

let h: Harness;
beforeAll(async () => {
  h = await startHarness({ label: 'historyapi' });
});
afterAll(async () => {
  await h?.close();
});

function client(...interceptors: Interceptor[]) {
  return createClient(ConversationHistoryService, createGrpcTransport({ baseUrl: h.service.grpcUrl, interceptors }));
}
const asService = (name: string) => client(serviceTokenInterceptor(h.services.tokens[name]!));

/** A conversation with `turns` answered turns: user, agent, user, agent, ... */
async function conversation(turns: number, say = (i: number) => `question ${i}`) {
  const id = await h.createConversation();
  for (let i = 0; i < turns; i++) {
    await h.client().sendMessage({ conversationId: id, text: say(i) });
    await h.respond(await h.llmJob(id, i), { content: [text(`answer ${i}`)] });
    await h.waitState(id, StateKind.IDLE);
  }
  return id;
}

const llmJobBytes = async (id: string) => {
  const { rows } = await h.pool.query<{ bytes: number }>(
    `SELECT octet_length(payload::text) AS bytes FROM outbox_effects
      WHERE conversation_id = $1 AND kind = 'job' AND payload->>'queue' = 'llm-requests' ORDER BY id, n`,
    [id],
  );
  return rows.map((r) => r.bytes);
};

describe('ConversationHistoryService', () => {
  it('the job names its history by position; the gateway reads exactly those messages', async () => {
    const id = await conversation(2);
    await h.client().sendMessage({ conversationId: id, text: 'third' });
    const job = await h.llmJob(id, 2);
    expect(job.historyThrough).toBe(5n);
    expect(job.continuationPrompt).toBe('');
    const gateway = asService('llm-gateway');
    const all = await gateway.getLlmHistory({ conversationId: id, historyThrough: 5n });
    expect(all.messages.map((m) => [m.role, textOf(m.content)])).toEqual([
      [Role.USER, 'question 0'],
      [Role.ASSISTANT, 'answer 0'],
      [Role.USER, 'question 1'],
      [Role.ASSISTANT, 'answer 1'],
      [Role.USER, 'third'],
    ]);
    // What the played gateway fetched for the job is the same history.
    expect(job.messages).toEqual(all.messages);
    // An earlier position reads the earlier history: later messages never leak in.
    const first = await gateway.getLlmHistory({ conversationId: id, historyThrough: 1n });
    expect(first.messages.map((m) => textOf(m.content))).toEqual(['question 0']);
  });

  it('appends the continuation prompt to the last user turn, or as a new user turn after the assistant', async () => {
    const id = await conversation(1);
    const gateway = asService('llm-gateway');
    const toUser = await gateway.getLlmHistory({ conversationId: id, historyThrough: 1n, continuationPrompt: 'Summarise.' });
    expect(toUser.messages).toHaveLength(1);
    expect(toUser.messages[0]!.content.map((b) => (b.block.case === 'text' ? b.block.value.text : ''))).toEqual([
      'question 0',
      'Summarise.',
    ]);
    const afterAssistant = await gateway.getLlmHistory({ conversationId: id, historyThrough: 2n, continuationPrompt: 'Summarise.' });
    expect(afterAssistant.messages.map((m) => [m.role, textOf(m.content)])).toEqual([
      [Role.USER, 'question 0'],
      [Role.ASSISTANT, 'answer 0'],
      [Role.USER, 'Summarise.'],
    ]);
  });

  it('answers only llm-gateway: other services are denied, callers without a token unauthenticated', async () => {
    const id = await conversation(1);
    for (const name of ['web-bff', 'tool-runner', 'conversation']) {
      const err = await rpcError(asService(name).getLlmHistory({ conversationId: id, historyThrough: 1n }));
      expect(err.code).toBe(Code.PermissionDenied);
      expect(err.rawMessage).toBe(
        `service ${name} may not read conversation histories: only llm-gateway may call bedrock.internal.v1.ConversationHistoryService`,
      );
    }
    const none = await rpcError(client().getLlmHistory({ conversationId: id, historyThrough: 1n }));
    expect(none.code).toBe(Code.Unauthenticated);
    expect(none.rawMessage).toMatch(/BEDROCK_SERVICE_TOKEN_FILE/);
    const stranger = await rpcError(
      client(serviceTokenInterceptor(generateToken())).getLlmHistory({ conversationId: id, historyThrough: 1n }),
    );
    expect(stranger.code).toBe(Code.Unauthenticated);
  });

  it('NOT_FOUND for an unknown conversation, FAILED_PRECONDITION beyond its last message, INVALID_ARGUMENT for bad input', async () => {
    const id = await conversation(1);
    const gateway = asService('llm-gateway');
    const missing = await rpcError(gateway.getLlmHistory({ conversationId: 'no-such-conversation', historyThrough: 1n }));
    expect(missing.code).toBe(Code.NotFound);
    expect(missing.rawMessage).toBe('conversation no-such-conversation not found');
    const beyond = await rpcError(gateway.getLlmHistory({ conversationId: id, historyThrough: 3n }));
    expect(beyond.code).toBe(Code.FailedPrecondition);
    expect(beyond.rawMessage).toContain(`history_through 3 is beyond conversation ${id}'s last message (2)`);
    for (const [req, message] of [
      [{ conversationId: '', historyThrough: 1n }, /conversation_id is required/],
      [{ conversationId: 'x'.repeat(513), historyThrough: 1n }, /conversation_id is too long/],
      [{ conversationId: id, historyThrough: 0n }, /history_through is required/],
      [{ conversationId: id, historyThrough: 2n ** 60n }, /out of range/],
    ] as const) {
      const err = await rpcError(gateway.getLlmHistory(req));
      expect(err.code).toBe(Code.InvalidArgument);
      expect(err.rawMessage).toMatch(message);
    }
  });

  it("a job's size does not grow with the history", async () => {
    // Every turn adds ~4 KB of history; the jobs stay the same size (ids and counters aside).
    const id = await conversation(12, (i) => `${i} ${'long question text '.repeat(200)}`);
    const sizes = await llmJobBytes(id);
    expect(sizes).toHaveLength(12);
    const { rows } = await h.pool.query<{ bytes: number }>(
      'SELECT sum(octet_length(content::text))::int AS bytes FROM messages WHERE conversation_id = $1',
      [id],
    );
    expect(rows[0]!.bytes).toBeGreaterThan(40_000);
    expect(Math.max(...sizes) - Math.min(...sizes)).toBeLessThanOrEqual(8);
    expect(Math.max(...sizes)).toBeLessThan(2_000);
  });
});
