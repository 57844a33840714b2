/**
 * DeleteUser through the real web-bff (two replicas) and conversation service, against real
 * Postgres and Redis: refused while a conversation is busy, then nothing of the user's left in any
 * table or Redis key, their token refused on the other replica within a second, the audit log kept
 * plus `user_deleted`. Refused for oneself and for non-admins; a tokens-file user's data goes but
 * their file token still works (and the answer says so).
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import pg from 'pg';
import { Redis } from 'ioredis';
import { Code, ConnectError, createClient, type Client } from '@connectrpc/connect';
import { createConnectTransport, createGrpcTransport } from '@connectrpc/connect-node';
import { AdminService, ConversationService, StopReason, rejectionOf } from '@bedrock/contracts';
import { createLogger, createTokenStore, serviceTokenInterceptor, tokenEntriesOf } from '@bedrock/platform/server';
import { createWebBff, type WebBff } from '../src/create-web-bff.ts';
import { testBffConfig } from './support/bff-config.ts';
import { startSystem, type System } from './support/system.ts';

let s: System;
let replica: WebBff;
let pool: pg.Pool;
let redis: Redis;
beforeAll(async () => {
  s = await startSystem({ label: 'delete_user', bff: { auth: { admins: ['alice'] } } });
  replica = createWebBff(testBffConfig({ auth: { admins: ['alice'] }, upstream: { conversationUrls: [s.conversation.grpcUrl] } }), {
    logger: createLogger({ service: 'web-bff-2', level: 'silent' }),
    tokens: createTokenStore(tokenEntriesOf(s.tokens)),
    serviceToken: s.serviceToken,
  });
  await replica.start();
  pool = new pg.Pool({ connectionString: s.db.url, max: 1 });
  redis = new Redis('redis://127.0.0.1:6379');
});
afterAll(async () => {
  await redis?.quit();
  await pool?.end();
  await replica?.stop();
  await s?.close();
});

const bearer = (token: string) => [serviceTokenInterceptor(token)];
const conversations = (token: string, bff: 1 | 2 = 1): Client<typeof ConversationService> =>
  createClient(ConversationService, createGrpcTransport({ baseUrl: (bff === 1 ? s.bff : replica).grpcUrl, interceptors: bearer(token) }));
const admin = (token: string): Client<typeof AdminService> =>
  createClient(AdminService, createConnectTransport({ baseUrl: s.bff.httpUrl, httpVersion: '1.1', interceptors: bearer(token) }));

async function failure(p: Promise<unknown>): Promise<ConnectError> {
  try {
    await p;
  } catch (err) {
    return ConnectError.from(err);
  }
  throw new Error('expected the call to fail');
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, Math.max(0, ms)));

/** Rows naming the user or one of `ids`, per table (the audit log aside). */
async function rowsOf(user: string, ids: string[]): Promise<Record<string, number>> {
  const count = async (sql: string, params: unknown[]) => Number((await pool.query<{ n: string }>(sql, params)).rows[0]!.n);
  return {
    users: await count('SELECT count(*) AS n FROM users WHERE id = $1', [user]),
    user_tokens: await count('SELECT count(*) AS n FROM user_tokens WHERE user_id = $1', [user]),
    conversations: await count('SELECT count(*) AS n FROM conversations WHERE owner_id = $1 OR id = ANY($2::text[])', [user, ids]),
    messages: await count('SELECT count(*) AS n FROM messages WHERE conversation_id = ANY($1::text[])', [ids]),
    outbox: await count('SELECT count(*) AS n FROM outbox WHERE conversation_id = ANY($1::text[])', [ids]),
    request_outcomes: await count('SELECT count(*) AS n FROM request_outcomes WHERE owner_id = $1 OR scope = ANY($2::text[])', [user, ids]),
    user_daily_spend: await count('SELECT count(*) AS n FROM user_daily_spend WHERE user_id = $1', [user]),
    user_limits: await count('SELECT count(*) AS n FROM user_limits WHERE user_id = $1', [user]),
    user_message_rate: await count('SELECT count(*) AS n FROM user_message_rate WHERE user_id = $1', [user]),
  };
}

/** Keys under the test's prefix naming one of `ids`, except the queues' job records (docs/conversation.md, "Deletion and retention"). */
async function keysOf(ids: string[]): Promise<string[]> {
  const found: string[] = [];
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `${s.prefix}*`, 'COUNT', 1000);
    found.push(...keys.filter((k) => ids.some((id) => k.includes(id)) && !k.startsWith(`${s.prefix}:q:`)));
    cursor = next;
  } while (cursor !== '0');
  return found;
}

/** Answers the conversation's next LLM request. */
async function respond(id: string, value: { stopReason?: StopReason; content: unknown[] }) {
  const job = await s.waitFor(`the LLM request of ${id}`, () =>
    s.llmJobs.find((j) => j.conversationId === id && !answered.has(j.requestId)),
  );
  answered.add(job.requestId);
  await s.send(id, `r/${job.requestId}`, {
    case: 'llmResponse',
    value: { requestId: job.requestId, stopReason: value.stopReason ?? StopReason.END_TURN, ...(value as object) } as never,
  });
}
const answered = new Set<string>();
const textBlock = (text: string) => ({ block: { case: 'text', value: { text } } });

async function atRest(ids: string[]) {
  for (const id of ids)
    await s.waitFor(
      `${id} at rest`,
      async () =>
        (await pool.query(`SELECT 1 FROM conversations WHERE id = $1 AND state_kind IN ('idle', 'failed', 'completed', 'error')`, [id]))
          .rows.length === 1,
    );
}

describe('DeleteUser', () => {
  it('deletes a user with two conversations (one with a sub-agent) and a token: refused while busy, then nothing of theirs is left', async () => {
    await admin(s.tokens.alice!).addUser({ userId: 'gina' });
    const { secret, token } = await admin(s.tokens.alice!).issueToken({ userId: 'gina', label: 'laptop' });
    const gina = conversations(secret);

    // One conversation with a finished turn (messages, outbox rows, request outcomes).
    const a = (await gina.createConversation({ cwd: '/tmp', requestId: 'create-a' })).conversation!.id;
    await gina.sendMessage({ conversationId: a, text: 'hello', requestId: 'send-a' });
    await respond(a, { content: [textBlock('Hi.')] });
    // Another whose agent spawns a sub-agent, left working.
    const b = (await gina.createConversation({ cwd: '/tmp', requestId: 'create-b' })).conversation!.id;
    await gina.sendMessage({ conversationId: b, text: 'split the work', requestId: 'send-b' });
    await respond(b, {
      stopReason: StopReason.TOOL_USE,
      content: [
        {
          block: { case: 'toolUse', value: { id: 'sp', name: 'spawn_agents', inputJson: JSON.stringify({ tasks: [{ task: 'count' }] }) } },
        },
      ],
    });
    const child = `${b}--sp--0`;
    await s.waitFor(
      'the sub-agent',
      async () => (await pool.query('SELECT 1 FROM conversations WHERE id = $1', [child])).rows.length === 1,
    );
    await atRest([a]);
    const ids = [a, b, child];
    const before = await rowsOf('gina', ids);
    expect(before).toMatchObject({ users: 1, user_tokens: 1, conversations: 3 });
    expect(before.messages).toBeGreaterThan(3);
    expect(before.request_outcomes).toBeGreaterThan(0);

    // Busy: refused, naming the conversation, and nothing is deleted.
    const busy = await failure(admin(s.tokens.alice!).deleteUser({ userId: 'gina' }));
    expect(busy.code).toBe(Code.FailedPrecondition);
    expect(rejectionOf(busy)?.code).toBe('conversation_busy');
    expect(busy.rawMessage).toContain(`conversation ${b} of user gina`);
    expect(busy.rawMessage).toContain('cancel it first');
    expect(await rowsOf('gina', ids)).toEqual(before);
    expect((await gina.listConversations({})).conversations).toHaveLength(2);

    await gina.cancel({ conversationId: b, requestId: 'cancel-b' });
    await atRest([b, child]);
    expect((await keysOf(ids)).length).toBeGreaterThan(0);
    // Replica 2 has gina's token in its cache.
    await conversations(secret, 2).listConversations({});
    const auditBefore = await pool.query<{ id: string }>(
      `SELECT id FROM audit_events WHERE user_id = 'gina' OR details->>'user_id' = 'gina'`,
    );
    expect(auditBefore.rows.length).toBeGreaterThanOrEqual(3); // added, token issued, cancelled

    const t0 = performance.now();
    const res = await admin(s.tokens.alice!).deleteUser({ userId: 'gina', requestId: 'del-gina' });
    const committedBy = performance.now();
    expect(res.user).toMatchObject({ id: 'gina' });
    expect(res.deletedTokens).toBe(1);
    expect(res.tokensFileEntryRemains).toBe(false);
    expect([...res.deletedConversationIds].sort()).toEqual([...ids].sort());

    // The token stops on the other replica within a second of the answer (which came after the commit).
    let firstRefusedMs: number | undefined;
    while (firstRefusedMs === undefined && performance.now() - committedBy < 1000) {
      const started = performance.now() - t0;
      const err = await conversations(secret, 2)
        .listConversations({})
        .then(
          () => undefined,
          (e: unknown) => ConnectError.from(e),
        );
      if (err) {
        expect(err.code).toBe(Code.Unauthenticated);
        firstRefusedMs = started;
      } else await sleep(10);
    }
    await sleep(committedBy + 1000 - performance.now());
    expect((await failure(conversations(secret, 2).listConversations({}))).code).toBe(Code.Unauthenticated);
    expect((await failure(conversations(secret, 1).listConversations({}))).code).toBe(Code.Unauthenticated);
    console.log(
      `a deleted user's token first refused on the other replica by a call started ${firstRefusedMs?.toFixed(0)} ms after DeleteUser was sent`,
    );

    expect(await rowsOf('gina', ids)).toEqual({
      users: 0,
      user_tokens: 0,
      conversations: 0,
      messages: 0,
      outbox: 0,
      request_outcomes: 0,
      user_daily_spend: 0,
      user_limits: 0,
      user_message_rate: 0,
    });
    expect(await keysOf(ids)).toEqual([]);

    // The audit log keeps every row, and gains user_deleted (and a conversation_deleted per conversation).
    const after = await pool.query<{ id: string }>(`SELECT id FROM audit_events WHERE id = ANY($1::bigint[])`, [
      auditBefore.rows.map((r) => r.id),
    ]);
    expect(after.rows).toHaveLength(auditBefore.rows.length);
    const deleted = await admin(s.tokens.alice!).listAuditEvents({ action: 'user_deleted' });
    expect(deleted.events).toHaveLength(1);
    expect(deleted.events[0]).toMatchObject({ userId: 'alice', conversationId: '' });
    expect(deleted.events[0]!.details).toMatchObject({ user_id: 'gina', had_user_row: true, conversations: 2, sub_agents: 1, tokens: 1 });
    const convDeleted = await admin(s.tokens.alice!).listAuditEvents({ action: 'conversation_deleted' });
    expect(convDeleted.events.map((e) => e.conversationId).sort()).toEqual([a, b].sort());
    expect(convDeleted.events.every((e) => e.userId === 'alice' && (e.details as Record<string, unknown>).with_user === 'gina')).toBe(true);

    // A retry with the same request id answers as the first time; without one the user is gone.
    const again = await admin(s.tokens.alice!).deleteUser({ userId: 'gina', requestId: 'del-gina' });
    expect([...again.deletedConversationIds].sort()).toEqual([...ids].sort());
    expect((await failure(admin(s.tokens.alice!).deleteUser({ userId: 'gina' }))).code).toBe(Code.NotFound);
    expect((await admin(s.tokens.alice!).listTokens({ userId: 'gina' })).tokens).toEqual([]);
    expect(token!.id).toMatch(/^tok_/);
  });

  it('refuses an admin deleting themself, and anyone but an admin', async () => {
    const self = await failure(admin(s.tokens.alice!).deleteUser({ userId: 'alice' }));
    expect(self.code).toBe(Code.InvalidArgument);
    expect(self.rawMessage).toContain('cannot delete yourself');
    const other = await failure(admin(s.tokens.bob!).deleteUser({ userId: 'alice' }));
    expect(other.code).toBe(Code.PermissionDenied);
    expect(other.rawMessage).toBe('DeleteUser needs the admin role; user bob has the role user');
    expect((await failure(admin(s.tokens.alice!).deleteUser({ userId: 'nobody' }))).code).toBe(Code.NotFound);
    const rows = await pool.query(
      `SELECT 1 FROM audit_events WHERE action = 'user_deleted' AND details->>'user_id' IN ('alice', 'nobody')`,
    );
    expect(rows.rows).toHaveLength(0);
  });

  it("deletes a tokens-file user's data, and says that their file token still signs them in", async () => {
    const bob = conversations(s.tokens.bob!);
    const id = (await bob.createConversation({ cwd: '/tmp' })).conversation!.id;
    const res = await admin(s.tokens.alice!).deleteUser({ userId: 'bob' });
    expect(res.user).toBeUndefined();
    expect(res.deletedConversationIds).toEqual([id]);
    expect(res.tokensFileEntryRemains).toBe(true);
    expect(await rowsOf('bob', [id])).toMatchObject({ conversations: 0, messages: 0, request_outcomes: 0 });
    // The file vouches for bob: his token works, with nothing of his left.
    expect((await bob.listConversations({})).conversations).toEqual([]);
    expect((await admin(s.tokens.alice!).listAuditEvents({ action: 'user_deleted', userId: 'alice' })).events[0]!.details).toMatchObject({
      user_id: 'bob',
      had_user_row: false,
      conversations: 1,
    });
  });
});
