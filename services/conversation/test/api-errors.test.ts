/**
 * API errors: unknown or someone else's conversation → NOT_FOUND, oversize or malformed input
 * → INVALID_ARGUMENT naming the limit, busy → FAILED_PRECONDITION; and after any of them (or
 * garbage on the queue) nothing already stored is lost or corrupted.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { ConnectError } from '@connectrpc/connect';
import { StateKind, StopReason, ThinkingLevel } from '@bedrock/contracts';
import { text, toolUse } from './support/blocks.ts';
import { Code, rpcError, startHarness, type Harness } from './support/harness.ts';
import { tinyPng } from './support/images.ts';
import { LIMITS } from '../src/api/input-limits.ts';

let h: Harness;
beforeAll(async () => {
  h = await startHarness({ label: 'apierrors' });
});
afterAll(async () => {
  await h?.close();
});

// A real image: SendMessage decodes each one.
let PNG: Uint8Array;
beforeAll(async () => {
  PNG = await tinyPng();
});

/** Every call that names a conversation, for `user` on `id`. */
function calls(id: string, user: string): [string, () => Promise<unknown>][] {
  const c = h.client(user);
  return [
    ['get', () => c.getConversation({ conversationId: id })],
    ['send', () => c.sendMessage({ conversationId: id, text: 'hi' })],
    ['cancel', () => c.cancel({ conversationId: id })],
    ['respond', () => c.respondToModeUpgrade({ conversationId: id, approve: true })],
    ['downgrade', () => c.downgradeMode({ conversationId: id })],
    ['trigger', () => c.triggerContinuation({ conversationId: id })],
    ['settings', () => c.updateConversationSettings({ conversationId: id, thinking: ThinkingLevel.LOW })],
    ['list children', () => c.listConversations({ parentId: id })],
    ['continue from', () => c.createConversation({ cwd: '/tmp', continueFromId: id })],
    [
      'watch',
      async () => {
        for await (const _ of c.watchConversation({ conversationId: id })) break;
      },
    ],
  ];
}

async function codes(id: string, user: string) {
  const out: Record<string, string> = {};
  for (const [name, call] of calls(id, user)) {
    const err = await rpcError(call());
    out[name] = `${Code[err.code]}: ${err.rawMessage}`;
  }
  return out;
}

/** A conversation with a finished turn (a tool and an answer), as stored. */
async function finishedConversation() {
  const id = await h.createConversation();
  await h.client().sendMessage({ conversationId: id, text: 'look', images: [{ mediaType: 'image/png', data: PNG }] });
  const job = await h.llmJob(id);
  await h.respond(job, { stopReason: StopReason.TOOL_USE, content: [text('Looking.'), toolUse('t1', 'bash', { command: 'ls' })] });
  await h.complete(await h.toolJob(id, 't1'), { content: 'a b c' });
  await h.respond(await h.llmJob(id, 1), { content: [text('Three files.')] });
  await h.waitState(id, StateKind.IDLE);
  return id;
}

async function stored(id: string) {
  const got = await h.get(id);
  const row = await h.pool.query('SELECT state, version, notify_seq, message_seq, updated_at FROM conversations WHERE id = $1', [id]);
  const messages = await h.pool.query('SELECT * FROM messages WHERE conversation_id = $1 ORDER BY sequence', [id]);
  return { got, row: row.rows[0], messages: messages.rows, stream: await h.notifications(id) };
}

describe('not found', () => {
  it('answers NOT_FOUND for an unknown conversation, on every call', async () => {
    const result = await codes('00000000-0000-0000-0000-000000000000', 'alice');
    for (const [name, value] of Object.entries(result)) {
      expect([name, value]).toEqual([name, 'NotFound: conversation 00000000-0000-0000-0000-000000000000 not found']);
    }
  });

  it("answers NOT_FOUND, never PERMISSION_DENIED, for another user's conversation, and changes nothing", async () => {
    const id = await finishedConversation();
    const before = await stored(id);
    const result = await codes(id, 'mallory');
    for (const [name, value] of Object.entries(result)) expect([name, value]).toEqual([name, `NotFound: conversation ${id} not found`]);
    expect((await h.client('mallory').listConversations({})).conversations).toEqual([]);
    expect(await stored(id)).toEqual(before);
  });

  it('requires the user header', async () => {
    const err = await rpcError(h.client('').listConversations({}));
    expect(err.code).toBe(Code.Unauthenticated);
  });
});

describe('invalid input', () => {
  it('rejects oversize and malformed input with INVALID_ARGUMENT naming the limit, and stores nothing', async () => {
    const id = await finishedConversation();
    const before = await stored(id);
    const c = h.client();
    const send = (req: Parameters<typeof c.sendMessage>[0]) => rpcError(c.sendMessage({ conversationId: id, ...req }));
    const expectInvalid = (err: ConnectError, pattern: RegExp) => {
      expect(`${Code[err.code]}: ${err.rawMessage}`).toMatch(new RegExp(`^InvalidArgument: .*${pattern.source}`));
    };

    expectInvalid(await send({ text: 'x'.repeat(LIMITS.maxTextChars + 1) }), /the limit is 200000/);
    expectInvalid(
      await send({ text: 'x', images: Array.from({ length: LIMITS.maxImages + 1 }, () => ({ mediaType: 'image/png', data: PNG })) }),
      /too many images: 21 \(at most 20/,
    );
    expectInvalid(await send({ text: 'x', images: [{ mediaType: 'image/tiff', data: PNG }] }), /image\/tiff.*not supported.*image\/png/);
    expectInvalid(await send({ text: 'x', images: [{ mediaType: 'image/png', data: new Uint8Array() }] }), /image 1 is empty/);
    expectInvalid(
      await send({ text: 'x', images: [{ mediaType: 'image/png', data: new Uint8Array(LIMITS.maxImageBytes + 1) }] }),
      /the limit is 20971520 bytes \(20 MiB\)/,
    );
    expectInvalid(await send({ text: '' }), /empty/);
    expectInvalid(await send({ text: '  \n ' }), /empty/);
    expectInvalid(await rpcError(c.sendMessage({ conversationId: '', text: 'x' })), /conversation_id is required/);
    expectInvalid(await rpcError(c.getConversation({ conversationId: 'x'.repeat(600) })), /too long \(at most 512/);
    // A relative directory is one inside a workspace; it may not climb out of it.
    expectInvalid(await rpcError(c.createConversation({ cwd: 'relative/../../dir' })), /leaves the workspace/);
    expectInvalid(await rpcError(c.createConversation({ cwd: `/${'a'.repeat(LIMITS.maxCwdChars)}` })), /at most 4096/);
    expectInvalid(await rpcError(c.createConversation({ cwd: '/tmp', model: 'bad model!' })), /not a valid model id/);
    // A well-formed id this service does not know is refused too, naming the ones it does.
    const unknown = await rpcError(c.createConversation({ cwd: '/tmp', model: 'gpt-4o' }));
    expectInvalid(unknown, /model "gpt-4o" is not one this service knows: use one of .*claude-haiku-4-5.*claude-sonnet-4-6/);
    expect((await c.createConversation({ cwd: '/tmp', model: 'claude-haiku-4-5' })).conversation!.model).toBe('claude-haiku-4-5');
    expectInvalid(await rpcError(c.listConversations({ pageToken: 'not-a-token' })), /page_token/);

    expect(await stored(id)).toEqual(before);
    // Still fully usable.
    await c.sendMessage({ conversationId: id, text: 'next' });
    await h.llmJob(id, 2);
  });

  it('rejects a message while busy with FAILED_PRECONDITION, keeping the turn intact', async () => {
    const id = await h.createConversation();
    await h.client().sendMessage({ conversationId: id, text: 'one' });
    const job = await h.llmJob(id);
    const before = await stored(id);
    const err = await rpcError(h.client().sendMessage({ conversationId: id, text: 'two' }));
    expect(err.code).toBe(Code.FailedPrecondition);
    expect(err.rawMessage).toMatch(/busy.*cancel/i);
    expect(await stored(id)).toEqual(before);
    await h.respond(job, { content: [text('answer to one')] });
    await h.waitState(id, StateKind.IDLE);
    expect((await h.get(id)).messages).toHaveLength(2);
  });
});

describe('garbage from workers', () => {
  it('ignores events that answer nothing, name nobody or carry nothing', async () => {
    const id = await finishedConversation();
    const before = await stored(id);
    const garbage: [string, string, Parameters<Harness['send']>[2]][] = [
      [id, 'g1', { case: 'toolComplete', value: { toolUseId: 'never-asked', content: 'x' } }],
      [id, 'g2', { case: 'llmResponse', value: { requestId: `${id}/llm/99`, stopReason: StopReason.END_TURN, content: [text('x')] } }],
      [id, 'g3', { case: 'llmError', value: { requestId: `${id}/llm/1`, message: 'old' } }],
      [id, 'g4', { case: 'timerFired', value: { timerId: `${id}/timer/1` } }],
      [id, 'g5', { case: 'subAgentResult', value: { subAgentId: 'nobody', success: true, result: 'x' } }],
      [id, 'g6', { case: undefined }],
      ['no-such-conversation', 'g7', { case: 'toolComplete', value: { toolUseId: 't1', content: 'x' } }],
    ];
    for (const [conv, eventId, event] of garbage) await h.send(conv, eventId, event);
    for (const [, eventId] of garbage) await h.processed(eventId);
    expect(await stored(id)).toEqual(before);
  });
});
