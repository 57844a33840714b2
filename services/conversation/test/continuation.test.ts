/**
 * Context limits (REQ-BED-019..024): the warning at 80% (once), the continuation at 90% with
 * the tools of that response not run, the manual trigger, the fallback summary, the read-only
 * exhausted conversation and a new conversation seeded from its summary. The test model's
 * window is 200 000 tokens (an unknown model gets the smallest known window).
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { ErrorKind, LlmRequestPurpose, MessageType, StateKind, StopReason } from '@bedrock/contracts';
import { CONTINUATION_FALLBACK_SUMMARY, CONTINUATION_PROMPT, NOT_EXECUTED_CONTEXT } from '../src/core/index.ts';
import { text, textOf, toolResults, toolUse, usage } from './support/blocks.ts';
import { Code, rpcError, startHarness, type Harness } from './support/harness.ts';

let h: Harness;
beforeAll(async () => {
  h = await startHarness({ label: 'continuation' });
});
afterAll(async () => {
  await h?.close();
});

async function started(prompt = 'work') {
  const id = await h.createConversation();
  await h.client().sendMessage({ conversationId: id, text: prompt });
  return { id, job: await h.llmJob(id) };
}

const warnings = async (id: string) =>
  (await h.notifications(id)).flatMap((e) => (e.kind.case === 'contextWarning' ? [e.kind.value.contextUsage!] : []));

describe('context warning', () => {
  it('warns once when a response reaches 80% of the window', async () => {
    const { id, job } = await started();
    await h.respond(job, { usage: usage(150_000, 500), content: [text('below')] });
    await h.waitState(id, StateKind.IDLE);
    expect(await warnings(id)).toEqual([]);
    expect((await h.get(id)).conversation!.contextUsage!.warning).toBe(false);

    await h.client().sendMessage({ conversationId: id, text: 'more' });
    // input + cache read + cache creation + output = 161 000 >= 160 000
    await h.respond(await h.llmJob(id, 1), { usage: usage(140_000, 1_000, 15_000, 5_000), content: [text('near')] });
    await h.waitState(id, StateKind.IDLE);
    const [warning, ...more] = await warnings(id);
    expect(more).toEqual([]);
    expect([warning!.usedTokens, warning!.contextWindow, warning!.warning]).toEqual([161_000n, 200_000n, true]);
    const conv = (await h.get(id)).conversation!;
    expect(conv.contextUsage!.warning).toBe(true);
    expect(conv.contextUsage!.usedTokens).toBe(161_000n);

    await h.client().sendMessage({ conversationId: id, text: 'and more' });
    await h.respond(await h.llmJob(id, 2), { usage: usage(170_000, 1_000), content: [text('nearer')] });
    await h.waitState(id, StateKind.IDLE);
    expect(await warnings(id)).toHaveLength(1);
  });
});

describe('continuation', () => {
  it('at 90% runs none of the response tools, asks for a summary (tools defined, not offered), and ends read-only', async () => {
    const { id, job } = await started();
    await h.respond(job, {
      stopReason: StopReason.TOOL_USE,
      usage: usage(180_000, 1_000),
      content: [
        text('Next I will run two things.'),
        toolUse('n1', 'bash', { command: 'npm test' }),
        toolUse('n2', 'keyword_search', { query: 'q', search_terms: ['x'] }),
      ],
    });
    const cont = await h.llmJob(id, 1);
    expect(cont.purpose).toBe(LlmRequestPurpose.CONTINUATION);
    // The tools stay defined (the history holds their tool_use blocks); the gateway forbids their use.
    expect(cont.toolNames).toEqual(job.toolNames);
    expect(toolResults(cont).map((r) => [r.toolUseId, r.content, r.cancelled])).toEqual([
      ['n1', NOT_EXECUTED_CONTEXT, true],
      ['n2', NOT_EXECUTED_CONTEXT, true],
    ]);
    const prompt = textOf(cont.messages.at(-1)!.content);
    expect(prompt).toContain(CONTINUATION_PROMPT);
    expect(prompt).toMatch(/not executed due to context limits:\n- bash\n- keyword_search/);
    expect(await h.stateOf(id)).toBe(StateKind.AWAITING_CONTINUATION);
    expect(h.toolJobsOf(id)).toHaveLength(0);

    await h.respond(cont, { usage: usage(181_000, 300), content: [text('Summary: tests were next.')] });
    await h.waitState(id, StateKind.CONTEXT_EXHAUSTED);
    const got = await h.get(id);
    expect(got.conversation!.state!.summary).toBe('Summary: tests were next.');
    expect(got.messages.map((m) => MessageType[m.type])).toEqual(['USER', 'AGENT', 'TOOL', 'TOOL', 'CONTINUATION']);
    const exhausted = (await h.notifications(id)).flatMap((e) => (e.kind.case === 'contextExhausted' ? [e.kind.value.summary] : []));
    expect(exhausted).toEqual(['Summary: tests were next.']);

    const refused = await rpcError(h.client().sendMessage({ conversationId: id, text: 'go on' }));
    expect(refused.code).toBe(Code.FailedPrecondition);
    expect(refused.rawMessage).toMatch(/context limit.*read-only/);

    // A new conversation starts from the summary.
    const next = (await h.client().createConversation({ cwd: '/tmp', continueFromId: id })).conversation!;
    expect(next.continuedFromId).toBe(id);
    await h.client().sendMessage({ conversationId: next.id, text: 'continue please' });
    const first = await h.llmJob(next.id);
    expect(first.messages).toHaveLength(1);
    expect(textOf(first.messages[0]!.content)).toMatch(
      /\[System notice\] This conversation continues an earlier one[\s\S]*Summary: tests were next\.[\s\S]*continue please/,
    );
  });

  it('treats stop reason model_context_window_exceeded like the threshold', async () => {
    const { id, job } = await started();
    await h.respond(job, { stopReason: StopReason.MODEL_CONTEXT_WINDOW_EXCEEDED, usage: usage(1_000, 10), content: [text('cut')] });
    const cont = await h.llmJob(id, 1);
    expect(cont.purpose).toBe(LlmRequestPurpose.CONTINUATION);
    expect(textOf(cont.messages.at(-1)!.content)).toBe(CONTINUATION_PROMPT);
  });

  it('is triggered by hand when idle, retried like a turn, and falls back to a fixed summary', async () => {
    const { id, job } = await started();
    const busy = await rpcError(h.client().triggerContinuation({ conversationId: id }));
    expect(busy.code).toBe(Code.FailedPrecondition);
    expect(busy.rawMessage).toMatch(/only while the agent is idle/);
    const notYet = await rpcError(h.client().createConversation({ cwd: '/tmp', continueFromId: id }));
    expect(notYet.code).toBe(Code.FailedPrecondition);

    await h.respond(job, { content: [text('ok')] });
    await h.waitState(id, StateKind.IDLE);
    const res = await h.client().triggerContinuation({ conversationId: id });
    expect(res.state!.kind).toBe(StateKind.AWAITING_CONTINUATION);
    const cont = await h.llmJob(id, 1);
    expect(cont.purpose).toBe(LlmRequestPurpose.CONTINUATION);
    expect(cont.toolNames).toEqual(job.toolNames);
    await h.fail(cont, { kind: ErrorKind.SERVER, retryable: true, message: 'Overloaded', httpStatus: 529 });
    const retry = await h.llmJob(id, 2);
    expect([retry.purpose, retry.attempt, retry.toolNames]).toEqual([LlmRequestPurpose.CONTINUATION, 2, job.toolNames]);
    await h.fail(retry, { kind: ErrorKind.INVALID_REQUEST, retryable: false, message: 'bad' });
    await h.waitState(id, StateKind.CONTEXT_EXHAUSTED);
    const got = await h.get(id);
    expect(got.conversation!.state!.summary).toBe(CONTINUATION_FALLBACK_SUMMARY);
    expect(textOf(got.messages.at(-1)!.content)).toBe(CONTINUATION_FALLBACK_SUMMARY);
  });

  it('fails a sub-agent that reaches the threshold and tells its parent', async () => {
    const { id, job } = await started();
    await h.respond(job, {
      stopReason: StopReason.TOOL_USE,
      content: [toolUse('sp', 'spawn_agents', { tasks: [{ task: 'read everything' }] })],
    });
    const child = `${id}--sp--0`;
    await h.respond(await h.llmJob(child), {
      stopReason: StopReason.TOOL_USE,
      usage: usage(185_000, 100),
      content: [toolUse('r1', 'bash', { command: 'cat big' })],
    });
    await h.waitState(child, StateKind.FAILED);
    expect((await h.get(child)).conversation!.state!.errorKind).toBe(ErrorKind.CONTEXT_EXHAUSTED);
    expect(h.llmJobsOf(child)).toHaveLength(1);
    const parentNext = await h.llmJob(id, 1);
    expect(toolResults(parentNext)[0]!.content).toMatch(/FAILED \(context_exhausted\)/);
  });
});

it('sent only valid tool_use/tool_result chains to the model', () => {
  expect(h.chainProblems()).toEqual([]);
});
