/**
 * Two replicas on one database and one Redis, racing on the same conversations: user actions
 * through both APIs at once, the same result consumed by both replicas at once, a cancel
 * racing a tool result. Exactly one of two conflicting actions is accepted, and the stored
 * history is never interleaved (contiguous sequences, every tool_use answered exactly once,
 * a gap-free notification stream).
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { ErrorKind, Mode, StateKind, StopReason } from '@bedrock/contracts';
import type { ConversationServiceInstance } from '../src/create-conversation-service.ts';
import { text, toolUse } from './support/blocks.ts';
import { Code, rpcError, startHarness, type Harness } from './support/harness.ts';

let h: Harness;
let b: ConversationServiceInstance;
beforeAll(async () => {
  h = await startHarness({ label: 'replicas', workerConcurrency: 16 });
  b = await h.startReplica();
});
afterAll(async () => {
  await h?.close();
});

const N = 5;
const both = (user = 'alice') => [h.client(user), h.client(user, b)] as const;

/** The stored conversation is one serial history. */
async function expectSerial(id: string) {
  const conv = await h.pool.query<{ version: string; state: { seq: number }; message_seq: string; notify_seq: string }>(
    'SELECT version, state, message_seq, notify_seq FROM conversations WHERE id = $1',
    [id],
  );
  const row = conv.rows[0]!;
  expect(Number(row.version)).toBe(row.state.seq);
  const { messages } = await h.get(id);
  expect(messages.map((m) => Number(m.sequence))).toEqual(messages.map((_, i) => i + 1));
  expect(messages).toHaveLength(Number(row.message_seq));
  const asked = messages.flatMap((m) => m.content.flatMap((c) => (c.block.case === 'toolUse' ? [c.block.value.id] : [])));
  const answered = messages.flatMap((m) => m.content.flatMap((c) => (c.block.case === 'toolResult' ? [c.block.value.toolUseId] : [])));
  expect(answered).toEqual(asked.slice(0, answered.length));
  await h.waitFor(`all notifications of ${id} published`, async () => !(await h.service.store.hasUnsentOutbox(id)));
  const stream = (await h.notifications(id)).filter((e) => e.deltaIndex === 0);
  expect(stream.map((e) => Number(e.sequence))).toEqual(stream.map((_, i) => i + 1));
  expect(stream).toHaveLength(Number(row.notify_seq));
}

/** Conversations each running tool `t1` (of t1, t2) through replica A. */
async function runningTools(count: number) {
  return Promise.all(
    Array.from({ length: count }, async () => {
      const id = await h.createConversation();
      await h.client().sendMessage({ conversationId: id, text: 'go' });
      await h.respond(await h.llmJob(id), {
        stopReason: StopReason.TOOL_USE,
        content: [toolUse('t1', 'bash', { command: 'ls' }), toolUse('t2', 'bash', { command: 'pwd' })],
      });
      return { id, job: await h.toolJob(id, 't1') };
    }),
  );
}

describe('two replicas racing', () => {
  it('accept exactly one of two messages sent through both APIs at once', async () => {
    const ids = await Promise.all(Array.from({ length: N }, () => h.createConversation()));
    const [ca, cb] = both();
    await Promise.all(
      ids.map(async (id) => {
        const outcomes = await Promise.allSettled([
          ca.sendMessage({ conversationId: id, text: 'via A' }),
          cb.sendMessage({ conversationId: id, text: 'via B' }),
        ]);
        const ok = outcomes.filter((o) => o.status === 'fulfilled');
        const refused = outcomes.flatMap((o) => (o.status === 'rejected' ? [o.reason as { code: Code }] : []));
        expect(ok).toHaveLength(1);
        expect(refused.map((r) => r.code)).toEqual([Code.FailedPrecondition]);
        await h.llmJob(id);
      }),
    );
    for (const id of ids) {
      const { messages } = await h.get(id);
      expect(messages).toHaveLength(1);
      expect(h.llmJobsOf(id)).toHaveLength(1);
      await expectSerial(id);
    }
  });

  it('accept exactly one of two cancels sent through both APIs at once', async () => {
    const runs = await runningTools(N);
    const [ca, cb] = both();
    await Promise.all(
      runs.map(async ({ id }) => {
        const outcomes = await Promise.allSettled([ca.cancel({ conversationId: id }), cb.cancel({ conversationId: id })]);
        const ok = outcomes.flatMap((o) => (o.status === 'fulfilled' ? [o.value.state!.kind] : []));
        const refused = outcomes.flatMap((o) => (o.status === 'rejected' ? [o.reason as { code: Code; rawMessage: string }] : []));
        expect(ok).toEqual([StateKind.IDLE]);
        expect(refused.map((r) => [r.code, r.rawMessage])).toEqual([
          [Code.FailedPrecondition, 'Nothing to cancel: the agent is not working.'],
        ]);
      }),
    );
    for (const { id } of runs) {
      const { messages } = await h.get(id);
      expect(messages.map((m) => m.type)).toHaveLength(4); // user, agent, 2 synthetic results
      await expectSerial(id);
      await h.waitFor('kill signal', () => h.cancels.some((c) => c.conversationId === id && c.target.case === 'toolUseId'));
      expect(h.cancels.filter((c) => c.conversationId === id)).toHaveLength(1);
    }
  });

  it('apply a result consumed by both replicas at once exactly once', async () => {
    const runs = await runningTools(N);
    // The same result twice (a runner that ran the job twice); both replicas consume the queue.
    await Promise.all(
      runs.flatMap(({ job }) => [
        h.complete(job, { content: 'first' }, `x1/${job.conversationId}`),
        h.complete(job, { content: 'second' }, `x2/${job.conversationId}`),
      ]),
    );
    for (const { id } of runs) {
      await h.processed(`x1/${id}`);
      await h.processed(`x2/${id}`);
      const t2 = await h.toolJob(id, 't2');
      expect(h.toolJobsOf(id).map((j) => j.toolUseId)).toEqual(['t1', 't2']);
      const results = (await h.get(id)).messages.flatMap((m) =>
        m.content.flatMap((c) => (c.block.case === 'toolResult' ? [c.block.value] : [])),
      );
      expect(results).toHaveLength(1);
      expect(['first', 'second']).toContain(results[0]!.content);
      await h.complete(t2, { content: 'ok' });
    }
    for (const { id } of runs) {
      await h.llmJob(id, 1);
      expect(h.llmJobsOf(id)).toHaveLength(2);
      await expectSerial(id);
    }
  });

  it('serialise a cancel racing a tool result: either order, one history, a valid chain', async () => {
    const runs = await runningTools(N);
    await Promise.all(
      runs.map(async ({ id, job }) => {
        const [, cancelled] = await Promise.allSettled([
          h.complete(job, { content: 'done' }, `race/${id}`),
          h.client('alice', b).cancel({ conversationId: id }),
        ]);
        expect(cancelled.status).toBe('fulfilled');
        await h.processed(`race/${id}`);
        // Whatever won, the conversation comes to rest and takes the next message.
        const kind = await h.stateOf(id);
        if (kind === StateKind.CANCELLING) {
          const pending = h.llmJobsOf(id).at(-1)!;
          await h.fail(pending, { kind: ErrorKind.CANCELLED, aborted: true, message: 'aborted' });
        }
        await h.waitState(id, StateKind.IDLE);
        await h.client().sendMessage({ conversationId: id, text: 'next' });
      }),
    );
    const asksNext = (id: string) =>
      h.llmJobsOf(id).some((j) => j.messages.at(-1)!.content.some((c) => c.block.case === 'text' && c.block.value.text === 'next'));
    for (const { id } of runs) {
      await h.waitFor('the request for the next message', () => asksNext(id));
      await expectSerial(id);
    }
  });

  it('accept exactly one of an approval and a denial sent through both APIs at once', async () => {
    const ids = await Promise.all(
      Array.from({ length: 4 }, async () => {
        const id = await h.createConversation();
        await h.client().sendMessage({ conversationId: id, text: 'go' });
        await h.respond(await h.llmJob(id), {
          stopReason: StopReason.TOOL_USE,
          content: [toolUse('u1', 'request_mode_upgrade', { reason: 'write' })],
        });
        await h.waitState(id, StateKind.AWAITING_MODE_APPROVAL);
        return id;
      }),
    );
    const [ca, cb] = both();
    for (const id of ids) {
      const [approve, deny] = await Promise.allSettled([
        ca.respondToModeUpgrade({ conversationId: id, approve: true }),
        cb.respondToModeUpgrade({ conversationId: id, approve: false }),
      ]);
      const accepted = [approve, deny].filter((o) => o.status === 'fulfilled');
      expect(accepted).toHaveLength(1);
      const refused = [approve, deny].find((o) => o.status === 'rejected') as PromiseRejectedResult;
      expect((refused.reason as { code: Code }).code).toBe(Code.FailedPrecondition);
      const { conversation, messages } = await h.get(id);
      expect(conversation!.mode).toBe(approve.status === 'fulfilled' ? Mode.UNRESTRICTED : Mode.RESTRICTED);
      const answers = messages.flatMap((m) => m.content.flatMap((c) => (c.block.case === 'toolResult' ? [c.block.value.content] : [])));
      expect(answers).toHaveLength(1);
      await h.llmJob(id, 1);
      await expectSerial(id);
    }
  });

  it('reject a message to a conversation the other replica is driving, and let it finish', async () => {
    const [ca, cb] = both();
    const id = await h.createConversation();
    await ca.sendMessage({ conversationId: id, text: 'one' });
    const job = await h.llmJob(id);
    const err = await rpcError(cb.sendMessage({ conversationId: id, text: 'two' }));
    expect(err.code).toBe(Code.FailedPrecondition);
    await h.respond(job, { content: [text('answer')] });
    await h.waitState(id, StateKind.IDLE);
    expect((await cb.getConversation({ conversationId: id })).messages).toHaveLength(2);
    await expectSerial(id);
  });
});

it('sent only valid tool_use/tool_result chains to the model', () => {
  expect(h.chainProblems()).toEqual([]);
});
