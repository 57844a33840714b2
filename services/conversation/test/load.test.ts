/**
 * 100 conversations at once, each a full turn with a tool, against one replica: all finish,
 * each with exactly its own jobs, a serial history and a gap-free notification stream.
 */
import { afterAll, beforeAll, expect, it } from '@jest/globals';
import { MessageType, StateKind, StopReason } from '@bedrock/contracts';
import { text, toolResults, toolUse } from './support/blocks.ts';
import { startHarness, type Harness } from './support/harness.ts';

let h: Harness;
beforeAll(async () => {
  h = await startHarness({ label: 'load', workerConcurrency: 32, poolSize: 20, config: { events: { concurrency: 32 } } });
});
afterAll(async () => {
  await h?.close();
});

const COUNT = 100;

it(`runs ${COUNT} concurrent conversations through a full turn with a tool`, async () => {
  // The automatic gateway: first request → one bash call naming the conversation; second → an answer.
  h.onLlmJob = async (job) => {
    const turn = h.llmJobsOf(job.conversationId).indexOf(job);
    if (turn === 0) {
      await h.respond(job, {
        stopReason: StopReason.TOOL_USE,
        content: [text('Checking.'), toolUse('t1', 'bash', { command: `echo ${job.conversationId}` })],
      });
    } else {
      const result = toolResults(job)[0]!;
      await h.respond(job, { content: [text(`Saw: ${result.content}`)] });
    }
  };
  // The automatic runner echoes the command's argument.
  h.onToolJob = async (job) => {
    const input = JSON.parse(job.inputJson) as { command: string };
    await h.complete(job, { content: input.command.replace(/^echo /, '') });
  };

  const started = Date.now();
  const ids = await Promise.all(Array.from({ length: COUNT }, () => h.createConversation()));
  await Promise.all(ids.map((id, i) => h.client().sendMessage({ conversationId: id, text: `task ${i}` })));
  await h.waitFor(
    'every conversation idle',
    async () => {
      const { rows } = await h.pool.query<{ n: string }>(
        "SELECT count(*) AS n FROM conversations WHERE state_kind = 'idle' AND message_seq = 4",
      );
      return Number(rows[0]!.n) === COUNT;
    },
    60_000,
  );
  const elapsed = Date.now() - started;

  // Every conversation's own messages, in one query.
  const { rows } = await h.pool.query<{
    conversation_id: string;
    types: string[];
    contents: { text?: string; content?: string; toolUseId?: string }[][];
  }>(
    `SELECT conversation_id, array_agg(message_type ORDER BY sequence) AS types, array_agg(content ORDER BY sequence) AS contents
       FROM messages WHERE conversation_id = ANY($1::text[]) GROUP BY conversation_id`,
    [ids],
  );
  const byId = new Map(rows.map((r) => [r.conversation_id, r]));
  for (const [i, id] of ids.entries()) {
    expect(h.llmJobsOf(id)).toHaveLength(2);
    expect(h.toolJobsOf(id)).toHaveLength(1);
    const row = byId.get(id)!;
    expect(row.types).toEqual(['user', 'agent', 'tool', 'agent']);
    // No cross-talk: every conversation saw its own task and its own tool output.
    const [user, , tool, answer] = row.contents;
    expect(user![0]).toMatchObject({ text: `task ${i}` });
    expect(tool![0]).toMatchObject({ toolUseId: 't1', content: id });
    expect(answer![0]).toMatchObject({ text: `Saw: ${id}` });
  }
  for (const id of ids.slice(0, 5)) {
    const { conversation, messages } = await h.get(id);
    expect(conversation!.state!.kind).toBe(StateKind.IDLE);
    expect(messages.map((m) => m.type)).toEqual([MessageType.USER, MessageType.AGENT, MessageType.TOOL, MessageType.AGENT]);
  }
  await h.waitFor('outbox drained', async () => {
    const { rows } = await h.pool.query<{ n: string }>('SELECT count(*) AS n FROM outbox WHERE sent_at IS NULL');
    return Number(rows[0]!.n) === 0;
  });
  for (const id of ids.slice(0, 10)) {
    const stream = (await h.notifications(id)).filter((e) => e.deltaIndex === 0);
    expect(stream.map((e) => Number(e.sequence))).toEqual(stream.map((_, i) => i + 1));
  }
  expect(h.chainProblems()).toEqual([]);
  // Reported, not asserted: the machine's speed varies.
  console.log(`${COUNT} conversations, each a full turn with a tool, in ${elapsed} ms`);
}, 90_000);
