/**
 * Every flow of the spec through the real service, Postgres and Redis; the test plays the
 * gateway and the runner on the real queues.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Code, ConnectError } from '@connectrpc/connect';
import { ErrorKind, MessageType, Mode, StateKind, StopReason } from '@bedrock/contracts';
import { startHarness, type Harness } from './support/harness.ts';
import type { LlmJob } from './support/blocks.ts';

let h: Harness;
beforeAll(async () => {
  h = await startHarness({ label: 'flows' });
});
afterAll(async () => {
  await h?.close();
});

const usage = (input = 100, output = 20) => ({ inputTokens: BigInt(input), outputTokens: BigInt(output) });
const text = (t: string) => ({ block: { case: 'text' as const, value: { text: t } } });
const toolUse = (id: string, name: string, input: object) => ({
  block: { case: 'toolUse' as const, value: { id, name, inputJson: JSON.stringify(input) } },
});

async function newConversation(user = 'alice') {
  const res = await h.client(user).createConversation({ cwd: '/tmp' });
  return res.conversation!;
}

async function nextLlmJob(conversationId: string, after = 0): Promise<LlmJob> {
  return h.waitFor(
    `LLM request #${after + 1} for ${conversationId}`,
    () => h.llmJobs.filter((j) => j.conversationId === conversationId)[after],
  );
}

async function stateOf(id: string, user = 'alice') {
  return (await h.client(user).getConversation({ conversationId: id })).conversation!.state!.kind;
}

async function waitState(id: string, kind: StateKind) {
  return h.waitFor(`state ${StateKind[kind]} for ${id}`, async () => (await stateOf(id)) === kind);
}

describe('a full turn', () => {
  it('runs three tools serially in order, then answers and becomes idle', async () => {
    const conv = await newConversation();
    expect(conv.mode).toBe(Mode.RESTRICTED);
    await h.client().sendMessage({ conversationId: conv.id, text: 'list things' });
    const first = await nextLlmJob(conv.id);
    expect(first.messages).toHaveLength(1);
    expect(first.toolNames).toEqual(expect.arrayContaining(['bash', 'patch', 'request_mode_upgrade', 'spawn_agents']));

    await h.send(conv.id, `r/${first.requestId}`, {
      case: 'llmResponse',
      value: {
        requestId: first.requestId,
        stopReason: StopReason.TOOL_USE,
        usage: usage(),
        content: [
          text('I will look.'),
          toolUse('t1', 'bash', { command: 'ls' }),
          toolUse('t2', 'think', { thoughts: 'hm' }),
          toolUse('t3', 'bash', { command: 'pwd' }),
        ],
      },
    });
    for (const [i, id] of ['t1', 't2', 't3'].entries()) {
      const job = await h.waitFor(`tool job ${id}`, () => h.toolJobs.find((j) => j.toolUseId === id));
      // Serial: the next tool is not dispatched before this one completes.
      expect(h.toolJobs.filter((j) => j.conversationId === conv.id)).toHaveLength(i + 1);
      expect(job.cwd).toBe('/tmp');
      expect(job.mode).toBe(Mode.RESTRICTED);
      await h.send(conv.id, `tool/${id}`, { case: 'toolComplete', value: { toolUseId: id, content: `out ${id}` } });
    }
    const second = await nextLlmJob(conv.id, 1);
    // user, assistant(tool_use x3), user(tool_result x3)
    expect(second.messages.map((m) => m.content.map((b) => b.block.case))).toEqual([
      ['text'],
      ['text', 'toolUse', 'toolUse', 'toolUse'],
      ['toolResult', 'toolResult', 'toolResult'],
    ]);
    await h.send(conv.id, `r/${second.requestId}`, {
      case: 'llmResponse',
      value: { requestId: second.requestId, stopReason: StopReason.END_TURN, usage: usage(), content: [text('Done.')] },
    });
    await waitState(conv.id, StateKind.IDLE);
    const got = await h.client().getConversation({ conversationId: conv.id });
    expect(got.messages.map((m) => MessageType[m.type])).toEqual(['USER', 'AGENT', 'TOOL', 'TOOL', 'TOOL', 'AGENT']);
    expect(got.conversation!.totalUsage!.inputTokens).toBe(200n);
  });

  it('rejects a message while busy with FAILED_PRECONDITION telling the user they can cancel', async () => {
    const conv = await newConversation();
    await h.client().sendMessage({ conversationId: conv.id, text: 'one' });
    const err = await h
      .client()
      .sendMessage({ conversationId: conv.id, text: 'two' })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ConnectError);
    expect((err as ConnectError).code).toBe(Code.FailedPrecondition);
    expect((err as ConnectError).rawMessage).toMatch(/busy.*cancel/i);
  });
});

describe('errors and retries', () => {
  it('retries a 529 with a visible attempt, then succeeds', async () => {
    const conv = await newConversation();
    await h.client().sendMessage({ conversationId: conv.id, text: 'hello' });
    const first = await nextLlmJob(conv.id);
    await h.send(conv.id, `e/${first.requestId}`, {
      case: 'llmError',
      value: { requestId: first.requestId, kind: ErrorKind.SERVER, retryable: true, message: 'Overloaded', httpStatus: 529 },
    });
    const second = await nextLlmJob(conv.id, 1);
    expect(second.attempt).toBe(2);
    expect(second.requestId).not.toBe(first.requestId);
    await h.send(conv.id, `r/${second.requestId}`, {
      case: 'llmResponse',
      value: { requestId: second.requestId, stopReason: StopReason.END_TURN, usage: usage(), content: [text('hi')] },
    });
    await waitState(conv.id, StateKind.IDLE);
  });

  it('goes to Error on an auth error and recovers with a new message', async () => {
    const conv = await newConversation();
    await h.client().sendMessage({ conversationId: conv.id, text: 'hello' });
    const first = await nextLlmJob(conv.id);
    await h.send(conv.id, `e/${first.requestId}`, {
      case: 'llmError',
      value: { requestId: first.requestId, kind: ErrorKind.AUTH, retryable: false, message: 'Authentication failed: invalid x-api-key' },
    });
    await waitState(conv.id, StateKind.ERROR);
    const got = await h.client().getConversation({ conversationId: conv.id });
    expect(got.conversation!.state!.errorKind).toBe(ErrorKind.AUTH);
    expect(got.conversation!.state!.errorMessage).toMatch(/Authentication failed/);
    await h.client().sendMessage({ conversationId: conv.id, text: 'again' });
    await nextLlmJob(conv.id, 1);
    expect(await stateOf(conv.id)).toBe(StateKind.LLM_REQUESTING);
  });
});
