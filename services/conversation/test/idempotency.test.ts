/**
 * Idempotent user actions (docs/conversation.md, "Idempotent requests"), through the real API
 * on real Postgres: a retry with the same request id is answered with the first outcome and
 * applies nothing; duplicates in flight at once on two replicas apply once; the same id with
 * a different body is INVALID_ARGUMENT; outcomes are pruned after the retention.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { toBinary } from '@bufbuild/protobuf';
import { MessageType, SendMessageResponseSchema, StateKind, StopReason, rejectionOf } from '@bedrock/contracts';
import type { ConversationServiceInstance } from '../src/create-conversation-service.ts';
import { startRequestPruner } from '../src/store/request-outcomes.ts';
import { text, toolUse } from './support/blocks.ts';
import { Code, rpcError, startHarness, type Harness } from './support/harness.ts';

let h: Harness;
let b: ConversationServiceInstance;
beforeAll(async () => {
  h = await startHarness({ label: 'idempotency', workerConcurrency: 16 });
  b = await h.startReplica();
});
afterAll(async () => {
  await h?.close();
});

let n = 0;
const rid = () => `req-${process.pid}-${++n}-${Math.random().toString(36).slice(2, 8)}`;

async function userMessages(id: string) {
  return (await h.get(id)).messages.filter((m) => m.type === MessageType.USER);
}

async function outcomeRows(requestId: string) {
  const { rows } = await h.pool.query('SELECT method, scope, owner_id FROM request_outcomes WHERE request_id = $1', [requestId]);
  return rows;
}

describe('SendMessage with a request id', () => {
  it('a retry returns the first response and adds nothing, even after the turn went on', async () => {
    const id = await h.createConversation();
    const requestId = rid();
    const first = await h.client().sendMessage({ conversationId: id, text: 'run the tests', requestId });
    expect(first.message?.id).toBeTruthy();
    expect(first.state?.kind).toBe(StateKind.LLM_REQUESTING);
    // The turn goes on and ends: a second message would now be accepted.
    await h.respond(await h.llmJob(id), { content: [text('done')] });
    await h.waitState(id, StateKind.IDLE);

    // The retry (say the first answer was lost with a killed replica) — through the other replica.
    const retry = await h.client('alice', b).sendMessage({ conversationId: id, text: 'run the tests', requestId });
    expect(toBinary(SendMessageResponseSchema, retry)).toEqual(toBinary(SendMessageResponseSchema, first));
    expect(retry.state?.kind).toBe(StateKind.LLM_REQUESTING);
    const users = await userMessages(id);
    expect(users).toHaveLength(1);
    expect(h.llmJobsOf(id)).toHaveLength(1);
    expect(await h.stateOf(id)).toBe(StateKind.IDLE);
    expect(await outcomeRows(requestId)).toEqual([{ method: 'SendMessage', scope: id, owner_id: 'alice' }]);
  });

  it('a retry answers with the message it persisted, images included (stored once, in messages)', async () => {
    const id = await h.createConversation();
    const requestId = rid();
    // A 1×1 PNG.
    const png = Buffer.from('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==', 'base64');
    const body = { conversationId: id, text: 'look', images: [{ mediaType: 'image/png', data: png }], requestId };
    const first = await h.client().sendMessage(body);
    const retry = await h.client().sendMessage(body);
    expect(toBinary(SendMessageResponseSchema, retry)).toEqual(toBinary(SendMessageResponseSchema, first));
    expect(retry.message?.content.map((c) => c.block.case)).toEqual(['text', 'image']);
    const { rows } = await h.pool.query<{ response: Buffer; message_id: string }>(
      'SELECT response, message_id FROM request_outcomes WHERE request_id = $1',
      [requestId],
    );
    expect(rows[0]!.message_id).toBe(first.message!.id);
    expect(rows[0]!.response.includes(png)).toBe(false);
    expect(await userMessages(id)).toHaveLength(1);
  });

  it('duplicates in flight at once on two replicas apply once and all get the same answer', async () => {
    const id = await h.createConversation();
    const requestId = rid();
    const calls = Array.from({ length: 6 }, (_, i) =>
      (i % 2 ? h.client('alice', b) : h.client()).sendMessage({ conversationId: id, text: 'once', requestId }),
    );
    const answers = await Promise.all(calls);
    const ids = new Set(answers.map((a) => a.message?.id));
    expect(ids.size).toBe(1);
    expect([...ids][0]).toBeTruthy();
    for (const a of answers) expect(toBinary(SendMessageResponseSchema, a)).toEqual(toBinary(SendMessageResponseSchema, answers[0]!));
    expect(await userMessages(id)).toHaveLength(1);
    await h.llmJob(id);
    await new Promise((r) => setTimeout(r, 200));
    expect(h.llmJobsOf(id)).toHaveLength(1);
  });

  it('the same id with a different body is INVALID_ARGUMENT and changes nothing', async () => {
    const id = await h.createConversation();
    const requestId = rid();
    await h.client().sendMessage({ conversationId: id, text: 'first', requestId });
    const reused = await rpcError(h.client().sendMessage({ conversationId: id, text: 'second', requestId }));
    expect(reused.code).toBe(Code.InvalidArgument);
    expect(reused.rawMessage).toMatch(/request id .* reused for a different message/);
    // For another method, too.
    const other = await rpcError(h.client().cancel({ conversationId: id, requestId }));
    expect(other.code).toBe(Code.InvalidArgument);
    expect(other.rawMessage).toMatch(/reused for a different request \(it was used for SendMessage\)/);
    expect((await userMessages(id)).map((m) => m.content[0]?.block.value)).toEqual([expect.objectContaining({ text: 'first' })]);
    expect(await h.stateOf(id)).toBe(StateKind.LLM_REQUESTING);
  });

  it('a refusal is the first outcome too: the retry gets the same error even once the agent is free', async () => {
    const id = await h.createConversation();
    await h.client().sendMessage({ conversationId: id, text: 'busy now' });
    const requestId = rid();
    const busy = await rpcError(h.client().sendMessage({ conversationId: id, text: 'second', requestId }));
    expect(busy.code).toBe(Code.FailedPrecondition);
    await h.respond(await h.llmJob(id), { content: [text('ok')] });
    await h.waitState(id, StateKind.IDLE);
    const again = await rpcError(h.client().sendMessage({ conversationId: id, text: 'second', requestId }));
    expect(again.code).toBe(Code.FailedPrecondition);
    expect(again.rawMessage).toBe(busy.rawMessage);
    expect(rejectionOf(busy)).toMatchObject({ code: 'agent_busy', message: busy.rawMessage });
    expect(rejectionOf(again)).toEqual(rejectionOf(busy));
    expect(await userMessages(id)).toHaveLength(1);
  });

  it('ids are scoped to the user and the conversation; without an id nothing changes; malformed ids are refused', async () => {
    const a = await h.createConversation();
    const c = await h.createConversation();
    const requestId = rid();
    await h.client().sendMessage({ conversationId: a, text: 'x', requestId });
    await h.client().sendMessage({ conversationId: c, text: 'x', requestId });
    expect(await userMessages(a)).toHaveLength(1);
    expect(await userMessages(c)).toHaveLength(1);
    // Without an id, a second send is a second message (here: refused, the agent is busy), as before.
    const plain = await rpcError(h.client().sendMessage({ conversationId: a, text: 'x' }));
    expect(plain.code).toBe(Code.FailedPrecondition);
    const long = await rpcError(h.client().sendMessage({ conversationId: a, text: 'x', requestId: 'r'.repeat(129) }));
    expect(long.code).toBe(Code.InvalidArgument);
    expect(long.rawMessage).toMatch(/request_id is too long/);
    const spaced = await rpcError(h.client().sendMessage({ conversationId: a, text: 'x', requestId: 'a b' }));
    expect(spaced.code).toBe(Code.InvalidArgument);
    // Another user's conversation stays NOT_FOUND, whatever the id.
    expect((await rpcError(h.client('bob').sendMessage({ conversationId: a, text: 'x', requestId }))).code).toBe(Code.NotFound);
  });
});

describe('the other user actions with a request id', () => {
  it('Cancel: a retry returns the first answer instead of "nothing to cancel"', async () => {
    const id = await h.createConversation();
    await h.client().sendMessage({ conversationId: id, text: 'go' });
    await h.llmJob(id);
    const requestId = rid();
    const first = await h.client().cancel({ conversationId: id, requestId });
    await h.waitState(id, StateKind.IDLE, 'alice', 15_000);
    const retry = await h.client('alice', b).cancel({ conversationId: id, requestId });
    expect(retry.state?.kind).toBe(first.state?.kind);
    // Without the id the same call is refused now.
    expect((await rpcError(h.client().cancel({ conversationId: id }))).code).toBe(Code.FailedPrecondition);
  });

  it('RespondToModeUpgrade: a retried approval does not answer a later request', async () => {
    const id = await h.createConversation();
    await h.client().sendMessage({ conversationId: id, text: 'fix it' });
    await h.respond(await h.llmJob(id), {
      stopReason: StopReason.TOOL_USE,
      content: [toolUse('u1', 'request_mode_upgrade', { reason: 'edit' })],
    });
    await h.waitState(id, StateKind.AWAITING_MODE_APPROVAL);
    const requestId = rid();
    const first = await h.client().respondToModeUpgrade({ conversationId: id, approve: false, requestId });
    // The agent asks again; the retry of the first answer must not answer this one.
    await h.respond(await h.llmJob(id, 1), {
      stopReason: StopReason.TOOL_USE,
      content: [toolUse('u2', 'request_mode_upgrade', { reason: 'really' })],
    });
    await h.waitState(id, StateKind.AWAITING_MODE_APPROVAL);
    const retry = await h.client().respondToModeUpgrade({ conversationId: id, approve: false, requestId });
    expect(retry.conversation?.state?.kind).toBe(first.conversation?.state?.kind);
    expect(await h.stateOf(id)).toBe(StateKind.AWAITING_MODE_APPROVAL);
  });

  it('DowngradeMode and TriggerContinuation: a retry returns the first answer', async () => {
    const id = await h.createConversation();
    const cont = rid();
    const first = await h.client().triggerContinuation({ conversationId: id, requestId: cont });
    const retry = await h.client().triggerContinuation({ conversationId: id, requestId: cont });
    expect(retry).toEqual(first);
    expect((await rpcError(h.client().triggerContinuation({ conversationId: id }))).code).toBe(Code.FailedPrecondition);
    // Downgrade from Unrestricted (after an approved upgrade); the retry is not "already Restricted".
    const up = await h.createConversation();
    await h.client().sendMessage({ conversationId: up, text: 'fix it' });
    await h.respond(await h.llmJob(up), {
      stopReason: StopReason.TOOL_USE,
      content: [toolUse('u1', 'request_mode_upgrade', { reason: 'edit' })],
    });
    await h.waitState(up, StateKind.AWAITING_MODE_APPROVAL);
    await h.client().respondToModeUpgrade({ conversationId: up, approve: true });
    const down = rid();
    const d1 = await h.client().downgradeMode({ conversationId: up, requestId: down });
    const d2 = await h.client('alice', b).downgradeMode({ conversationId: up, requestId: down });
    expect(d2).toEqual(d1);
    expect((await rpcError(h.client().downgradeMode({ conversationId: up }))).rawMessage).toMatch(/already/i);
  });

  it('CreateConversation: retries and concurrent duplicates create one conversation', async () => {
    const requestId = rid();
    const list = async () => (await h.client('carol').listConversations({})).conversations;
    const first = await h.client('carol').createConversation({ cwd: '/tmp', requestId });
    const retry = await h.client('carol', b).createConversation({ cwd: '/tmp', requestId });
    expect(retry.conversation?.id).toBe(first.conversation?.id);
    expect(await list()).toHaveLength(1);
    // The same id for another body.
    const reused = await rpcError(h.client('carol').createConversation({ cwd: '/', requestId }));
    expect(reused.code).toBe(Code.InvalidArgument);
    // Another user may use the same id.
    const dave = await h.client('dave').createConversation({ cwd: '/tmp', requestId });
    expect(dave.conversation?.id).not.toBe(first.conversation?.id);

    const racing = rid();
    const answers = await Promise.all(
      Array.from({ length: 6 }, (_, i) =>
        (i % 2 ? h.client('carol', b) : h.client('carol')).createConversation({ cwd: '/tmp', requestId: racing }),
      ),
    );
    expect(new Set(answers.map((a) => a.conversation?.id)).size).toBe(1);
    expect(await list()).toHaveLength(2);
  });
});

describe('retention', () => {
  it('outcomes older than the retention are pruned; a retry after that is a new request', async () => {
    const id = await h.createConversation();
    const old = rid();
    const fresh = rid();
    await h.client().sendMessage({ conversationId: id, text: 'old', requestId: old });
    await h.respond(await h.llmJob(id), { content: [text('ok')] });
    await h.waitState(id, StateKind.IDLE);
    await h.client().sendMessage({ conversationId: id, text: 'fresh', requestId: fresh });
    await h.respond(await h.llmJob(id, 1), { content: [text('ok')] });
    await h.waitState(id, StateKind.IDLE);
    await h.pool.query("UPDATE request_outcomes SET created_at = now() - interval '25 hours' WHERE request_id = $1", [old]);

    // The service's pruner (every replica runs one) with the default retention of 24 hours.
    const pruner = startRequestPruner({
      prune: h.service.store.pruneRequests,
      retentionMs: 24 * 3_600_000,
      intervalMs: 50,
      onError: () => undefined,
    });
    try {
      await h.waitFor('old outcome pruned', async () => (await outcomeRows(old)).length === 0);
    } finally {
      await pruner.stop();
    }
    expect(await outcomeRows(fresh)).toHaveLength(1);

    // Within the retention a retry is still answered from the first outcome ...
    await h.client().sendMessage({ conversationId: id, text: 'fresh', requestId: fresh });
    expect(await userMessages(id)).toHaveLength(2);
    // ... after it, the id is forgotten: the same request is a new message.
    await h.client().sendMessage({ conversationId: id, text: 'old', requestId: old });
    expect(await userMessages(id)).toHaveLength(3);
  });
});
