/**
 * At-least-once delivery (docs/design.md, "The life of an event"): a replica that dies between
 * commit and publish loses nothing (another relay publishes its rows), re-published rows
 * double nothing, and every event delivered twice leaves the same final state as once.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { fromJson, toJson, type JsonValue } from '@bufbuild/protobuf';
import {
  ConversationEventJobSchema,
  ConversationEventSchema,
  ErrorKind,
  QUEUE_CONVERSATION_EVENTS,
  StateKind,
  StopReason,
  type ConversationEvent,
  type LlmRequestJob,
} from '@bedrock/contracts';
import { text, toolUse } from './support/blocks.ts';
import { startHarness, type Harness } from './support/harness.ts';

let h: Harness;
beforeAll(async () => {
  // The relay's poll is set to a minute here, so everything below that is prompt is published
  // by the committing replica itself (or by the relay's first sweep after a start, or an
  // explicit sweep), never by waiting for the poll.
  h = await startHarness({ label: 'delivery', config: { outbox: { pollInterval: 60_000 } } });
});
afterAll(async () => {
  await h?.close();
});

function expectConsecutive(events: ConversationEvent[]) {
  const durable = events.filter((e) => e.deltaIndex === 0);
  expect(durable.map((e) => Number(e.sequence))).toEqual(durable.map((_, i) => i + 1));
}

async function unsent(id: string) {
  const { rows } = await h.pool.query<{ n: string }>(
    'SELECT count(*) AS n FROM outbox_effects WHERE conversation_id = $1 AND sent_at IS NULL',
    [id],
  );
  return Number(rows[0]!.n);
}

describe('relay', () => {
  it('publishes what a replica committed but never published, once, after it died', async () => {
    const id = await h.createConversation();
    // The replica "crashes" right after its commits: it publishes nothing any more.
    await h.service.publisher.stop();
    await h.service.relay.stop();
    const sent = await h.client().sendMessage({ conversationId: id, text: 'hello' });
    expect(sent.state!.kind).toBe(StateKind.LLM_REQUESTING);
    expect(await unsent(id)).toBeGreaterThanOrEqual(4); // message_persisted, title_changed, state_changed, the LLM job
    expect(await h.service.store.hasUnsentOutbox(id)).toBe(true);
    expect(h.llmJobsOf(id)).toHaveLength(0);
    expect(await h.notifications(id)).toEqual([]);

    // Another replica takes over: its relay publishes the dead one's rows.
    await h.restart();
    const job = await h.llmJob(id);
    await h.waitFor('all rows sent', async () => (await unsent(id)) === 0);
    const stream = await h.notifications(id);
    expectConsecutive(stream);
    expect(stream.map((e) => e.kind.case)).toEqual(['messagePersisted', 'titleChanged', 'stateChanged']);

    // A crash between publish and "mark sent": every row is published again. Nothing doubles.
    await h.pool.query('UPDATE outbox SET sent_at = NULL WHERE conversation_id = $1', [id]);
    expect(await h.service.relay.sweep()).toBeGreaterThanOrEqual(3);
    expect(await unsent(id)).toBe(0);
    expect(await h.notifications(id)).toEqual(stream);

    // Go on; a duplicate of the first LLM job would arrive before the second one (FIFO).
    await h.respond(job, { stopReason: StopReason.TOOL_USE, content: [toolUse('t1', 'bash', { command: 'ls' })] });
    await h.complete(await h.toolJob(id, 't1'), { content: 'x' });
    const second = await h.llmJob(id, 1);
    await h.respond(second, { content: [text('done')] });
    await h.waitState(id, StateKind.IDLE);

    // Re-publish the whole history once more, then run one more turn as a sentinel.
    await h.pool.query('UPDATE outbox SET sent_at = NULL WHERE conversation_id = $1', [id]);
    await h.service.relay.sweep();
    await h.client().sendMessage({ conversationId: id, text: 'again' });
    await h.llmJob(id, 2);
    expect(h.llmJobsOf(id).map((j) => j.requestId)).toEqual([`${id}/llm/1`, `${id}/llm/2`, `${id}/llm/3`]);
    expect(h.toolJobsOf(id).map((j) => j.toolUseId)).toEqual(['t1']);
    const after = await h.notifications(id);
    expectConsecutive(after);
    expect(after.slice(0, stream.length)).toEqual(stream);
  });

  it('publishes the effects a transition has on other conversations right after commit', async () => {
    // Sub-agent starts are rows of the child, results rows of the parent: both must go out
    // with the commit that wrote them, not at the next poll (a minute here).
    const id = await h.createConversation();
    await h.client().sendMessage({ conversationId: id, text: 'delegate' });
    await h.respond(await h.llmJob(id), {
      stopReason: StopReason.TOOL_USE,
      content: [toolUse('sp', 'spawn_agents', { tasks: [{ task: 'sub task' }] })],
    });
    const child = `${id}--sp--0`;
    const childJob = await h.llmJob(child, 0);
    await h.respond(childJob, { stopReason: StopReason.TOOL_USE, content: [toolUse('sr', 'submit_result', { result: 'sub done' })] });
    await h.llmJob(id, 1);
  });

  it('publishes promptly when commits for one conversation overlap its publishing', async () => {
    // Eight sub-agents submit at once: their results and the parent's own transitions commit
    // while the parent's rows are being published. None may wait for the poll.
    const parents = await Promise.all(
      Array.from({ length: 3 }, async () => {
        const id = await h.createConversation();
        await h.client().sendMessage({ conversationId: id, text: 'fan out' });
        await h.respond(await h.llmJob(id), {
          stopReason: StopReason.TOOL_USE,
          content: [toolUse('sp', 'spawn_agents', { tasks: Array.from({ length: 8 }, (_, i) => ({ task: `part ${i}` })) })],
        });
        return id;
      }),
    );
    const children = parents.flatMap((id) => Array.from({ length: 8 }, (_, i) => `${id}--sp--${i}`));
    const jobs = await Promise.all(children.map((c) => h.llmJob(c)));
    await Promise.all(
      jobs.map((job) => h.respond(job, { stopReason: StopReason.TOOL_USE, content: [toolUse('sr', 'submit_result', { result: 'ok' })] })),
    );
    for (const id of parents) await h.llmJob(id, 1);
    // Marks follow publishing (in the next write's statement, or alone within 10 ms): wait for
    // those in progress, not for the relay's poll.
    await h.service.publisher.drain();
    for (const id of [...parents, ...children]) expect(await unsent(id)).toBe(0);
  });
});

// ---- every event twice ------------------------------------------------------------------

/** A normalised view of a conversation and its children: no ids or clocks that differ between runs. */
async function finalView(id: string) {
  const strip = (value: unknown): unknown => {
    if (Array.isArray(value)) return value.map(strip);
    if (value && typeof value === 'object') {
      return Object.fromEntries(
        Object.entries(value)
          .filter(([k]) => !['createdAt', 'updatedAt', 'created_at', 'updated_at', 'state_updated_at', 'id', 'slug'].includes(k))
          .map(([k, v]) => [k, strip(v)]),
      );
    }
    return value;
  };
  const normalise = (value: unknown) =>
    JSON.parse(JSON.stringify(value, (_k, v: unknown) => (typeof v === 'bigint' ? v.toString() : v)).replaceAll(id, 'C'));
  const ids = [id, `${id}--sp--0`];
  const out: unknown[] = [];
  for (const cid of ids) {
    const conv = await h.pool.query('SELECT * FROM conversations WHERE id = $1', [cid]);
    const messages = await h.pool.query('SELECT * FROM messages WHERE conversation_id = $1 ORDER BY sequence', [cid]);
    const stream = (await h.notifications(cid)).map((e) => toJson(ConversationEventSchema, e));
    out.push(strip(normalise({ conversation: conv.rows[0], messages: messages.rows, stream })));
  }
  return out;
}

/**
 * Re-sends the conversation-events jobs the outbox holds for these conversations, under new
 * ids: those already delivered once (a timer is never delivered before it is due), or all of
 * them once the conversation is at rest (removed timers included: a late timer).
 */
async function replayEventJobs(ids: string[], round: string, all = false): Promise<string[]> {
  const { rows } = await h.pool.query<{ payload: { jobId: string; message: JsonValue } }>(
    `SELECT payload FROM outbox_effects WHERE kind = 'job' AND payload->>'queue' = $2 AND conversation_id = ANY($1::text[]) ORDER BY id, n`,
    [ids, QUEUE_CONVERSATION_EVENTS],
  );
  const sent: string[] = [];
  for (const [i, row] of rows.entries()) {
    if (!all && (await h.transport.queues.jobStatus(QUEUE_CONVERSATION_EVENTS, row.payload.jobId)).state !== 'completed') continue;
    const job = fromJson(ConversationEventJobSchema, row.payload.message);
    const eventId = `replay/${round}/${i}/${job.eventId}`;
    await h.send(job.conversationId, eventId, job.event);
    sent.push(eventId);
  }
  return sent;
}

/**
 * One scripted conversation: a tool, a sub-agent, a retried LLM error, an answer. With `twice`,
 * every answer of the gateway and runner is sent twice at once under different ids (a worker
 * that ran the job twice), and after every step every event job the service itself produced
 * (sub-agent start, the sub-agent's result, timers) and already delivered is delivered again.
 */
async function script(twice: boolean): Promise<{ id: string; eventIds: string[] }> {
  const id = await h.createConversation();
  const child = `${id}--sp--0`;
  const eventIds: string[] = [];
  const answer = async (eventId: string, send: (eventId: string) => Promise<void>) => {
    const ids = twice ? [eventId, `${eventId}#2`] : [eventId];
    await Promise.all(ids.map(send));
    eventIds.push(...ids);
    if (twice) eventIds.push(...(await replayEventJobs([id, child], String(eventIds.length))));
  };
  const respond = (job: LlmRequestJob, value: Parameters<Harness['respond']>[1]) =>
    answer(`r/${job.requestId}`, (eventId) => h.respond(job, value, eventId));

  await h.client().sendMessage({ conversationId: id, text: 'do it all' });
  await respond(await h.llmJob(id, 0), {
    stopReason: StopReason.TOOL_USE,
    content: [text('Working.'), toolUse('t1', 'bash', { command: 'ls' }), toolUse('sp', 'spawn_agents', { tasks: [{ task: 'check' }] })],
  });
  const tool = await h.toolJob(id, 't1');
  await answer(`t/${id}/t1`, (eventId) => h.complete(tool, { content: 'a b' }, eventId));
  await respond(await h.llmJob(child, 0), {
    stopReason: StopReason.TOOL_USE,
    content: [toolUse('sr', 'submit_result', { result: 'checked' })],
  });
  const failing = await h.llmJob(id, 1);
  await answer(`e/${failing.requestId}`, (eventId) =>
    h.fail(failing, { kind: ErrorKind.SERVER, retryable: true, message: 'Overloaded', httpStatus: 529 }, eventId),
  );
  await respond(await h.llmJob(id, 2), { content: [text('All done.')] });
  await h.waitState(id, StateKind.IDLE);
  if (twice) eventIds.push(...(await replayEventJobs([id, child], 'final', true)));
  for (const eventId of eventIds) await h.processed(eventId);
  return { id, eventIds };
}

describe('every event delivered twice', () => {
  it('ends in exactly the state, messages and notifications of a single delivery', async () => {
    const once = await script(false);
    const twice = await script(true);
    expect(twice.eventIds.length).toBeGreaterThan(once.eventIds.length * 2);
    const [a, b] = [await finalView(once.id), await finalView(twice.id)];
    expect(b).toEqual(a);
    // Each job reached the gateway and the runner once.
    for (const run of [once, twice]) {
      expect(h.llmJobsOf(run.id)).toHaveLength(3);
      expect(h.llmJobsOf(`${run.id}--sp--0`)).toHaveLength(1);
      expect(h.toolJobsOf(run.id)).toHaveLength(1);
    }
  });
});

it('sent only valid tool_use/tool_result chains to the model', () => {
  expect(h.chainProblems()).toEqual([]);
});
