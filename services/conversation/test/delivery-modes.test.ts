/**
 * Delivery modes through the real service (docs/state-machine.md, "Delivery modes"): messages
 * sent while the agent works wait in the conversation's state (Postgres, the same commit as the
 * state), survive a restart of the service, are delivered once each and in order, can be
 * withdrawn; a steering message joins the user turn of the tool results; an interrupting one
 * cancels the turn and is sent once the cancel is complete.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { DeliveryMode, ErrorKind, MessageType, Role, StateKind, StopReason } from '@bedrock/contracts';
import { chainProblems, shape, text, textOf, toolUse, type LlmJob } from './support/blocks.ts';
import { Code, rpcError, startHarness, type Harness } from './support/harness.ts';

let h: Harness;
beforeAll(async () => {
  h = await startHarness({ label: 'delivery-modes', config: { turns: { cancelAckTimeout: 60_000 } } });
});
afterAll(async () => {
  await h?.close();
});

async function started(prompt = 'go') {
  const id = await h.createConversation();
  await h.client().sendMessage({ conversationId: id, text: prompt });
  return { id, job: await h.llmJob(id) };
}

/** The text of the request's last (user) turn. */
function lastUserText(job: LlmJob): string {
  const last = job.messages.at(-1)!;
  expect(last.role).toBe(Role.USER);
  return textOf(last.content);
}

async function userTexts(id: string): Promise<string[]> {
  const { messages } = await h.get(id);
  return messages.filter((m) => m.type === MessageType.USER).map((m) => textOf(m.content));
}

describe('queue', () => {
  it('keeps two messages through a restart of the service and delivers each once, in order, when the turns come to rest', async () => {
    const { id, job } = await started('first');
    const second = await h.client().sendMessage({ conversationId: id, text: 'second', delivery: DeliveryMode.QUEUE, requestId: 'q-2' });
    const third = await h.client().sendMessage({ conversationId: id, text: 'third', delivery: DeliveryMode.QUEUE });
    expect(second.message).toBeUndefined();
    expect(second.queuedId).not.toBe('');
    expect(third.queuedId).not.toBe(second.queuedId);
    // A retry of the same request answers the first outcome: queued once.
    const again = await h.client().sendMessage({ conversationId: id, text: 'second', delivery: DeliveryMode.QUEUE, requestId: 'q-2' });
    expect(again.queuedId).toBe(second.queuedId);
    // Visible in the conversation and to watchers (state_changed carries the waiting messages).
    const before = await h.get(id);
    expect(before.conversation!.state!.kind).toBe(StateKind.LLM_REQUESTING);
    expect(before.conversation!.state!.pendingMessages.map((m) => [m.id, m.text, m.delivery])).toEqual([
      [second.queuedId, 'second', DeliveryMode.QUEUE],
      [third.queuedId, 'third', DeliveryMode.QUEUE],
    ]);
    const seen = (await h.notifications(id)).flatMap((e) =>
      e.kind.case === 'stateChanged' ? [e.kind.value.state!.pendingMessages.map((m) => m.text)] : [],
    );
    expect(seen).toContainEqual(['second', 'third']);

    // The service stops and a new one starts on the same database: the queue is in the state.
    await h.restart();
    expect((await h.get(id)).conversation!.state!.pendingMessages.map((m) => m.text)).toEqual(['second', 'third']);

    await h.respond(job, { content: [text('answer one')] });
    const job2 = await h.llmJob(id, 1);
    expect(lastUserText(job2)).toBe('second');
    expect((await h.get(id)).conversation!.state!.pendingMessages.map((m) => m.text)).toEqual(['third']);
    await h.respond(job2, { content: [text('answer two')] });
    const job3 = await h.llmJob(id, 2);
    expect(lastUserText(job3)).toBe('third');
    await h.respond(job3, { content: [text('answer three')] });
    await h.waitState(id, StateKind.IDLE);

    expect(await userTexts(id)).toEqual(['first', 'second', 'third']);
    expect(h.llmJobsOf(id)).toHaveLength(3);
    expect((await h.get(id)).conversation!.state!.pendingMessages).toEqual([]);
    expect(h.llmJobsOf(id).flatMap(chainProblems)).toEqual([]);
  });

  it('a waiting message can be withdrawn; withdrawing it again is refused as not_queued', async () => {
    const { id, job } = await started();
    const queued = await h.client().sendMessage({ conversationId: id, text: 'never mind', delivery: DeliveryMode.QUEUE });
    const res = await h.client().cancelQueuedMessage({ conversationId: id, queuedId: queued.queuedId });
    expect(res.state!.pendingMessages).toEqual([]);
    expect(res.state!.kind).toBe(StateKind.LLM_REQUESTING);
    const twice = await rpcError(h.client().cancelQueuedMessage({ conversationId: id, queuedId: queued.queuedId }));
    expect(twice.code).toBe(Code.FailedPrecondition);
    expect(twice.rawMessage).toMatch(/not waiting any more/);
    await h.respond(job, { content: [text('done')] });
    await h.waitState(id, StateKind.IDLE);
    expect(await userTexts(id)).toEqual(['go']);
  });

  it('without a delivery mode a busy agent still refuses (REQ-BED-002); at rest every mode sends at once', async () => {
    const { id, job } = await started();
    const busy = await rpcError(h.client().sendMessage({ conversationId: id, text: 'now' }));
    expect(busy.code).toBe(Code.FailedPrecondition);
    expect(busy.rawMessage).toMatch(/busy/);
    await h.respond(job, { content: [text('done')] });
    await h.waitState(id, StateKind.IDLE);
    const sent = await h.client().sendMessage({ conversationId: id, text: 'at rest', delivery: DeliveryMode.QUEUE });
    expect(sent.queuedId).toBe('');
    expect(textOf(sent.message!.content)).toBe('at rest');
    expect(sent.state!.kind).toBe(StateKind.LLM_REQUESTING);
  });

  it('a cancel keeps the queue: the next queued message is sent when the cancel completes', async () => {
    const { id, job } = await started();
    await h.client().sendMessage({ conversationId: id, text: 'after the cancel', delivery: DeliveryMode.QUEUE });
    expect((await h.client().cancel({ conversationId: id })).state!.kind).toBe(StateKind.CANCELLING);
    await h.fail(job, { kind: ErrorKind.CANCELLED, aborted: true, message: 'Request aborted' });
    const next = await h.llmJob(id, 1);
    // The cancelled request's message got no answer: both are one user turn (as for any message after a cancel).
    expect(lastUserText(next)).toBe('goafter the cancel');
    expect(shape(next)).toEqual([['text', 'text']]);
  });
});

describe('steer', () => {
  it('joins the user turn that carries the results of a multi-tool turn, after them', async () => {
    const { id, job } = await started('list both folders');
    await h.respond(job, {
      stopReason: StopReason.TOOL_USE,
      content: [text('looking'), toolUse('c1', 'bash', { command: 'ls a' }), toolUse('c2', 'bash', { command: 'ls b' })],
    });
    const first = await h.toolJob(id, 'c1');
    const steered = await h.client().sendMessage({ conversationId: id, text: 'only folder b matters', delivery: DeliveryMode.STEER });
    expect(steered.queuedId).not.toBe('');
    expect(steered.state!.kind).toBe(StateKind.TOOL_EXECUTING);
    await h.complete(first, { content: 'a1' });
    // Not yet: the turn has a tool left.
    expect((await h.get(id)).conversation!.state!.pendingMessages.map((m) => m.text)).toEqual(['only folder b matters']);
    await h.complete(await h.toolJob(id, 'c2'), { content: 'b1' });
    const next = await h.llmJob(id, 1);
    expect(shape(next).at(-1)).toEqual(['toolResult', 'toolResult', 'text']);
    expect(lastUserText(next)).toBe('only folder b matters');
    expect(chainProblems(next)).toEqual([]);
    expect((await h.get(id)).conversation!.state!.pendingMessages).toEqual([]);
    await h.respond(next, { content: [text('b it is')] });
    await h.waitState(id, StateKind.IDLE);
    expect(await userTexts(id)).toEqual(['list both folders', 'only folder b matters']);
  });

  it('becomes the next message when the turn ends before a tool boundary', async () => {
    const { id, job } = await started();
    await h.client().sendMessage({ conversationId: id, text: 'and then this', delivery: DeliveryMode.STEER });
    await h.respond(job, { content: [text('no tools needed')] });
    const next = await h.llmJob(id, 1);
    expect(lastUserText(next)).toBe('and then this');
    expect(shape(next).map((turn) => turn.length)).toEqual([1, 1, 1]);
  });
});

describe('interrupt', () => {
  it('kills the running tool and sends at once', async () => {
    const { id, job } = await started();
    await h.respond(job, { stopReason: StopReason.TOOL_USE, content: [toolUse('c1', 'bash', { command: 'sleep 100' })] });
    await h.toolJob(id, 'c1');
    const res = await h.client().sendMessage({ conversationId: id, text: 'stop, do this instead', delivery: DeliveryMode.INTERRUPT });
    expect(res.queuedId).toBe('');
    expect(textOf(res.message!.content)).toBe('stop, do this instead');
    expect(res.state!.kind).toBe(StateKind.LLM_REQUESTING);
    await h.waitFor('kill signal', () => h.cancels.some((c) => c.conversationId === id && c.target.case === 'toolUseId'));
    const next = await h.llmJob(id, 1);
    expect(shape(next).at(-1)).toEqual(['toolResult', 'text']);
    expect(lastUserText(next)).toBe('stop, do this instead');
    expect(chainProblems(next)).toEqual([]);
  });

  it('during an LLM request: cancels, and sends once the gateway acknowledges the abort', async () => {
    const { id, job } = await started();
    const res = await h.client().sendMessage({ conversationId: id, text: 'new direction', delivery: DeliveryMode.INTERRUPT });
    expect(res.state!.kind).toBe(StateKind.CANCELLING);
    expect(res.queuedId).not.toBe('');
    await h.waitFor('abort signal', () => h.cancels.some((c) => c.target.case === 'llmRequestId' && c.target.value === job.requestId));
    await h.fail(job, { kind: ErrorKind.CANCELLED, aborted: true, message: 'Request aborted' });
    const next = await h.llmJob(id, 1);
    // The cancelled request's message got no answer: both are one user turn (as for any message after a cancel).
    expect(shape(next)).toEqual([['text', 'text']]);
    expect(lastUserText(next)).toBe('gonew direction');
    expect(await userTexts(id)).toEqual(['go', 'new direction']);
  });
});
