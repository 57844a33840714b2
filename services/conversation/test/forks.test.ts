/**
 * ForkConversation against the real service and Postgres (the test plays the gateway and the
 * runner): a fork at every kind of message boundary copies the history up to it — never between
 * a tool call and its results (refused, naming the nearest places that work) — into a new, idle,
 * Restricted conversation of the same user, directory, model and settings, linked to its source;
 * its next request is a valid chain (support/blocks.ts's independent checker); the source is unchanged.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { LlmRequestPurpose, MessageType, Mode, Role, StateKind, StopReason, ThinkingLevel, type Message } from '@bedrock/contracts';
import { MODE_NOTICE_RESTRICTED, MODE_NOTICE_UNRESTRICTED } from '../src/core/index.ts';
import { chainProblems, shape, text, textOf, thinking, toolUse, type LlmJob } from './support/blocks.ts';
import { Code, rpcError, startHarness, type Harness } from './support/harness.ts';

let h: Harness;
beforeAll(async () => {
  h = await startHarness({ label: 'forks' });
});
afterAll(async () => {
  await h?.close();
});

/** What a message is, without its ids: the fork's copies must equal the source's. */
const essence = (m: Message) => ({
  sequence: m.sequence,
  type: m.type,
  content: m.content,
  usage: m.usage,
  stopReason: m.stopReason,
  createdAt: m.createdAt,
});

/**
 * A source conversation with every kind of boundary, at rest in context_exhausted:
 *  1 user · 2 agent (thinking, text, two tool calls) · 3, 4 tool results · 5 agent (signed
 *  thinking, text) · 6 user · 7 agent (request_mode_upgrade) · 8 tool result (approved) ·
 *  9 system (Unrestricted notice) · 10 agent text · 11 continuation summary.
 */
async function richSource(): Promise<string> {
  const c = h.client();
  const id = (await c.createConversation({ cwd: '/tmp', model: 'claude-haiku-4-5', thinking: ThinkingLevel.LOW })).conversation!.id;
  await c.sendMessage({ conversationId: id, text: 'Look at the repository' });
  await h.respond(await h.llmJob(id, 0), {
    stopReason: StopReason.TOOL_USE,
    content: [
      thinking('List it first.', 'sig-list'),
      text('Listing.'),
      toolUse('t1', 'bash', { command: 'ls' }),
      toolUse('t2', 'bash', { command: 'pwd' }),
    ],
  });
  await h.complete(await h.toolJob(id, 't1'), { content: 'a.ts' });
  await h.complete(await h.toolJob(id, 't2'), { content: '/tmp' });
  await h.respond(await h.llmJob(id, 1), { content: [thinking('Small repo.', 'sig-small'), text('One file: a.ts.')] });
  await h.waitState(id, StateKind.IDLE);
  await c.sendMessage({ conversationId: id, text: 'Edit it' });
  await h.respond(await h.llmJob(id, 2), {
    stopReason: StopReason.TOOL_USE,
    content: [toolUse('u1', 'request_mode_upgrade', { reason: 'edit a.ts' })],
  });
  await h.waitState(id, StateKind.AWAITING_MODE_APPROVAL);
  await c.respondToModeUpgrade({ conversationId: id, approve: true });
  await h.respond(await h.llmJob(id, 3), { content: [text('Upgraded; editing next.')] });
  await h.waitState(id, StateKind.IDLE);
  await c.triggerContinuation({ conversationId: id });
  await h.respond(await h.llmJob(id, 4), { content: [text('Summary: listed the repository, got write access.')] });
  await h.waitState(id, StateKind.CONTEXT_EXHAUSTED);
  const { messages } = await h.get(id);
  expect(messages.map((m) => MessageType[m.type])).toEqual([
    'USER',
    'AGENT',
    'TOOL',
    'TOOL',
    'AGENT',
    'USER',
    'AGENT',
    'TOOL',
    'SYSTEM',
    'AGENT',
    'CONTINUATION',
  ]);
  return id;
}

/** Sends a message in the fork and returns the LLM request it made (its history checked), then answers it. */
async function nextTurn(forkId: string): Promise<LlmJob> {
  const before = h.llmJobsOf(forkId).length;
  await h.client().sendMessage({ conversationId: forkId, text: 'And now?' });
  const job = await h.llmJob(forkId, before);
  expect(chainProblems(job)).toEqual([]);
  expect(job.messages.at(-1)!.role).toBe(Role.USER);
  expect(textOf(job.messages.at(-1)!.content)).toMatch(/And now\?$/);
  await h.respond(job, { content: [text('Here is what I think.')] });
  await h.waitState(forkId, StateKind.IDLE);
  return job;
}

describe('ForkConversation', () => {
  let source: string;
  let sourceMessages: Message[];
  beforeAll(async () => {
    source = await richSource();
    sourceMessages = (await h.get(source)).messages;
  });

  it.each([
    ['after a user message', 1, [['text', 'text']]],
    [
      'after the results of a tool call, its thinking and signature kept',
      4,
      [['text'], ['thinking', 'text', 'toolUse', 'toolUse'], ['toolResult', 'toolResult', 'text']],
    ],
    [
      'after an assistant text with signed thinking',
      5,
      [['text'], ['thinking', 'text', 'toolUse', 'toolUse'], ['toolResult', 'toolResult'], ['thinking', 'text'], ['text']],
    ],
    ['after the result of a mode upgrade', 8, null],
    ['after a mode notice', 9, null],
    ['after an assistant text', 10, null],
    ['after the continuation summary', 11, null],
  ] as const)('forks %s (message %i): a copy, linked, idle and Restricted; the next turn is a valid request', async (_, at, turns) => {
    const c = h.client();
    const fork = (await c.forkConversation({ conversationId: source, atMessage: BigInt(at) })).conversation!;
    expect(fork.id).not.toBe(source);
    expect(fork.forkedFrom).toMatchObject({ conversationId: source, messageSequence: BigInt(at) });
    expect(fork.state!.kind).toBe(StateKind.IDLE);
    expect(fork.mode).toBe(Mode.RESTRICTED);
    expect([fork.cwd, fork.model, fork.thinking, fork.userInitiated, fork.parentId]).toEqual([
      '/tmp',
      'claude-haiku-4-5',
      ThinkingLevel.LOW,
      true,
      '',
    ]);
    expect(fork.title).toBe('Fork of Look at the repository');

    const got = await h.get(fork.id);
    const copied = got.messages.slice(0, at);
    expect(copied.map(essence)).toEqual(sourceMessages.slice(0, at).map(essence));
    expect(copied.every((m) => m.conversationId === fork.id && m.id.startsWith(`${fork.id}/`))).toBe(true);
    // The copy ends with the model told it is Unrestricted: the fork says it is Restricted again.
    const notice = at >= 8 ? [MODE_NOTICE_RESTRICTED] : [];
    expect(got.messages.slice(at).map((m) => textOf(m.content))).toEqual(notice);
    expect(got.messages.slice(at).every((m) => m.type === MessageType.SYSTEM)).toBe(true);

    const job = await nextTurn(fork.id);
    expect(job.purpose).toBe(LlmRequestPurpose.TURN);
    expect(job.model).toBe('claude-haiku-4-5');
    if (turns) expect(shape(job)).toEqual(turns);
    if (at === 4 || at === 5) {
      const signatures = job.messages.flatMap((m) =>
        m.content.flatMap((b) => (b.block.case === 'thinking' ? [b.block.value.signature] : [])),
      );
      expect(signatures).toEqual(at === 4 ? ['sig-list'] : ['sig-list', 'sig-small']);
    }
    // From the approval on, the model was told it is Unrestricted; the fork's notice comes last.
    const notices = job.messages.flatMap((m) =>
      m.content.flatMap((b) => (b.block.case === 'text' && b.block.value.text.startsWith('[System notice]') ? [b.block.value.text] : [])),
    );
    expect(notices).toEqual(
      [...(at >= 9 ? [MODE_NOTICE_UNRESTRICTED] : []), ...(at >= 8 ? [MODE_NOTICE_RESTRICTED] : [])].map((n) => `[System notice] ${n}`),
    );
    // The continuation summary is for people: never sent, also not from a fork.
    expect(job.messages.some((m) => textOf(m.content).startsWith('Summary:'))).toBe(false);

    // Listed and opened like any other conversation; the source is as it was.
    expect((await c.listConversations({})).conversations.map((x) => x.id)).toContain(fork.id);
    const after = await h.get(source);
    expect(after.messages).toEqual(sourceMessages);
    expect(after.conversation!.state!.kind).toBe(StateKind.CONTEXT_EXHAUSTED);
    expect(after.conversation!.forkedFrom).toBeUndefined();
  });

  it('forks the whole history when no message is named', async () => {
    const fork = (await h.client().forkConversation({ conversationId: source })).conversation!;
    expect(fork.forkedFrom?.messageSequence).toBe(11n);
    expect((await h.get(fork.id)).messages).toHaveLength(12);
  });

  it.each([2, 3])('refuses message %i, between a tool call and its results, naming the places that work', async (at) => {
    const err = await rpcError(h.client().forkConversation({ conversationId: source, atMessage: BigInt(at) }));
    expect(err.code).toBe(Code.InvalidArgument);
    const why =
      at === 2
        ? 'message 2 asks for tools whose results would be left out'
        : 'message 3 falls between the tool call of message 2 and its last result';
    expect(err.rawMessage).toBe(
      `cannot fork conversation ${source} at message ${at}: ${why}, and a history cannot split a tool call from its result: ` +
        'fork at message 1 (before the call) or at message 4 (after its results)',
    );
  });

  it('refuses a message beyond the last, and a conversation without messages', async () => {
    const beyond = await rpcError(h.client().forkConversation({ conversationId: source, atMessage: 12n }));
    expect(beyond.code).toBe(Code.InvalidArgument);
    expect(beyond.rawMessage).toBe(
      `at_message 12 is beyond the last message of conversation ${source} (11): give a message sequence from 1 to 11, or 0 for the whole history`,
    );
    const empty = await h.createConversation();
    const none = await rpcError(h.client().forkConversation({ conversationId: empty }));
    expect(none.code).toBe(Code.FailedPrecondition);
    expect(none.rawMessage).toMatch(/has no messages yet: there is nothing to fork/);
  });

  it("is NOT_FOUND for another user's conversation and for an unknown one", async () => {
    for (const [user, id] of [
      ['bob', source],
      ['alice', 'no-such-conversation'],
    ]) {
      const err = await rpcError(h.client(user).forkConversation({ conversationId: id!, atMessage: 1n }));
      expect(err.code).toBe(Code.NotFound);
    }
    expect((await h.client('bob').listConversations({})).conversations).toEqual([]);
  });

  it('answers a retry with the same request id with the first fork', async () => {
    const c = h.client();
    const first = (await c.forkConversation({ conversationId: source, atMessage: 6n, requestId: 'fork-once' })).conversation!;
    const again = (await c.forkConversation({ conversationId: source, atMessage: 6n, requestId: 'fork-once' })).conversation!;
    expect(again.id).toBe(first.id);
    const other = await rpcError(c.forkConversation({ conversationId: source, atMessage: 4n, requestId: 'fork-once' }));
    expect(other.code).toBe(Code.InvalidArgument);
    const { rows } = await h.pool.query('SELECT count(*)::int AS n FROM conversations WHERE forked_from_id = $1 AND forked_from_seq = 6', [
      source,
    ]);
    expect(rows[0].n).toBe(1);
  });
});

describe('forking a busy conversation', () => {
  it('copies up to a finished message while a tool runs; the latest complete exchange when no message is named', async () => {
    const c = h.client();
    const id = await h.createConversation();
    await c.sendMessage({ conversationId: id, text: 'Run the tests' });
    await h.respond(await h.llmJob(id, 0), { content: [text('Which ones?')] });
    await h.waitState(id, StateKind.IDLE);
    await c.sendMessage({ conversationId: id, text: 'All of them' });
    // Busy with the model: the user message just sent ends a history that works.
    const whileAsking = (await c.forkConversation({ conversationId: id })).conversation!;
    expect(whileAsking.forkedFrom?.messageSequence).toBe(3n);
    await h.respond(await h.llmJob(id, 1), { stopReason: StopReason.TOOL_USE, content: [toolUse('r1', 'bash', { command: 'npm test' })] });
    await h.toolJob(id, 'r1');
    expect(await h.stateOf(id)).toBe(StateKind.TOOL_EXECUTING);

    // The tool runs: message 4 asked for it, so the history can end at 3 at the latest.
    const latest = (await c.forkConversation({ conversationId: id })).conversation!;
    expect(latest.forkedFrom?.messageSequence).toBe(3n);
    const inside = await rpcError(c.forkConversation({ conversationId: id, atMessage: 4n }));
    expect(inside.code).toBe(Code.InvalidArgument);
    expect(inside.rawMessage).toMatch(/fork at message 3 \(before the call\) or later, once the turn has moved on$/);
    const earlier = (await c.forkConversation({ conversationId: id, atMessage: 2n })).conversation!;
    expect((await h.get(earlier.id)).messages.map((m) => textOf(m.content))).toEqual(['Run the tests', 'Which ones?']);

    // The source goes on undisturbed, and so does a fork.
    await h.complete(await h.toolJob(id, 'r1'), { content: 'all pass' });
    await h.respond(await h.llmJob(id, 2), { content: [text('All pass.')] });
    await h.waitState(id, StateKind.IDLE);
    expect((await h.get(id)).messages).toHaveLength(6);
    const job = await nextTurn(latest.id);
    // Its unanswered user message and the next one make one user turn.
    expect(shape(job)).toEqual([['text'], ['text'], ['text', 'text']]);
  });

  it('refuses a sub-agent (fork its parent)', async () => {
    const c = h.client();
    const id = await h.createConversation();
    await c.sendMessage({ conversationId: id, text: 'Split the work' });
    await h.respond(await h.llmJob(id, 0), {
      stopReason: StopReason.TOOL_USE,
      content: [toolUse('sp', 'spawn_agents', { tasks: [{ task: 'look around' }] })],
    });
    const child = await h.waitFor('the sub-agent', async () => (await c.listConversations({ parentId: id })).conversations[0]);
    const err = await rpcError(c.forkConversation({ conversationId: child.id }));
    expect(err.code).toBe(Code.InvalidArgument);
    expect(err.rawMessage).toBe(`conversation ${child.id} is a sub-agent, driven by its parent: fork its parent ${id} instead`);
  });
});
