/**
 * Budgets under concurrency (docs/conversation.md, "Limits": reservations) against Postgres and
 * Redis with two replicas and an automatic gateway that answers every LLM request after a moment
 * at a known price: parallel sends, forks, continuations, mid-turn requests and sub-agents against
 * a tiny budget spend at most the budget plus one request's cost. Also: TriggerContinuation meets
 * the limits a message meets, and a reservation a crash left behind counts only until it expires.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createClient, type Interceptor } from '@connectrpc/connect';
import { createGrpcTransport } from '@connectrpc/connect-node';
import { AdminService, rejectionOf, ROLE_HEADER, StateKind, StopReason, USER_HEADER } from '@bedrock/contracts';
import { serviceTokenInterceptor } from '@bedrock/platform/server';
import type { ConversationServiceInstance } from '../src/create-conversation-service.ts';
import { text, toolUse, usage } from './support/blocks.ts';
import { Code, rpcError, startHarness, type Harness } from './support/harness.ts';

let h: Harness;
let b: ConversationServiceInstance;
let now = new Date('2026-09-01T10:00:00Z');
/** Input tokens of each answer: at test-model's 3 µ$ a token, 500 tokens cost 1,500 µ$. */
let answerTokens = 500;
const REQUEST_COST = 1_500;
const BUDGET = 3_000; // $0.003

beforeAll(async () => {
  h = await startHarness({
    label: 'budgetrace',
    clock: () => now,
    workerConcurrency: 32,
    poolSize: 8,
    config: {
      models: {
        registry: JSON.stringify({ 'test-model': { contextWindow: 200_000, maxOutputTokens: 64_000, prices: { input: 3, output: 15 } } }),
      },
    },
  });
  b = await h.startReplica();
  // The gateway: every request answered 100 ms later (so requests overlap), at answerTokens.
  h.onLlmJob = async (job) => {
    const tokens = answerTokens;
    setTimeout(() => {
      void h.respond(job, { stopReason: StopReason.END_TURN, usage: usage(tokens, 0), content: [text('ok')] }).catch(() => undefined);
    }, 100);
  };
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
const admin = () =>
  createClient(
    AdminService,
    createGrpcTransport({
      baseUrl: h.service.grpcUrl,
      interceptors: [serviceTokenInterceptor(h.services.tokens['web-bff']!), headers({ [USER_HEADER]: 'root', [ROLE_HEADER]: 'admin' })],
    }),
  );

/** Either replica, alternately. */
const client = (user: string, i: number) => (i % 2 === 0 ? h.client(user) : h.client(user, b));

async function spent(user: string): Promise<number> {
  const { rows } = await h.pool.query<{ s: string }>(
    'SELECT COALESCE(sum(cost_micros), 0)::text AS s FROM user_daily_spend WHERE user_id = $1',
    [user],
  );
  return Number(rows[0]!.s);
}

/** Waits until none of the user's conversations is busy and no reservation is left. */
async function settled(user: string, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const { rows } = await h.pool.query<{ busy: number; held: number }>(
      `SELECT (SELECT count(*) FROM conversations WHERE owner_id = $1 AND state_kind NOT IN ('idle', 'error', 'context_exhausted', 'completed', 'failed'))::int AS busy,
              (SELECT count(*) FROM budget_reservations WHERE user_id = $1)::int AS held`,
      [user],
    );
    if (rows[0]!.busy === 0 && rows[0]!.held === 0) return;
    if (Date.now() > deadline) throw new Error(`${user}: ${rows[0]!.busy} conversations still busy, ${rows[0]!.held} reservations held`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Every refusal must be the budget's (RESOURCE_EXHAUSTED limit_reached); answers how many calls went through. */
function accepted(outcomes: PromiseSettledResult<unknown>[]): number {
  for (const o of outcomes) {
    if (o.status === 'rejected') {
      expect(o.reason).toMatchObject({ code: Code.ResourceExhausted });
      expect(rejectionOf(o.reason)).toMatchObject({ code: 'limit_reached', limit: 'daily_budget' });
    }
  }
  return outcomes.filter((o) => o.status === 'fulfilled').length;
}

describe('a tiny budget under concurrency', () => {
  it('20 parallel sends through two replicas spend at most the budget and one request', async () => {
    answerTokens = 500;
    await admin().setUserLimits({ userId: 'par', dailyBudgetMicros: BigInt(BUDGET) });
    const ids = await Promise.all(Array.from({ length: 20 }, () => h.createConversation('par')));
    const outcomes = await Promise.allSettled(ids.map((id, i) => client('par', i).sendMessage({ conversationId: id, text: 'go' })));
    const through = accepted(outcomes);
    await settled('par');
    const total = await spent('par');
    const requests = ids.reduce((n, id) => n + h.llmJobsOf(id).length, 0);
    console.log(`20 parallel sends, budget ${BUDGET} µ$: ${through} accepted, ${requests} LLM requests, spent ${total} µ$`);
    expect(total).toBeLessThanOrEqual(BUDGET + REQUEST_COST);
    expect(requests).toBeLessThanOrEqual(Math.ceil(BUDGET / REQUEST_COST) + 1);
    // Then one at a time until it is spent; spent, the next message is refused with the day's reset.
    for (let i = 0; (await spent('par')) < BUDGET; i++) {
      await h.client('par').sendMessage({ conversationId: ids[i]!, text: 'more' });
      await settled('par');
    }
    expect(await spent('par')).toBeLessThanOrEqual(BUDGET + REQUEST_COST);
    const err = await rpcError(h.client('par').sendMessage({ conversationId: ids[0]!, text: 'more' }));
    expect(rejectionOf(err)).toMatchObject({ code: 'limit_reached', limit: 'daily_budget' });
    expect(rejectionOf(err)!.resetsAt).toBeDefined();
  });

  it('15 forks then 15 parallel sends spend at most the budget and one request', async () => {
    answerTokens = 500;
    await admin().setUserLimits({ userId: 'frk', dailyBudgetMicros: BigInt(BUDGET) });
    const source = await h.createConversation('frk');
    await h.client('frk').sendMessage({ conversationId: source, text: 'hello' });
    await settled('frk');
    expect(await spent('frk')).toBe(REQUEST_COST);
    const forks = await Promise.all(
      Array.from({ length: 15 }, async (_, i) => (await client('frk', i).forkConversation({ conversationId: source })).conversation!.id),
    );
    const outcomes = await Promise.allSettled(forks.map((id, i) => client('frk', i).sendMessage({ conversationId: id, text: 'go on' })));
    const through = accepted(outcomes);
    await settled('frk');
    const total = await spent('frk');
    const requests = forks.reduce((n, id) => n + h.llmJobsOf(id).length, 0);
    console.log(`15 forks + parallel sends, budget ${BUDGET} µ$: ${through} accepted, ${requests} LLM requests, spent ${total} µ$`);
    expect(total).toBeLessThanOrEqual(BUDGET + REQUEST_COST);
  });

  it('15 parallel continuations spend at most the budget and one request', async () => {
    // Fifteen conversations with a free exchange each; then the budget and the continuations.
    answerTokens = 0;
    const ids = await Promise.all(Array.from({ length: 15 }, () => h.createConversation('cnt')));
    await Promise.all(ids.map((id) => h.client('cnt').sendMessage({ conversationId: id, text: 'work' })));
    await settled('cnt');
    expect(await spent('cnt')).toBe(0);
    answerTokens = 500;
    await admin().setUserLimits({ userId: 'cnt', dailyBudgetMicros: BigInt(BUDGET) });
    const outcomes = await Promise.allSettled(ids.map((id, i) => client('cnt', i).triggerContinuation({ conversationId: id })));
    const through = accepted(outcomes);
    await settled('cnt');
    const total = await spent('cnt');
    const requests = ids.reduce((n, id) => n + h.llmJobsOf(id).length, 0) - ids.length;
    console.log(`15 parallel continuations, budget ${BUDGET} µ$: ${through} accepted, ${requests} LLM requests, spent ${total} µ$`);
    expect(total).toBeLessThanOrEqual(BUDGET + REQUEST_COST);
  });
});

describe('mid-turn requests (no admission: tool results arriving together)', () => {
  it('10 turns whose tools finish at once spend at most the budget and one request', async () => {
    const gateway = h.onLlmJob;
    h.onLlmJob = null;
    const ids = await Promise.all(Array.from({ length: 10 }, () => h.createConversation('mid')));
    // Each turn's first answer (free) asks for a tool.
    await Promise.all(ids.map((id) => h.client('mid').sendMessage({ conversationId: id, text: 'work' })));
    for (const id of ids) {
      await h.respond(await h.llmJob(id), {
        stopReason: StopReason.TOOL_USE,
        usage: usage(0, 0),
        content: [toolUse(`t-${id}`, 'bash', { command: 'ls' })],
      });
    }
    const tools = await Promise.all(ids.map((id) => h.toolJob(id, `t-${id}`)));
    await admin().setUserLimits({ userId: 'mid', dailyBudgetMicros: BigInt(BUDGET) });
    h.onLlmJob = gateway;
    answerTokens = 500;
    await Promise.all(tools.map((job) => h.complete(job, { content: 'a.txt' })));
    await settled('mid');
    const total = await spent('mid');
    const requests = ids.reduce((n, id) => n + h.llmJobsOf(id).length, 0) - ids.length;
    const stopped = (await Promise.all(ids.map((id) => h.stateOf(id, 'mid')))).filter((k) => k === StateKind.ERROR).length;
    console.log(
      `10 tool results at once, budget ${BUDGET} µ$: ${requests} next requests, ${stopped} stopped for the budget, spent ${total} µ$`,
    );
    expect(total).toBeLessThanOrEqual(BUDGET + REQUEST_COST);
    expect(stopped).toBeGreaterThanOrEqual(ids.length - 3);
  });
});

describe('sub-agents', () => {
  it('8 sub-agents started by one spawn_agents spend at most the budget and one request', async () => {
    const gateway = h.onLlmJob;
    h.onLlmJob = null;
    const id = await h.createConversation('sub');
    await h.client('sub').sendMessage({ conversationId: id, text: 'split the work' });
    const job = await h.llmJob(id);
    await admin().setUserLimits({ userId: 'sub', dailyBudgetMicros: BigInt(BUDGET) });
    h.onLlmJob = gateway;
    answerTokens = 500;
    // The parent's answer (free) starts eight sub-agents at once.
    await h.respond(job, {
      stopReason: StopReason.TOOL_USE,
      usage: usage(0, 0),
      content: [toolUse('sp', 'spawn_agents', { tasks: Array.from({ length: 8 }, (_, i) => ({ task: `part ${i}` })) })],
    });
    await settled('sub');
    const children = Array.from({ length: 8 }, (_, i) => `${id}--sp--${i}`);
    const requests = children.reduce((n, c) => n + h.llmJobsOf(c).length, 0);
    const total = await spent('sub');
    console.log(`8 sub-agents at once, budget ${BUDGET} µ$: ${requests} sub-agent LLM requests, spent ${total} µ$`);
    expect(total).toBeLessThanOrEqual(BUDGET + REQUEST_COST);
  });
});

describe('TriggerContinuation meets the limits a message meets', () => {
  it('counts toward messages per minute and busy conversations', async () => {
    answerTokens = 0;
    now = new Date('2026-09-02T08:00:10Z');
    const ids = await Promise.all([1, 2, 3].map(() => h.createConversation('tcl')));
    await Promise.all(ids.map((id) => h.client('tcl').sendMessage({ conversationId: id, text: 'work' })));
    await settled('tcl');
    await admin().setUserLimits({ userId: 'tcl', messagesPerMinute: 2, maxBusyConversations: 1 });
    // Held busy: no answer for a while.
    h.onLlmJob = async () => undefined;
    try {
      await h.client('tcl').triggerContinuation({ conversationId: ids[0]! });
      const busy = await rpcError(h.client('tcl', b).triggerContinuation({ conversationId: ids[1]! }));
      expect(rejectionOf(busy)).toMatchObject({ code: 'limit_reached', limit: 'max_busy_conversations' });
      const rate = await rpcError(h.client('tcl').triggerContinuation({ conversationId: ids[2]! }));
      expect(rejectionOf(rate)).toMatchObject({ code: 'limit_reached', limit: 'messages_per_minute' });
    } finally {
      h.onLlmJob = async (job) => {
        const tokens = answerTokens;
        setTimeout(() => {
          void h.respond(job, { stopReason: StopReason.END_TURN, usage: usage(tokens, 0), content: [text('ok')] }).catch(() => undefined);
        }, 100);
      };
    }
  });
});

describe('reservations', () => {
  it('are settled by the response, and one a crash left behind counts only until it expires', async () => {
    answerTokens = 500;
    now = new Date('2026-09-03T09:00:00Z');
    await admin().setUserLimits({ userId: 'exp', dailyBudgetMicros: 1_000_000n });
    const [id, other] = await Promise.all([h.createConversation('exp'), h.createConversation('exp')]);
    await h.client('exp').sendMessage({ conversationId: id!, text: 'go' });
    await settled('exp');
    expect((await h.client('exp').getUsage({})).usage).toMatchObject({ spentTodayMicros: BigInt(REQUEST_COST), reservedMicros: 0n });
    // A replica died holding $1 for a request of `other` whose row stayed at rest.
    await h.pool.query(
      `INSERT INTO budget_reservations (conversation_id, user_id, request_id, micros, expires_at) VALUES ($1, 'exp', 'lost', 1000000, $2)`,
      [other, new Date(now.getTime() + 60 * 60 * 1000)],
    );
    expect((await h.client('exp').getUsage({})).usage!.reservedMicros).toBe(1_000_000n);
    const held = await rpcError(h.client('exp').sendMessage({ conversationId: id!, text: 'again' }));
    expect(rejectionOf(held)).toMatchObject({ code: 'limit_reached', limit: 'daily_budget' });
    expect(rejectionOf(held)!.resetsAt).toBeUndefined();
    expect(held.rawMessage).toMatch(/held for your LLM requests in flight/);
    // An hour later the hold has expired and counts no more.
    now = new Date('2026-09-03T10:00:01Z');
    expect((await h.client('exp').getUsage({})).usage!.reservedMicros).toBe(0n);
    await h.client('exp').sendMessage({ conversationId: id!, text: 'again' });
    await h.waitState(id!, StateKind.IDLE, 'exp');
    // `other`'s next transition releases the stale row; `id`'s answer settled its own.
    const { rows } = await h.pool.query('SELECT conversation_id FROM budget_reservations WHERE user_id = $1', ['exp']);
    expect(rows.map((r) => r.conversation_id)).toEqual([other]);
  });
});
