/**
 * The audit log against the real service and Postgres: a row for every audited action — the
 * agent's upgrade request with its reason, approve, deny, downgrade, cancel, delete, user added
 * and disabled, token issued and revoked — naming the user and the client web-bff forwarded,
 * written in the action's transaction; ListAuditEvents filters and pages, and only for admins;
 * the database refuses UPDATE, DELETE and TRUNCATE of audit rows.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createClient, type Interceptor } from '@connectrpc/connect';
import { createGrpcTransport } from '@connectrpc/connect-node';
import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import { AdminService, CLIENT_HEADER, ConversationService, ROLE_HEADER, StateKind, StopReason, USER_HEADER } from '@bedrock/contracts';
import { serviceTokenInterceptor } from '@bedrock/platform/server';
import { text, toolUse } from './support/blocks.ts';
import { Code, rpcError, startHarness, type Harness } from './support/harness.ts';

let h: Harness;
beforeAll(async () => {
  h = await startHarness({ label: 'audit' });
});
afterAll(async () => {
  await h?.close();
});

/** As web-bff calls: its credential, the user, their role and the client it saw. */
const headers =
  (values: Record<string, string>): Interceptor =>
  (next) =>
  (req) => {
    for (const [k, v] of Object.entries(values)) req.header.set(k, v);
    return next(req);
  };
const transport = (values: Record<string, string>) =>
  createGrpcTransport({
    baseUrl: h.service.grpcUrl,
    interceptors: [serviceTokenInterceptor(h.services.tokens['web-bff']!), headers(values)],
  });
const conversations = (user: string, client: string) =>
  createClient(ConversationService, transport({ [USER_HEADER]: user, [CLIENT_HEADER]: client }));
const admin = (user = 'root', client = 'cli', role = 'admin') =>
  createClient(AdminService, transport({ [USER_HEADER]: user, [ROLE_HEADER]: role, [CLIENT_HEADER]: client }));

interface Row {
  user_id: string;
  action: string;
  conversation_id: string | null;
  details: Record<string, unknown>;
}
const rowsOf = async (conversationId: string): Promise<Row[]> =>
  (
    await h.pool.query<Row>('SELECT user_id, action, conversation_id, details FROM audit_events WHERE conversation_id = $1 ORDER BY id', [
      conversationId,
    ])
  ).rows;

/** A conversation of `user` whose agent asks for write access (u1, with `reason`). */
async function asking(user: string, reason: string): Promise<string> {
  const id = await h.createConversation(user);
  await h.client(user).sendMessage({ conversationId: id, text: 'fix the bug' });
  const job = await h.llmJob(id);
  await h.respond(job, {
    stopReason: StopReason.TOOL_USE,
    content: [text('I need to write.'), toolUse('u1', 'request_mode_upgrade', { reason })],
  });
  await h.waitState(id, StateKind.AWAITING_MODE_APPROVAL, user);
  return id;
}

describe('audit rows', () => {
  it('records the agent asking for write access, the approval and the downgrade, with the user and the client', async () => {
    const id = await asking('ann', 'edit src/a.ts');
    await conversations('ann', 'web').respondToModeUpgrade({ conversationId: id, approve: true });
    await h.waitFor('the turn goes on', async () => (await h.stateOf(id, 'ann')) !== StateKind.AWAITING_MODE_APPROVAL);
    await conversations('ann', 'cli').downgradeMode({ conversationId: id });
    expect(await rowsOf(id)).toEqual([
      {
        user_id: 'ann',
        action: 'mode_upgrade_requested',
        conversation_id: id,
        details: { by: 'agent', reason: 'edit src/a.ts', tool_use_id: 'u1' },
      },
      {
        user_id: 'ann',
        action: 'mode_upgrade_approved',
        conversation_id: id,
        details: { client: 'web', reason: 'edit src/a.ts', tool_use_id: 'u1' },
      },
      {
        user_id: 'ann',
        action: 'mode_downgraded',
        conversation_id: id,
        details: { client: 'cli', from: 'unrestricted', to: 'restricted' },
      },
    ]);
    // A refused downgrade (Restricted already) changes nothing and records nothing.
    expect((await rpcError(conversations('ann', 'cli').downgradeMode({ conversationId: id }))).code).toBe(Code.FailedPrecondition);
    expect(await rowsOf(id)).toHaveLength(3);
  });

  it('records a denial (with a request id, stored in the same commit) and a cancel, then a deletion that outlives the conversation', async () => {
    const id = await asking('ben', 'install deps');
    const deny = { conversationId: id, approve: false, requestId: 'deny-1' };
    await conversations('ben', 'acp').respondToModeUpgrade(deny);
    // A retry is answered from the first outcome: no second row.
    await conversations('ben', 'acp').respondToModeUpgrade(deny);
    const job = await h.llmJob(id, 1);
    expect(job.requestId).toBeTruthy();
    await conversations('ben', 'cli').cancel({ conversationId: id });
    await h.waitState(id, StateKind.IDLE, 'ben');
    // Cancelling a conversation at rest is refused: no row.
    expect((await rpcError(conversations('ben', 'cli').cancel({ conversationId: id }))).code).toBe(Code.FailedPrecondition);
    await conversations('ben', 'cli').deleteConversation({ conversationId: id });
    const rows = await rowsOf(id);
    expect(rows.map((r) => [r.user_id, r.action, r.details.client])).toEqual([
      ['ben', 'mode_upgrade_requested', undefined],
      ['ben', 'mode_upgrade_denied', 'acp'],
      ['ben', 'conversation_cancelled', 'cli'],
      ['ben', 'conversation_deleted', 'cli'],
    ]);
    expect(rows[1]!.details).toMatchObject({ reason: 'install deps' });
    expect(rows[2]!.details).toEqual({ client: 'cli', phase: 'llm_requesting' });
    expect(rows[3]!.details).toEqual({ client: 'cli', sub_agent_ids: [] });
  });

  it('records user and token changes by the admin who made them, and nothing for a refused one', async () => {
    const since = new Date(Date.now() - 1000);
    await admin('root', 'cli').addUser({ userId: 'cora', displayName: 'Cora' });
    expect((await rpcError(admin().addUser({ userId: 'cora' }))).code).toBe(Code.AlreadyExists);
    const issued = await admin('root', 'web').issueToken({ userId: 'cora', label: 'laptop', expiresInSeconds: 3600n });
    await admin('root', 'cli').revokeToken({ tokenId: issued.token!.id });
    await admin('root', 'cli').disableUser({ userId: 'cora' });
    await admin('root', 'cli').disableUser({ userId: 'cora' });
    expect((await rpcError(admin().disableUser({ userId: 'nobody' }))).code).toBe(Code.NotFound);

    const { events } = await admin().listAuditEvents({ since: timestampFromDate(since), userId: 'root' });
    const mine = events.filter((e) => JSON.stringify(e.details).includes('cora')).reverse();
    expect(mine.map((e) => [e.userId, e.action, e.conversationId, e.details!.client])).toEqual([
      ['root', 'user_added', '', 'cli'],
      ['root', 'token_issued', '', 'web'],
      ['root', 'token_revoked', '', 'cli'],
      ['root', 'user_disabled', '', 'cli'],
      ['root', 'user_disabled', '', 'cli'],
    ]);
    expect(mine[0]!.details).toEqual({ client: 'cli', user_id: 'cora', role: 'user', display_name: 'Cora' });
    expect(mine[1]!.details).toMatchObject({ user_id: 'cora', label: 'laptop', token_id: issued.token!.id });
    expect(mine[1]!.details!.expires_at).toEqual(expect.any(String));
    expect(JSON.stringify(mine.map((e) => e.details))).not.toContain(issued.secret);
    expect(mine[2]!.details).toEqual({ client: 'cli', token_id: issued.token!.id, user_id: 'cora', already_revoked: false });
    expect([mine[3]!.details!.already_disabled, mine[4]!.details!.already_disabled]).toEqual([false, true]);
  });

  it('records a first sign-in that creates a user', async () => {
    const { IdentityService } = await import('@bedrock/contracts');
    const identity = createClient(IdentityService, transport({}));
    await identity.resolveUser({ userId: 'dora@example.com', create: true, displayName: 'Dora' });
    await identity.resolveUser({ userId: 'dora@example.com', create: true, displayName: 'Dora' });
    const { events } = await admin().listAuditEvents({ userId: 'dora@example.com' });
    expect(events.map((e) => [e.action, e.details])).toEqual([
      ['user_added', { user_id: 'dora@example.com', role: 'user', display_name: 'Dora', by: 'first_sign_in' }],
    ]);
  });
});

describe('ListAuditEvents', () => {
  it('filters by action and time and pages newest first', async () => {
    for (const u of ['p1', 'p2', 'p3', 'p4', 'p5']) await admin('pager').addUser({ userId: u });
    const all = await admin().listAuditEvents({ userId: 'pager' });
    expect(all.events.map((e) => e.details!.user_id)).toEqual(['p5', 'p4', 'p3', 'p2', 'p1']);
    expect(all.nextPageToken).toBe('');
    const first = await admin().listAuditEvents({ userId: 'pager', pageSize: 2 });
    const second = await admin().listAuditEvents({ userId: 'pager', pageSize: 2, pageToken: first.nextPageToken });
    const third = await admin().listAuditEvents({ userId: 'pager', pageSize: 2, pageToken: second.nextPageToken });
    expect([first, second, third].map((p) => p.events.map((e) => e.details!.user_id))).toEqual([['p5', 'p4'], ['p3', 'p2'], ['p1']]);
    expect(third.nextPageToken).toBe('');

    const future = timestampFromDate(new Date(Date.now() + 60_000));
    expect((await admin().listAuditEvents({ userId: 'pager', since: future })).events).toHaveLength(0);
    expect((await admin().listAuditEvents({ userId: 'pager', until: future })).events).toHaveLength(5);
    const added = await admin().listAuditEvents({ action: 'user_added' });
    expect(added.events.every((e) => e.action === 'user_added')).toBe(true);
    expect((await admin().listAuditEvents({ action: 'token_revoked', userId: 'pager' })).events).toHaveLength(0);

    expect((await rpcError(admin().listAuditEvents({ action: 'nonsense' }))).code).toBe(Code.InvalidArgument);
    expect((await rpcError(admin().listAuditEvents({ pageToken: 'abc' }))).code).toBe(Code.InvalidArgument);
    expect((await rpcError(admin().listAuditEvents({ pageSize: 5000 }))).code).toBe(Code.InvalidArgument);
  });

  it('answers only admins', async () => {
    const denied = await rpcError(admin('bob', 'cli', 'user').listAuditEvents({}));
    expect(denied.code).toBe(Code.PermissionDenied);
    expect(denied.rawMessage).toBe('ListAuditEvents needs the admin role; user bob has the role user');
    const gateway = createClient(
      AdminService,
      createGrpcTransport({ baseUrl: h.service.grpcUrl, interceptors: [serviceTokenInterceptor(h.services.tokens['llm-gateway']!)] }),
    );
    expect((await rpcError(gateway.listAuditEvents({}))).code).toBe(Code.PermissionDenied);
  });
});

describe('the table', () => {
  it('refuses UPDATE, DELETE and TRUNCATE of audit rows', async () => {
    await admin().addUser({ userId: 'evan' });
    const before = (await h.pool.query('SELECT * FROM audit_events ORDER BY id')).rows;
    expect(before.length).toBeGreaterThan(0);
    for (const sql of [
      `UPDATE audit_events SET user_id = 'someone-else'`,
      `UPDATE audit_events SET details = '{}' WHERE action = 'user_added'`,
      'DELETE FROM audit_events',
      `DELETE FROM audit_events WHERE user_id = 'root'`,
      'TRUNCATE audit_events',
    ]) {
      await expect(h.pool.query(sql)).rejects.toThrow(/audit_events is append-only: (UPDATE|DELETE|TRUNCATE) is not allowed/);
    }
    expect((await h.pool.query('SELECT * FROM audit_events ORDER BY id')).rows).toEqual(before);
  });
});
