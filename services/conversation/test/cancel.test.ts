/**
 * Cancel from every busy state (REQ-BED-005): abort signals reach the gateway and the runners
 * on the cancel channel, tool calls get synthetic results, nothing partial is persisted, late
 * answers change nothing, and the user can go on.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { create } from '@bufbuild/protobuf';
import {
  ConversationEventSchema,
  ErrorKind,
  MessageType,
  Mode,
  QUEUE_CONVERSATION_EVENTS,
  Role,
  StateKind,
  StopReason,
} from '@bedrock/contracts';
import { CANCELLED_CURRENT, CANCELLED_SKIPPED, CONTINUATION_CANCELLED_SUMMARY } from '../src/core/index.ts';
import { text, textOf, toolResults, toolUse } from './support/blocks.ts';
import { Code, rpcError, startHarness, type Harness } from './support/harness.ts';

let h: Harness;
beforeAll(async () => {
  // Long enough for the acknowledgement to win under load; the lost-acknowledgement test waits it out.
  h = await startHarness({ label: 'cancel', config: { turns: { cancelAckTimeout: 2500 } } });
});
afterAll(async () => {
  await h?.close();
});

const abortsOf = (requestId: string) => h.cancels.filter((c) => c.target.case === 'llmRequestId' && c.target.value === requestId);
const killsOf = (conversationId: string, toolUseId: string) =>
  h.cancels.filter((c) => c.conversationId === conversationId && c.target.case === 'toolUseId' && c.target.value === toolUseId);

async function types(id: string) {
  return (await h.get(id)).messages.map((m) => MessageType[m.type]);
}

async function resultsOf(id: string) {
  const { messages } = await h.get(id);
  return messages.flatMap((m) =>
    m.content.flatMap((b) =>
      b.block.case === 'toolResult' ? [[b.block.value.toolUseId, b.block.value.content, b.block.value.cancelled]] : [],
    ),
  );
}

async function started(prompt = 'go') {
  const id = await h.createConversation();
  await h.client().sendMessage({ conversationId: id, text: prompt });
  return { id, job: await h.llmJob(id) };
}

describe('cancel during an LLM request', () => {
  it('aborts the request, waits for the acknowledgement, persists nothing partial and ignores the late answer', async () => {
    const { id, job } = await started();
    // The gateway has streamed part of an answer (ephemeral).
    await h.transport.streams.appendEphemeral(
      create(ConversationEventSchema, {
        conversationId: id,
        sequence: job.notifySequence,
        kind: { case: 'tokenDelta', value: { requestId: job.requestId, text: 'Partial ans' } },
      }),
    );
    const res = await h.client().cancel({ conversationId: id });
    expect(res.state!.kind).toBe(StateKind.CANCELLING);
    // The abort is published before the call returns.
    await h.waitFor('abort signal', () => abortsOf(job.requestId).length === 1);
    expect(abortsOf(job.requestId)[0]!.conversationId).toBe(id);

    const busy = await rpcError(h.client().sendMessage({ conversationId: id, text: 'now' }));
    expect(busy.code).toBe(Code.FailedPrecondition);
    expect(busy.rawMessage).toMatch(/Cancellation in progress/);
    // A second cancel while cancelling is harmless.
    expect((await h.client().cancel({ conversationId: id })).state!.kind).toBe(StateKind.CANCELLING);

    await h.fail(job, { kind: ErrorKind.CANCELLED, aborted: true, message: 'Request aborted' });
    await h.waitState(id, StateKind.IDLE);
    // The late full response of the cancelled request changes nothing.
    await h.respond(job, { content: [text('Partial answer, complete now')] }, 'late-response');
    await h.processed('late-response');
    expect(await types(id)).toEqual(['USER']);
    expect(await h.stateOf(id)).toBe(StateKind.IDLE);
    // Acknowledged in time: the abort was not repeated by the timeout.
    expect(abortsOf(job.requestId)).toHaveLength(1);

    await h.client().sendMessage({ conversationId: id, text: 'again' });
    const next = await h.llmJob(id, 1);
    expect(next.requestId).not.toBe(job.requestId);
    expect(next.messages).toHaveLength(1);
    expect(next.messages[0]!.role).toBe(Role.USER);
    expect(next.messages[0]!.content.map((b) => (b.block.case === 'text' ? b.block.value.text : ''))).toEqual(['go', 'again']);
  });

  it('keeps the text that streamed before the cancel: an agent message of that text, stop reason CANCELLED, in the next history too', async () => {
    const { id, job } = await started();
    await h.client().cancel({ conversationId: id });
    await h.waitFor('abort signal', () => abortsOf(job.requestId).length === 1);
    // The gateway's acknowledgement carries what had streamed (the user saw it).
    await h.fail(job, { kind: ErrorKind.CANCELLED, aborted: true, message: 'Request aborted', partialText: 'Partial ans' });
    await h.waitState(id, StateKind.IDLE);
    const { messages } = await h.get(id);
    expect(messages.map((m) => MessageType[m.type])).toEqual(['USER', 'AGENT']);
    expect(messages[1]!.stopReason).toBe(StopReason.CANCELLED);
    expect(textOf(messages[1]!.content)).toBe('Partial ans');

    // The model is told what it had said before the user stopped it.
    await h.client().sendMessage({ conversationId: id, text: 'again' });
    const next = await h.llmJob(id, 1);
    expect(next.messages.map((m) => Role[m.role])).toEqual(['USER', 'ASSISTANT', 'USER']);
    expect(next.messages[1]!.content.map((b) => (b.block.case === 'text' ? b.block.value.text : ''))).toEqual(['Partial ans']);
  });

  it('goes idle when the acknowledgement is lost, repeating the abort', async () => {
    const { id, job } = await started();
    await h.client().cancel({ conversationId: id });
    await h.waitState(id, StateKind.IDLE, 'alice', 10_000);
    await h.waitFor('second abort', () => abortsOf(job.requestId).length === 2);
    expect(await types(id)).toEqual(['USER']);
    await h.client().sendMessage({ conversationId: id, text: 'again' });
    await h.llmJob(id, 1);
  });

  it('during a retry backoff: idle at once, the retry timer removed, no further attempt', async () => {
    const { id, job } = await started();
    await h.fail(job, { kind: ErrorKind.RATE_LIMIT, retryable: true, message: 'Rate limited', retryAfterMs: 60_000n, httpStatus: 429 });
    await h.waitFor('retry scheduled', async () => {
      const state = (await h.get(id)).conversation!.state!;
      return state.attempt === 2 && state.retryDelayMs === 60_000n;
    });
    const timers = await h.pool.query<{ job_id: string }>(
      `SELECT payload->>'jobId' AS job_id FROM outbox_effects WHERE conversation_id = $1 AND kind = 'job' AND payload->>'queue' = $2`,
      [id, QUEUE_CONVERSATION_EVENTS],
    );
    expect(timers.rows).toHaveLength(1);
    const timerId = timers.rows[0]!.job_id;
    await h.waitFor(
      'the timer queued',
      async () => (await h.transport.queues.jobStatus(QUEUE_CONVERSATION_EVENTS, timerId)).state === 'delayed',
    );

    const res = await h.client().cancel({ conversationId: id });
    expect(res.state!.kind).toBe(StateKind.IDLE);
    expect((await h.transport.queues.jobStatus(QUEUE_CONVERSATION_EVENTS, timerId)).state).toBe('unknown');
    // Nothing was in flight, so nothing to abort.
    expect(h.cancels.filter((c) => c.conversationId === id)).toHaveLength(0);

    await h.client().sendMessage({ conversationId: id, text: 'again' });
    const next = await h.llmJob(id, 1);
    expect(next.attempt).toBe(1);
    expect(h.llmJobsOf(id)).toHaveLength(2);
  });
});

describe('cancel during tools', () => {
  it('kills the running tool, answers it and the remaining calls synthetically, ignores the late result', async () => {
    const { id, job } = await started();
    await h.respond(job, {
      stopReason: StopReason.TOOL_USE,
      content: [
        text('Three steps.'),
        toolUse('c1', 'bash', { command: 'ls' }),
        toolUse('c2', 'bash', { command: 'sleep 60' }),
        toolUse('c3', 'think', { thoughts: 'x' }),
      ],
    });
    await h.complete(await h.toolJob(id, 'c1'), { content: 'file-a' });
    const running = await h.toolJob(id, 'c2');
    await h.waitFor('c2 current', async () => (await h.get(id)).conversation!.state!.currentToolUseId === 'c2');

    const res = await h.client().cancel({ conversationId: id });
    expect(res.state!.kind).toBe(StateKind.IDLE);
    await h.waitFor('kill signal', () => killsOf(id, 'c2').length === 1);
    expect(await resultsOf(id)).toEqual([
      ['c1', 'file-a', false],
      ['c2', CANCELLED_CURRENT, true],
      ['c3', CANCELLED_SKIPPED, true],
    ]);
    // The killed tool's runner answers late: nothing changes.
    await h.complete(running, { content: 'killed', cancelled: true, isError: true });
    await h.processed(`t/${id}/c2`);
    expect(await types(id)).toEqual(['USER', 'AGENT', 'TOOL', 'TOOL', 'TOOL']);
    expect(h.toolJobsOf(id).map((j) => j.toolUseId)).toEqual(['c1', 'c2']);

    await h.client().sendMessage({ conversationId: id, text: 'what happened?' });
    const next = await h.llmJob(id, 1);
    expect(toolResults(next).map((r) => [r.toolUseId, r.cancelled])).toEqual([
      ['c1', false],
      ['c2', true],
      ['c3', true],
    ]);
  });

  it('keeps what the running tool had printed (its live output on the stream) in its cancelled result', async () => {
    const { id, job } = await started();
    await h.respond(job, { stopReason: StopReason.TOOL_USE, content: [toolUse('c1', 'bash', { command: 'echo start; sleep 60' })] });
    const running = await h.toolJob(id, 'c1');
    await h.waitFor('c1 current', async () => (await h.get(id)).conversation!.state!.currentToolUseId === 'c1');
    // What the runner streams while the tool runs (tool-exec-worker.ts: after the job's durable event).
    for (const [toolUseId, text] of [
      ['c1', 'start\n'],
      ['other', 'not this tool\n'],
      ['c1', 'step 2\n'],
    ] as const) {
      const at = await h.transport.streams.appendEphemeral(
        create(ConversationEventSchema, {
          conversationId: id,
          sequence: running.notifySequence,
          kind: { case: 'toolOutput', value: { toolUseId, text } },
        }),
      );
      expect(at).not.toBeNull();
    }
    await h.client().cancel({ conversationId: id });
    expect(await resultsOf(id)).toEqual([['c1', `start\nstep 2\n\n${CANCELLED_CURRENT}`, true]]);
    // The model is told what ran before the cancel too.
    await h.client().sendMessage({ conversationId: id, text: 'go on' });
    expect(toolResults(await h.llmJob(id, 1)).map((r) => [r.toolUseId, r.cancelled, r.content])).toEqual([
      ['c1', true, `start\nstep 2\n\n${CANCELLED_CURRENT}`],
    ]);
  });

  it('stops the sub-agents of a spawn_agents call and answers it synthetically', async () => {
    const { id, job } = await started();
    await h.respond(job, {
      stopReason: StopReason.TOOL_USE,
      content: [
        toolUse('s1', 'spawn_agents', { tasks: [{ task: 'look at a' }, { task: 'look at b' }] }),
        toolUse('s2', 'bash', { command: 'true' }),
      ],
    });
    const children = [`${id}--s1--0`, `${id}--s1--1`];
    const childJobs = await Promise.all(children.map((c) => h.llmJob(c)));
    await h.waitState(id, StateKind.AWAITING_SUB_AGENTS);

    expect((await h.client().cancel({ conversationId: id })).state!.kind).toBe(StateKind.IDLE);
    for (const child of children) await h.waitState(child, StateKind.FAILED);
    const childState = (await h.get(children[0]!)).conversation!.state!;
    expect(childState.errorKind).toBe(ErrorKind.CANCELLED);
    // The children's own LLM requests are aborted.
    for (const cj of childJobs) await h.waitFor('child abort', () => abortsOf(cj.requestId).length >= 1);
    expect(await resultsOf(id)).toEqual([
      ['s1', CANCELLED_CURRENT, true],
      ['s2', CANCELLED_SKIPPED, true],
    ]);
    // A child's late submit_result reaches nobody.
    await h.respond(childJobs[0]!, {
      stopReason: StopReason.TOOL_USE,
      content: [toolUse('sub', 'submit_result', { result: 'late', success: true })],
    });
    await h.processed(`r/${childJobs[0]!.requestId}`);
    expect(await h.stateOf(children[0]!)).toBe(StateKind.FAILED);
    expect(await types(id)).toEqual(['USER', 'AGENT', 'TOOL', 'TOOL']);
    expect(await h.stateOf(id)).toBe(StateKind.IDLE);
    expect(h.toolJobsOf(id)).toHaveLength(0);
  });

  it('answers a pending mode upgrade synthetically and keeps the mode', async () => {
    const { id, job } = await started();
    await h.respond(job, {
      stopReason: StopReason.TOOL_USE,
      content: [toolUse('u1', 'request_mode_upgrade', { reason: 'write a file' }), toolUse('u2', 'patch', { path: '/tmp/x', patches: [] })],
    });
    await h.waitState(id, StateKind.AWAITING_MODE_APPROVAL);
    expect((await h.client().cancel({ conversationId: id })).state!.kind).toBe(StateKind.IDLE);
    const got = await h.get(id);
    expect(got.conversation!.mode).toBe(Mode.RESTRICTED);
    expect(await resultsOf(id)).toEqual([
      ['u1', CANCELLED_CURRENT, true],
      ['u2', CANCELLED_SKIPPED, true],
    ]);
    const late = await rpcError(h.client().respondToModeUpgrade({ conversationId: id, approve: true }));
    expect(late.code).toBe(Code.FailedPrecondition);
    expect((await h.get(id)).conversation!.mode).toBe(Mode.RESTRICTED);
  });
});

describe('cancel during a continuation and when idle', () => {
  it('ends a continuation with the cancelled summary and aborts its request', async () => {
    const { id, job } = await started();
    await h.respond(job, { content: [text('fine')] });
    await h.waitState(id, StateKind.IDLE);
    await h.client().triggerContinuation({ conversationId: id });
    const cont = await h.llmJob(id, 1);
    expect((await h.client().cancel({ conversationId: id })).state!.kind).toBe(StateKind.CONTEXT_EXHAUSTED);
    await h.waitFor('continuation abort', () => abortsOf(cont.requestId).length === 1);
    const got = await h.get(id);
    expect(got.conversation!.state!.summary).toBe(CONTINUATION_CANCELLED_SUMMARY);
    const last = got.messages[got.messages.length - 1]!;
    expect(last.type).toBe(MessageType.CONTINUATION);
    expect(textOf(last.content)).toBe(CONTINUATION_CANCELLED_SUMMARY);
    // The summary that arrives late is not persisted.
    await h.respond(cont, { content: [text('late summary')] });
    await h.processed(`r/${cont.requestId}`);
    expect((await h.get(id)).messages).toHaveLength(got.messages.length);
  });

  it('rejects a cancel when nothing runs', async () => {
    const id = await h.createConversation();
    const err = await rpcError(h.client().cancel({ conversationId: id }));
    expect(err.code).toBe(Code.FailedPrecondition);
    expect(err.rawMessage).toMatch(/Nothing to cancel/);
  });
});

it('sent only valid tool_use/tool_result chains to the model', () => {
  expect(h.llmJobs.length).toBeGreaterThan(8);
  expect(h.chainProblems()).toEqual([]);
});
