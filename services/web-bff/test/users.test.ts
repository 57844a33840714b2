/**
 * Users and tokens through the real web-bff and conversation service (Postgres): an admin adds
 * users and issues tokens; a revoke or a disable holds on a second web-bff replica within a
 * second (its cache keeps answers at most 1 s); an expired token stops; AdminService refuses
 * non-admins with PERMISSION_DENIED.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import pg from 'pg';
import { Code, ConnectError, createClient, type Client } from '@connectrpc/connect';
import { createConnectTransport, createGrpcTransport } from '@connectrpc/connect-node';
import { AdminService, ConversationService, UserRole } from '@bedrock/contracts';
import { createLogger, createTokenStore, serviceTokenInterceptor, tokenEntriesOf } from '@bedrock/platform/server';
import { createWebBff, type WebBff } from '../src/create-web-bff.ts';
import { testBffConfig } from './support/bff-config.ts';
import { startSystem, type System } from './support/system.ts';

let s: System;
/** A second web-bff replica on the same conversation service. */
let replica: WebBff;
let pool: pg.Pool;
beforeAll(async () => {
  s = await startSystem({ label: 'users', playWorkers: false, bff: { auth: { admins: ['alice'] } } });
  replica = createWebBff(testBffConfig({ auth: { admins: ['alice'] }, upstream: { conversationUrls: [s.conversation.grpcUrl] } }), {
    logger: createLogger({ service: 'web-bff-2', level: 'silent' }),
    tokens: createTokenStore(tokenEntriesOf(s.tokens)),
    serviceToken: s.serviceToken,
  });
  await replica.start();
  pool = new pg.Pool({ connectionString: s.db.url, max: 1 });
});
afterAll(async () => {
  await pool?.end();
  await replica?.stop();
  await s?.close();
});

const bearer = (token: string | undefined) => (token === undefined ? [] : [serviceTokenInterceptor(token)]);
/** A client of replica 1 (`s.bff`) or 2, over gRPC (h2c). */
const conversations = (token: string | undefined, bff: 1 | 2 = 1): Client<typeof ConversationService> =>
  createClient(ConversationService, createGrpcTransport({ baseUrl: (bff === 1 ? s.bff : replica).grpcUrl, interceptors: bearer(token) }));
/** AdminService over Connect on HTTP/1.1, as the CLI calls it. */
const admin = (token: string | undefined, bff: 1 | 2 = 1): Client<typeof AdminService> =>
  createClient(
    AdminService,
    createConnectTransport({ baseUrl: (bff === 1 ? s.bff : replica).httpUrl, httpVersion: '1.1', interceptors: bearer(token) }),
  );

async function outcome(p: Promise<unknown>): Promise<{ code: Code | 'ok'; message?: string }> {
  try {
    await p;
    return { code: 'ok' };
  } catch (err) {
    const e = ConnectError.from(err);
    return { code: e.code, message: e.rawMessage };
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, Math.max(0, ms)));

/**
 * Polls replica 2 with `token` every 10 ms from now: when it is first refused (ms from now, and
 * the message), and that a call started a full second after now is refused (the bound).
 */
async function refusedWithinASecond(token: string): Promise<{ firstMs: number; message?: string }> {
  const t0 = performance.now();
  let first: { firstMs: number; message?: string } | undefined;
  while (!first && performance.now() - t0 < 1000) {
    const startedMs = performance.now() - t0;
    const o = await outcome(conversations(token, 2).listConversations({}));
    if (o.code === Code.Unauthenticated) first = { firstMs: startedMs, ...(o.message ? { message: o.message } : {}) };
    else if (o.code !== 'ok') throw new Error(`unexpected ${Code[o.code]}: ${o.message}`);
    else await sleep(Math.min(10, t0 + 1000 - performance.now()));
  }
  // A second after the change returned (and so after it committed), the other replica refuses.
  await sleep(t0 + 1000 - performance.now());
  const after = await outcome(conversations(token, 2).listConversations({}));
  expect(after.code).toBe(Code.Unauthenticated);
  return first ?? { firstMs: 1000, ...(after.message ? { message: after.message } : {}) };
}

describe('users and tokens across two web-bff replicas', () => {
  it('an admin adds a user and issues a token that works on both replicas at once', async () => {
    const added = await admin(s.tokens.alice).addUser({ userId: 'carol', displayName: 'Carol' });
    expect(added.user).toMatchObject({ id: 'carol', role: UserRole.USER });
    const issued = await admin(s.tokens.alice).issueToken({ userId: 'carol', label: 'laptop' });
    expect(issued.secret).toMatch(/^bdr_/);
    // Issued on replica 1, used on replica 2 straight away.
    const created = await conversations(issued.secret, 2).createConversation({ cwd: '/tmp' });
    const listed = await conversations(issued.secret, 1).listConversations({});
    expect(listed.conversations.map((c) => c.id)).toEqual([created.conversation!.id]);
    const { rows } = await pool.query<{ owner_id: string }>('SELECT owner_id FROM conversations WHERE id = $1', [created.conversation!.id]);
    expect(rows[0]!.owner_id).toBe('carol');
    const tokens = await admin(s.tokens.alice, 2).listTokens({ userId: 'carol' });
    expect(tokens.tokens.map((t) => [t.id, t.label])).toEqual([[issued.token!.id, 'laptop']]);
  });

  it('a revoke on replica 1 holds on replica 2 within a second', async () => {
    await admin(s.tokens.alice).addUser({ userId: 'dave' });
    const issued = await admin(s.tokens.alice).issueToken({ userId: 'dave' });
    // Replica 2 has the token in its cache.
    expect((await outcome(conversations(issued.secret, 2).listConversations({}))).code).toBe('ok');
    await admin(s.tokens.alice).revokeToken({ tokenId: issued.token!.id });
    const refused = await refusedWithinASecond(issued.secret);
    console.log(`revoked token first refused on the other replica by a call started ${refused.firstMs.toFixed(0)} ms after the revoke`);
    expect(refused.message).toBe('bearer token revoked');
    expect((await outcome(conversations(issued.secret, 1).listConversations({}))).message).toBe('bearer token revoked');
  });

  it('disabling a user holds on replica 2 within a second, for every token issued to them', async () => {
    await admin(s.tokens.alice).addUser({ userId: 'erin' });
    const one = await admin(s.tokens.alice).issueToken({ userId: 'erin', label: 'one' });
    const two = await admin(s.tokens.alice).issueToken({ userId: 'erin', label: 'two' });
    for (const t of [one.secret, two.secret]) expect((await outcome(conversations(t, 2).listConversations({}))).code).toBe('ok');
    await admin(s.tokens.alice, 1).disableUser({ userId: 'erin' });
    const [a, b] = await Promise.all([refusedWithinASecond(one.secret), refusedWithinASecond(two.secret)]);
    console.log(
      `a disabled user's tokens first refused on the other replica ${a.firstMs.toFixed(0)} and ${b.firstMs.toFixed(0)} ms after the disable`,
    );
    expect(a).toMatchObject({ message: 'user erin is disabled' });
    expect(b).toMatchObject({ message: 'user erin is disabled' });
    expect((await outcome(admin(s.tokens.alice).issueToken({ userId: 'erin' }))).code).toBe(Code.FailedPrecondition);
  });

  it('a token stops at its expiry', async () => {
    await admin(s.tokens.alice).addUser({ userId: 'frank' });
    const issued = await admin(s.tokens.alice).issueToken({ userId: 'frank', expiresInSeconds: 1n });
    expect((await outcome(conversations(issued.secret, 2).listConversations({}))).code).toBe('ok');
    // Expires a second after issue: refused a second after that at the latest.
    await sleep(1000);
    const refused = await refusedWithinASecond(issued.secret);
    expect(refused.message).toBe('bearer token expired');
  });

  it('refuses AdminService to anyone but an admin, with a message', async () => {
    // carol has an issued token (role user); bob a tokens-file token (not in BEDROCK_ADMIN_USERS).
    expect(await outcome(admin(s.tokens.bob, 2).listUsers({}))).toEqual({
      code: Code.PermissionDenied,
      message: 'ListUsers needs the admin role; user bob has the role user',
    });
    const carol = await admin(s.tokens.alice).issueToken({ userId: 'carol' });
    for (const bff of [1, 2] as const) {
      const denied = await outcome(admin(carol.secret, bff).addUser({ userId: 'mallory', role: UserRole.ADMIN }));
      expect(denied).toEqual({ code: Code.PermissionDenied, message: 'AddUser needs the admin role; user carol has the role user' });
      for (const call of [
        admin(carol.secret, bff).listUsers({}),
        admin(carol.secret, bff).disableUser({ userId: 'alice' }),
        admin(carol.secret, bff).issueToken({ userId: 'carol' }),
        admin(carol.secret, bff).listTokens({}),
        admin(carol.secret, bff).revokeToken({ tokenId: carol.token!.id }),
      ])
        expect((await outcome(call)).code).toBe(Code.PermissionDenied);
      expect((await outcome(admin(undefined, bff).listUsers({}))).code).toBe(Code.Unauthenticated);
      expect((await outcome(admin('bdr_not-a-token', bff).listUsers({}))).code).toBe(Code.Unauthenticated);
    }
    const { rows } = await pool.query("SELECT 1 FROM users WHERE id = 'mallory'");
    expect(rows).toHaveLength(0);
    // An admin made through AdminService can administer, with a token issued to them.
    await admin(s.tokens.alice).addUser({ userId: 'grace', role: UserRole.ADMIN });
    const grace = await admin(s.tokens.alice).issueToken({ userId: 'grace' });
    const users = await admin(grace.secret, 2).listUsers({});
    expect(users.users.map((u) => u.id)).toEqual(expect.arrayContaining(['carol', 'dave', 'erin', 'frank', 'grace']));
    expect(users.users.find((u) => u.id === 'grace')?.role).toBe(UserRole.ADMIN);
  });
});
