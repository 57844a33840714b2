/**
 * DeleteConversation against real Postgres and Redis: nothing of the conversation or its
 * sub-agents is left in any table or Redis key; refused while busy (a running tool), allowed
 * after cancel; a sub-agent is refused; someone else's conversation is NOT_FOUND; a watcher
 * gets the final `deleted` event and its stream ends; a fork outlives its source.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Redis } from 'ioredis';
import { redisKeys } from '@bedrock/platform';
import { StateKind, StopReason, rejectionOf, type ConversationEvent } from '@bedrock/contracts';
import { text, toolUse } from './support/blocks.ts';
import { Code, REDIS_URL, rpcError, startHarness, type Harness } from './support/harness.ts';

let h: Harness;
let redis: Redis;
beforeAll(async () => {
  h = await startHarness({ label: 'deletion' });
  redis = new Redis(REDIS_URL);
});
afterAll(async () => {
  await redis?.quit();
  await h?.close();
});

/** Every table that holds rows naming a conversation, and how many rows name one of `ids`. */
async function rowsLeft(ids: string[]): Promise<Record<string, number>> {
  const count = async (sql: string) => Number((await h.pool.query<{ n: string }>(sql, [ids])).rows[0]!.n);
  return {
    conversations: await count('SELECT count(*) AS n FROM conversations WHERE id = ANY($1::text[]) OR parent_id = ANY($1::text[])'),
    messages: await count('SELECT count(*) AS n FROM messages WHERE conversation_id = ANY($1::text[])'),
    outbox: await count('SELECT count(*) AS n FROM outbox WHERE conversation_id = ANY($1::text[])'),
    request_outcomes: await count('SELECT count(*) AS n FROM request_outcomes WHERE scope = ANY($1::text[])'),
  };
}

/**
 * Keys under the test's prefix that name one of `ids`, except the queues' job records, whose
 * encoded ids need not contain the conversation id as it is (a deletion removes them too:
 * services/web-bff/test/no-leftovers.test.ts checks every key's content).
 */
async function keysLeft(ids: string[]): Promise<string[]> {
  const found: string[] = [];
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `${h.prefix}*`, 'COUNT', 1000);
    found.push(...keys.filter((k) => ids.some((id) => k.includes(id)) && !k.startsWith(`${h.prefix}:q:`)));
    cursor = next;
  } while (cursor !== '0');
  return found;
}

/** Runs a turn with a bash tool call, left running. */
async function withRunningTool(id: string) {
  await h.client().sendMessage({ conversationId: id, text: 'run it', requestId: `send-${id}` });
  const job = await h.llmJob(id);
  await h.respond(job, { stopReason: StopReason.TOOL_USE, content: [text('Running.'), toolUse('t1', 'bash', { command: 'sleep 60' })] });
  await h.toolJob(id, 't1');
  await h.waitFor('t1 current', async () => (await h.get(id)).conversation!.state!.currentToolUseId === 't1');
}

describe('DeleteConversation', () => {
  it('is refused while a tool runs, allowed after cancel, and leaves no row or key behind; a watcher sees the end', async () => {
    const id = await h.createConversation();
    await withRunningTool(id);
    expect((await h.notifications(id)).length).toBeGreaterThan(0);
    // Its stream, and the list of its jobs (removed with it).
    expect((await keysLeft([id])).sort()).toEqual([redisKeys(h.prefix).stream(id), redisKeys(h.prefix).conversationJobs(id)].sort());

    const busy = await rpcError(h.client().deleteConversation({ conversationId: id }));
    expect(busy.code).toBe(Code.FailedPrecondition);
    expect(rejectionOf(busy)?.code).toBe('conversation_busy');
    expect(busy.rawMessage).toMatch(/is busy \(tool executing\): cancel it first/);
    // Refused: nothing changed.
    expect((await h.get(id)).messages.length).toBeGreaterThan(0);

    await h.client().cancel({ conversationId: id });
    await h.waitState(id, StateKind.IDLE);

    const events: ConversationEvent[] = [];
    const abort = new AbortController();
    const watching = (async () => {
      for await (const res of h.client().watchConversation({ conversationId: id }, { signal: abort.signal })) events.push(res.event!);
    })();
    await h.waitFor('the snapshot', () => events.length > 0);

    const res = await h.client().deleteConversation({ conversationId: id, requestId: 'del-1' });
    expect(res.deletedIds).toEqual([id]);
    // The watch stream ends by itself, after the `deleted` event.
    await watching;
    expect(events.at(-1)!.kind.case).toBe('deleted');
    expect(events.at(-1)!.sequence).toBe(events.filter((e) => e.kind.case !== 'heartbeat' && e.deltaIndex === 0).at(-2)!.sequence + 1n);

    expect(await rowsLeft([id])).toEqual({ conversations: 0, messages: 0, outbox: 0, request_outcomes: 0 });
    expect(await keysLeft([id])).toEqual([]);
    expect((await rpcError(h.get(id))).code).toBe(Code.NotFound);
    expect((await rpcError(h.client().deleteConversation({ conversationId: id }))).code).toBe(Code.NotFound);
    // A retry with the same request id answers as the first time.
    expect((await h.client().deleteConversation({ conversationId: id, requestId: 'del-1' })).deletedIds).toEqual([id]);
    // A watch opened now is NOT_FOUND.
    const late = await rpcError(
      (async () => {
        for await (const _ of h.client().watchConversation({ conversationId: id })) break;
      })(),
    );
    expect(late.code).toBe(Code.NotFound);
  });

  it('deletes the sub-agents with their parent; a sub-agent alone is refused, and a busy one refuses the parent', async () => {
    const id = await h.createConversation();
    await h.client().sendMessage({ conversationId: id, text: 'split the work' });
    await h.respond(await h.llmJob(id), {
      stopReason: StopReason.TOOL_USE,
      content: [text('Spawning.'), toolUse('sp', 'spawn_agents', { tasks: [{ task: 'a' }, { task: 'b' }] })],
    });
    const children = [`${id}--sp--0`, `${id}--sp--1`];
    await Promise.all(children.map((c) => h.llmJob(c)));

    const sub = await rpcError(h.client().deleteConversation({ conversationId: children[0]! }));
    expect(sub.code).toBe(Code.InvalidArgument);
    expect(sub.rawMessage).toContain(`delete its parent ${id}`);
    const busy = await rpcError(h.client().deleteConversation({ conversationId: id }));
    expect(busy.code).toBe(Code.FailedPrecondition);
    expect(rejectionOf(busy)?.code).toBe('conversation_busy');

    await h.client().cancel({ conversationId: id });
    await h.waitState(id, StateKind.IDLE);
    for (const c of children)
      await h.waitFor(
        `${c} at rest`,
        async () =>
          (await h.pool.query(`SELECT 1 FROM conversations WHERE id = $1 AND state_kind IN ('idle','failed','completed','error')`, [c]))
            .rows.length === 1,
      );

    const res = await h.client().deleteConversation({ conversationId: id });
    expect([...res.deletedIds].sort()).toEqual([id, ...children].sort());
    expect(await rowsLeft([id, ...children])).toEqual({ conversations: 0, messages: 0, outbox: 0, request_outcomes: 0 });
    expect(await keysLeft([id, ...children])).toEqual([]);
  });

  it("answers NOT_FOUND for someone else's conversation and deletes nothing", async () => {
    const id = await h.createConversation();
    await h.client().sendMessage({ conversationId: id, text: 'hello' });
    await h.respond(await h.llmJob(id), { content: [text('Hi.')] });
    await h.waitState(id, StateKind.IDLE);
    const err = await rpcError(h.client('mallory').deleteConversation({ conversationId: id }));
    expect(err.code).toBe(Code.NotFound);
    expect((await h.get(id)).messages).toHaveLength(2);
  });

  it('keeps a fork working: it still names its source, marked deleted', async () => {
    const id = await h.createConversation();
    await h.client().sendMessage({ conversationId: id, text: 'hello', requestId: 'src-send' });
    await h.respond(await h.llmJob(id), { content: [text('Hi.')] });
    await h.waitState(id, StateKind.IDLE);
    const fork = (await h.client().forkConversation({ conversationId: id, requestId: 'fork-1' })).conversation!;
    await h.client().deleteConversation({ conversationId: id });

    const got = await h.get(fork.id);
    expect(got.conversation!.forkedFrom).toMatchObject({ conversationId: id, messageSequence: 2n, sourceDeleted: true });
    expect(got.messages).toHaveLength(2);
    await h.client().sendMessage({ conversationId: fork.id, text: 'go on' });
    await h.respond(await h.llmJob(fork.id), { content: [text('Going on.')] });
    await h.waitState(fork.id, StateKind.IDLE);
    expect((await h.get(fork.id)).messages).toHaveLength(4);
    // Deleting the fork too leaves nothing of either.
    await h.client().deleteConversation({ conversationId: fork.id });
    expect(await rowsLeft([id, fork.id])).toEqual({ conversations: 0, messages: 0, outbox: 0, request_outcomes: 0 });
    const created = await h.pool.query("SELECT 1 FROM request_outcomes WHERE request_id = 'fork-1'");
    expect(created.rows).toHaveLength(0);
  });
});
