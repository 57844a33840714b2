/**
 * Restart (REQ-BED-007): the service stops with conversations in every state and a new one
 * starts on the same database and Redis. States and histories are intact, a pending approval
 * is still pending (no timeout), timers still fire, and every conversation goes on from where
 * it was when the answers it waits for arrive.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { ErrorKind, Mode, StateKind, StopReason } from '@bedrock/contracts';
import { text, toolUse, usage, type LlmJob } from './support/blocks.ts';
import { Code, rpcError, startHarness, type Harness } from './support/harness.ts';

let h: Harness;
beforeAll(async () => {
  // Long enough that the cancelling conversation is still cancelling at the restart.
  h = await startHarness({ label: 'restart', config: { turns: { cancelAckTimeout: 60_000 } } });
});
afterAll(async () => {
  await h?.close();
});

async function started(prompt = 'go') {
  const id = await h.createConversation();
  await h.client().sendMessage({ conversationId: id, text: prompt });
  return { id, job: await h.llmJob(id) };
}

async function toolCall(name: string, input: object) {
  const { id, job } = await started();
  await h.respond(job, { stopReason: StopReason.TOOL_USE, content: [text('step'), toolUse('c1', name, input)] });
  return { id, job };
}

describe('restart with conversations in every state', () => {
  it('keeps every state and history, and each conversation goes on afterwards', async () => {
    // ---- bring conversations into every state (concurrently) ----
    const [idle, error, requesting, tool, cancelling, subAgents, approval, continuation, exhausted, retrying] = await Promise.all([
      started().then(async (c) => (await h.respond(c.job, { content: [text('hi')] }), c)),
      started().then(async (c) => (await h.fail(c.job, { kind: ErrorKind.AUTH, retryable: false, message: 'Authentication failed' }), c)),
      started(),
      toolCall('bash', { command: 'make' }),
      started().then(async (c) => (await h.client().cancel({ conversationId: c.id }), c)),
      toolCall('spawn_agents', { tasks: [{ task: 'sub' }] }),
      toolCall('request_mode_upgrade', { reason: 'need to write' }),
      started().then(async (c) => (await h.respond(c.job, { usage: usage(185_000, 100), content: [text('big')] }), c)),
      started().then(async (c) => {
        await h.respond(c.job, { usage: usage(185_000, 100), content: [text('big')] });
        await h.respond(await h.llmJob(c.id, 1), { content: [text('the summary')] });
        return c;
      }),
      started(),
    ]);
    const toolJob = await h.toolJob(tool.id, 'c1');
    const child = `${subAgents.id}--c1--0`;
    const childJob = await h.llmJob(child);

    const expected: [string, StateKind][] = [
      [idle.id, StateKind.IDLE],
      [error.id, StateKind.ERROR],
      [requesting.id, StateKind.LLM_REQUESTING],
      [tool.id, StateKind.TOOL_EXECUTING],
      [cancelling.id, StateKind.CANCELLING],
      [subAgents.id, StateKind.AWAITING_SUB_AGENTS],
      [child, StateKind.LLM_REQUESTING],
      [approval.id, StateKind.AWAITING_MODE_APPROVAL],
      [continuation.id, StateKind.AWAITING_CONTINUATION],
      [exhausted.id, StateKind.CONTEXT_EXHAUSTED],
    ];
    for (const [id, kind] of expected) await h.waitState(id, kind);
    const continuationJob = await h.llmJob(continuation.id, 1);
    // A retry whose backoff timer (a delayed job in Redis) is still running across the restart.
    await h.fail(retrying.job, { kind: ErrorKind.RATE_LIMIT, retryable: true, message: 'slow down', retryAfterMs: 1500n });
    await h.waitFor('retry pending', async () => (await h.get(retrying.id)).conversation!.state!.attempt === 2);

    const before = new Map<string, unknown>();
    for (const [id] of expected) {
      await h.waitFor('outbox published', async () => !(await h.service.store.hasUnsentOutbox(id)));
      before.set(id, await h.get(id));
    }

    // ---- restart ----
    const old = h.service;
    await h.restart();
    expect(h.service).not.toBe(old);
    for (const [id] of expected) expect([id, await h.get(id)]).toEqual([id, before.get(id)]);

    // ---- everything goes on through the new replica ----
    const answer = (job: LlmJob) => h.respond(job, { content: [text('after restart')] });

    await h.client().sendMessage({ conversationId: idle.id, text: 'still there?' });
    await answer(await h.llmJob(idle.id, 1));
    await h.client().sendMessage({ conversationId: error.id, text: 'try again' });
    await answer(await h.llmJob(error.id, 1));
    await answer(requesting.job);
    await h.complete(toolJob, { content: 'built' });
    await answer(await h.llmJob(tool.id, 1));
    await h.fail(cancelling.job, { kind: ErrorKind.CANCELLED, aborted: true, message: 'aborted' });
    await h.respond(childJob, { stopReason: StopReason.TOOL_USE, content: [toolUse('sr', 'submit_result', { result: 'sub done' })] });
    await answer(await h.llmJob(subAgents.id, 1));
    await answer(continuationJob);
    const retried = await h.llmJob(retrying.id, 1);
    expect(retried.attempt).toBe(2);
    await answer(retried);

    for (const id of [idle.id, error.id, requesting.id, tool.id, cancelling.id, subAgents.id, retrying.id])
      await h.waitState(id, StateKind.IDLE);
    await h.waitState(child, StateKind.COMPLETED);
    await h.waitState(continuation.id, StateKind.CONTEXT_EXHAUSTED);
    const refused = await rpcError(h.client().sendMessage({ conversationId: exhausted.id, text: 'more' }));
    expect(refused.code).toBe(Code.FailedPrecondition);

    // The approval waits as long as the user takes, then resumes on the new replica.
    expect(await h.stateOf(approval.id)).toBe(StateKind.AWAITING_MODE_APPROVAL);
    const approved = await h.client().respondToModeUpgrade({ conversationId: approval.id, approve: true });
    expect(approved.conversation!.mode).toBe(Mode.UNRESTRICTED);
    await answer(await h.llmJob(approval.id, 1));
    await h.waitState(approval.id, StateKind.IDLE);

    // Histories only grew.
    for (const [id] of expected) {
      const was = (before.get(id) as Awaited<ReturnType<Harness['get']>>).messages;
      expect((await h.get(id)).messages.slice(0, was.length)).toEqual(was);
    }
  });

  it('keeps a pending approval across a second restart with no timeout', async () => {
    const { id } = await toolCall('request_mode_upgrade', { reason: 'write' });
    await h.waitState(id, StateKind.AWAITING_MODE_APPROVAL);
    await h.restart();
    expect(await h.stateOf(id)).toBe(StateKind.AWAITING_MODE_APPROVAL);
    const res = await h.client().respondToModeUpgrade({ conversationId: id, approve: false });
    expect(res.conversation!.mode).toBe(Mode.RESTRICTED);
    await h.llmJob(id, 1);
  });
});

it('sent only valid tool_use/tool_result chains to the model', () => {
  expect(h.chainProblems()).toEqual([]);
});
