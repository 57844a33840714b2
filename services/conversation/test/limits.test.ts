/**
 * Limits (docs/conversation.md, "Limits") against Postgres and Redis with two replicas: each
 * limit reached (RESOURCE_EXHAUSTED with a `limit_reached` Rejection naming it and when it
 * resets) and reset by moving the service clock (a day, a month, a minute) or, for busy
 * conversations, by one coming to rest; set by admins (audited), defaults from the config.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createClient, type Interceptor } from '@connectrpc/connect';
import { createGrpcTransport } from '@connectrpc/connect-node';
import { timestampDate } from '@bufbuild/protobuf/wkt';
import { AdminService, ErrorKind, MessageType, rejectionOf, ROLE_HEADER, StateKind, StopReason, USER_HEADER } from '@bedrock/contracts';
import { serviceTokenInterceptor } from '@bedrock/platform/server';
import type { ConversationServiceInstance } from '../src/create-conversation-service.ts';
import { text, toolUse, usage } from './support/blocks.ts';
import { Code, rpcError, startHarness, type Harness } from './support/harness.ts';

let h: Harness;
let b: ConversationServiceInstance;
let now = new Date('2026-05-31T10:00:00Z');
beforeAll(async () => {
  h = await startHarness({
    label: 'limits',
    clock: () => now,
    workerConcurrency: 16,
    config: {
      // Everyone: at most 3 busy conversations (the default an admin's setting replaces).
      limits: { maxBusyConversations: 3 },
      models: {
        registry: JSON.stringify({ 'test-model': { contextWindow: 200_000, maxOutputTokens: 64_000, prices: { input: 3, output: 15 } } }),
      },
    },
  });
  b = await h.startReplica();
});
afterAll(async () => {
  await h?.close();
});

const headers =
  (values: Record<string, string>): Interceptor =>
  (next) =>
  (req) => {
    for (const [k, v] of Object.entries(values)) req.header.set(k, v);
    return next(req);
  };
const admin = (role = 'admin') =>
  createClient(
    AdminService,
    createGrpcTransport({
      baseUrl: h.service.grpcUrl,
      interceptors: [serviceTokenInterceptor(h.services.tokens['web-bff']!), headers({ [USER_HEADER]: 'root', [ROLE_HEADER]: role })],
    }),
  );

/** A message answered at once with `input` tokens (3 µ$ each at test-model's price), back at rest. */
async function spend(user: string, id: string, input: number) {
  const before = h.llmJobsOf(id).length;
  await h.client(user).sendMessage({ conversationId: id, text: 'go' });
  const job = await h.llmJob(id, before);
  await h.respond(job, { usage: usage(input, 0), content: [text('ok')] });
  await h.processed(`r/${job.requestId}`);
}

async function refused(call: Promise<unknown>, limit: string) {
  const err = await rpcError(call);
  expect(err.code).toBe(Code.ResourceExhausted);
  const rejection = rejectionOf(err);
  expect(rejection).toMatchObject({ code: 'limit_reached', limit });
  expect(rejection!.message).toBe(err.rawMessage);
  return rejection!.resetsAt ? timestampDate(rejection!.resetsAt) : null;
}

describe('limits', () => {
  it('are set by admins only, over the defaults, audited, and shown to the user with their spend', async () => {
    expect((await rpcError(admin('user').setUserLimits({ userId: 'erin', dailyBudgetMicros: 1n }))).code).toBe(Code.PermissionDenied);
    expect((await rpcError(admin().setUserLimits({ userId: 'erin' }))).code).toBe(Code.InvalidArgument);
    expect((await rpcError(admin().setUserLimits({ userId: 'erin', reset: true, messagesPerMinute: 1 }))).code).toBe(Code.InvalidArgument);
    const fresh = (await admin().getUserLimits({ userId: 'erin' })).usage!;
    expect(fresh.limits).toMatchObject({
      dailyBudgetMicros: 0n,
      monthlyBudgetMicros: 0n,
      maxBusyConversations: 3,
      messagesPerMinute: 0,
      maxConversations: 0,
    });
    expect(fresh.limitsSet).toEqual([]);

    const set = (await admin().setUserLimits({ userId: 'erin', dailyBudgetMicros: 5_000_000n, messagesPerMinute: 7 })).usage!;
    expect(set.limits).toMatchObject({ dailyBudgetMicros: 5_000_000n, maxBusyConversations: 3, messagesPerMinute: 7 });
    expect(set.limitsSet).toEqual(['daily_budget_micros', 'messages_per_minute']);
    // A later change keeps what it does not name.
    const more = (await admin().setUserLimits({ userId: 'erin', maxBusyConversations: 0 })).usage!;
    expect(more.limits).toMatchObject({ dailyBudgetMicros: 5_000_000n, maxBusyConversations: 0, messagesPerMinute: 7 });

    const id = await h.createConversation('erin');
    await spend('erin', id, 10_000);
    const mine = (await h.client('erin').getUsage({})).usage!;
    expect(mine).toMatchObject({ userId: 'erin', spentTodayMicros: 30_000n, spentThisMonthMicros: 30_000n, busyConversations: 0 });
    expect(timestampDate(mine.dayResetsAt!).toISOString()).toBe('2026-06-01T00:00:00.000Z');
    expect(timestampDate(mine.monthResetsAt!).toISOString()).toBe('2026-06-01T00:00:00.000Z');

    const back = (await admin().setUserLimits({ userId: 'erin', reset: true })).usage!;
    expect(back.limitsSet).toEqual([]);
    expect(back.limits!.maxBusyConversations).toBe(3);
    const { rows } = await h.pool.query<{ user_id: string; details: { user_id: string } }>(
      `SELECT user_id, details FROM audit_events WHERE action = 'limit_changed' ORDER BY id`,
    );
    expect(rows.map((r) => [r.user_id, r.details.user_id])).toEqual([
      ['root', 'erin'],
      ['root', 'erin'],
      ['root', 'erin'],
    ]);
  });

  it('daily budget: refused once reached, until midnight UTC', async () => {
    now = new Date('2026-05-31T10:00:00Z');
    await admin().setUserLimits({ userId: 'fay', dailyBudgetMicros: 50_000n });
    const id = await h.createConversation('fay');
    await spend('fay', id, 10_000); // 30,000 µ$: under
    await spend('fay', id, 10_000); // 60,000 µ$: over now
    const resets = await refused(h.client('fay', b).sendMessage({ conversationId: id, text: 'more' }), 'daily_budget');
    expect(resets!.toISOString()).toBe('2026-06-01T00:00:00.000Z');
    now = new Date('2026-06-01T00:00:01Z');
    await spend('fay', id, 1);
  });

  it('a budget below a hundredth of a cent reads as itself in the refusal, not as $0.0000', async () => {
    now = new Date('2026-05-31T10:00:00Z');
    await admin().setUserLimits({ userId: 'pia', dailyBudgetMicros: 1n });
    const id = await h.createConversation('pia');
    await spend('pia', id, 1); // 3 µ$
    const err = await rpcError(h.client('pia').sendMessage({ conversationId: id, text: 'more' }));
    expect(err.rawMessage).toBe('daily budget reached: $0.000003 of $0.000001 spent today; it resets at 2026-06-01T00:00:00.000Z');
  });

  it('monthly budget: the days add up; refused until the first of the next month', async () => {
    now = new Date('2026-06-29T12:00:00Z');
    await admin().setUserLimits({ userId: 'gus', monthlyBudgetMicros: 50_000n });
    const id = await h.createConversation('gus');
    await spend('gus', id, 10_000);
    now = new Date('2026-06-30T12:00:00Z');
    await spend('gus', id, 10_000);
    const resets = await refused(h.client('gus').sendMessage({ conversationId: id, text: 'more' }), 'monthly_budget');
    expect(resets!.toISOString()).toBe('2026-07-01T00:00:00.000Z');
    now = new Date('2026-07-01T00:00:00Z');
    await spend('gus', id, 1);
  });

  it('messages per minute: counted across both replicas; refused until the next minute', async () => {
    now = new Date('2026-07-02T08:15:10Z');
    await admin().setUserLimits({ userId: 'hal', messagesPerMinute: 2 });
    const ids = await Promise.all([1, 2, 3].map(() => h.createConversation('hal')));
    await h.client('hal').sendMessage({ conversationId: ids[0]!, text: 'one' });
    await h.client('hal', b).sendMessage({ conversationId: ids[1]!, text: 'two' });
    const resets = await refused(h.client('hal', b).sendMessage({ conversationId: ids[2]!, text: 'three' }), 'messages_per_minute');
    expect(resets!.toISOString()).toBe('2026-07-02T08:16:00.000Z');
    expect((await rpcError(h.client('hal').sendMessage({ conversationId: ids[2]!, text: 'three' }))).code).toBe(Code.ResourceExhausted);
    now = new Date('2026-07-02T08:16:00Z');
    await h.client('hal').sendMessage({ conversationId: ids[2]!, text: 'three' });
  });

  it('busy conversations: of messages racing through both replicas only the limit start turns; one at rest frees a place', async () => {
    await admin().setUserLimits({ userId: 'ivy', maxBusyConversations: 2 });
    const ids = await Promise.all([1, 2, 3, 4].map(() => h.createConversation('ivy')));
    const outcomes = await Promise.allSettled(
      ids.map((id, i) => (i % 2 === 0 ? h.client('ivy') : h.client('ivy', b)).sendMessage({ conversationId: id, text: 'go' })),
    );
    const accepted = ids.filter((_, i) => outcomes[i]!.status === 'fulfilled');
    const rejected = ids.filter((_, i) => outcomes[i]!.status === 'rejected');
    expect(accepted).toHaveLength(2);
    for (const i of outcomes.keys()) {
      const o = outcomes[i]!;
      if (o.status === 'rejected') {
        expect(rejectionOf(o.reason)).toMatchObject({ code: 'limit_reached', limit: 'max_busy_conversations' });
        expect(rejectionOf(o.reason)!.resetsAt).toBeUndefined();
      }
    }
    expect((await h.client('ivy').getUsage({})).usage!.busyConversations).toBe(2);
    // A message to a busy conversation starts no turn: it is not counted (here: the conversation's own refusal).
    expect((await rpcError(h.client('ivy').sendMessage({ conversationId: accepted[0]!, text: 'again' }))).code).toBe(
      Code.FailedPrecondition,
    );
    // One comes to rest: a place is free.
    const job = await h.llmJob(accepted[0]!);
    await h.respond(job, { stopReason: StopReason.END_TURN, content: [text('done')] });
    await h.processed(`r/${job.requestId}`);
    await h.client('ivy', b).sendMessage({ conversationId: rejected[0]!, text: 'go' });
    await refused(h.client('ivy').sendMessage({ conversationId: rejected[1]!, text: 'go' }), 'max_busy_conversations');
  });
});

describe('conversations per user', () => {
  it('of creations and forks racing through both replicas only the limit succeed; deleting one makes room', async () => {
    await admin().setUserLimits({ userId: 'kim', maxConversations: 3 });
    expect((await admin().getUserLimits({ userId: 'kim' })).usage!.limitsSet).toEqual(['max_conversations']);
    const first = await h.createConversation('kim');
    await spend('kim', first, 1);
    const attempts = await Promise.allSettled([
      h.client('kim').createConversation({ cwd: '/tmp' }),
      h.client('kim', b).createConversation({ cwd: '/tmp' }),
      h.client('kim').forkConversation({ conversationId: first }),
      h.client('kim', b).forkConversation({ conversationId: first }),
      h.client('kim').createConversation({ cwd: '/tmp', requestId: 'kim-create-1' }),
    ]);
    expect(attempts.filter((o) => o.status === 'fulfilled')).toHaveLength(2);
    for (const o of attempts) {
      if (o.status === 'rejected') {
        expect(o.reason).toMatchObject({ code: Code.ResourceExhausted });
        const rejection = rejectionOf(o.reason)!;
        expect(rejection).toMatchObject({ code: 'limit_reached', limit: 'max_conversations' });
        expect(rejection.resetsAt).toBeUndefined();
        expect(rejection.message).toBe(
          'conversations limit reached: you have 3 of 3 conversations; delete one you no longer need (bedrock rm ID) to make room',
        );
      }
    }
    const usage = (await h.client('kim').getUsage({})).usage!;
    expect(usage).toMatchObject({ conversations: 3, limits: { maxConversations: 3 } });
    // Sub-agents are not counted; a deleted conversation frees its place.
    await h.client('kim').deleteConversation({ conversationId: first });
    await h.client('kim', b).createConversation({ cwd: '/tmp' });
    await refused(h.client('kim').createConversation({ cwd: '/tmp' }), 'max_conversations');
  });
});

describe('a turn crossing its budget', () => {
  it('stops once its tools are answered, before the next LLM request, in error budget_exhausted', async () => {
    now = new Date('2026-08-03T09:00:00Z');
    await admin().setUserLimits({ userId: 'jay', dailyBudgetMicros: 50_000n });
    const id = await h.createConversation('jay');
    await h.client('jay').sendMessage({ conversationId: id, text: 'go' });
    const job = await h.llmJob(id);
    // 20,000 input tokens: 60,000 µ$, past the budget with two tools still to run.
    await h.respond(job, {
      stopReason: StopReason.TOOL_USE,
      usage: usage(20_000, 0),
      content: [toolUse('t1', 'bash', { command: 'ls' }), toolUse('t2', 'bash', { command: 'pwd' })],
    });
    await h.complete(await h.toolJob(id, 't1'), { content: 'a.txt' });
    await h.complete(await h.toolJob(id, 't2'), { content: '/tmp' }, 'last result');
    await h.processed('last result');
    const { conversation, messages } = await h.get(id, 'jay');
    expect(conversation!.state).toMatchObject({ kind: StateKind.ERROR, errorKind: ErrorKind.BUDGET_EXHAUSTED });
    expect(h.llmJobsOf(id)).toHaveLength(1);
    const results = messages.flatMap((m) => m.content.flatMap((c) => (c.block.case === 'toolResult' ? [c.block.value.toolUseId] : [])));
    expect(results).toEqual(['t1', 't2']);
    expect(messages.at(-1)!.type).toBe(MessageType.ERROR);
    // The next message is refused up front, with the day's reset; the next day the conversation goes on.
    expect(await refused(h.client('jay').sendMessage({ conversationId: id, text: 'more' }), 'daily_budget')).toEqual(
      new Date('2026-08-04T00:00:00Z'),
    );
    now = new Date('2026-08-04T00:00:00Z');
    await h.client('jay').sendMessage({ conversationId: id, text: 'more' });
    await h.llmJob(id, 1);
  });
});

describe('a budget set in the middle of a turn', () => {
  it('holds from the turn’s next LLM request, though its owner had none when it started', async () => {
    // No default budget: an owner's requests are written with "has no budget" checked in the
    // write, not read first (apply/applier.ts, budgetCheckedOnWrite). The check must see a
    // budget set since, on either replica.
    now = new Date('2026-08-10T09:00:00Z');
    const id = await h.createConversation('noor');
    await spend('noor', id, 1_000);
    await h.client('noor').sendMessage({ conversationId: id, text: 'again' });
    const job = await h.llmJob(id, 1);
    await h.respond(job, { stopReason: StopReason.TOOL_USE, usage: usage(1_000, 0), content: [toolUse('k1', 'bash', { command: 'ls' })] });
    // 6,000 µ$ spent so far; a budget of 5,000 µ$ is already used up.
    await admin().setUserLimits({ userId: 'noor', dailyBudgetMicros: 5_000n });
    await h.complete(await h.toolJob(id, 'k1'), { content: 'a.txt' }, 'noor result');
    await h.processed('noor result');
    const { conversation } = await h.get(id, 'noor');
    expect(conversation!.state).toMatchObject({ kind: StateKind.ERROR, errorKind: ErrorKind.BUDGET_EXHAUSTED });
    expect(h.llmJobsOf(id)).toHaveLength(2);
    // Back without a budget: the next day's requests go out again.
    await admin().setUserLimits({ userId: 'noor', dailyBudgetMicros: 0n });
    now = new Date('2026-08-11T09:00:00Z');
    await h.client('noor', b).sendMessage({ conversationId: id, text: 'more' });
    await h.llmJob(id, 2);
  });
});
