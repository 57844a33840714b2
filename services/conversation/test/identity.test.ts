/**
 * Users and tokens in the conversation service (AdminService and IdentityService), against the
 * real server and Postgres: admins add users and issue, list and revoke tokens; IdentityService
 * answers who a token is (revoked, expired, disabled) and only to web-bff; AdminService only
 * to web-bff acting for an admin.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createHash } from 'node:crypto';
import { createClient, type Interceptor } from '@connectrpc/connect';
import { createGrpcTransport } from '@connectrpc/connect-node';
import { toJsonString } from '@bufbuild/protobuf';
import {
  AdminService,
  IdentityService,
  IdentityStatus,
  ListTokensResponseSchema,
  ROLE_HEADER,
  USER_HEADER,
  UserRole,
} from '@bedrock/contracts';
import { serviceTokenInterceptor } from '@bedrock/platform/server';
import { Code, rpcError, startHarness, type Harness } from './support/harness.ts';

let h: Harness;
beforeAll(async () => {
  h = await startHarness({ label: 'identity', playWorkers: false });
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

const transport = (...interceptors: Interceptor[]) => createGrpcTransport({ baseUrl: h.service.grpcUrl, interceptors });
const asWebBff = () => serviceTokenInterceptor(h.services.tokens['web-bff']!);
const admin = () => createClient(AdminService, transport(asWebBff(), headers({ [USER_HEADER]: 'root', [ROLE_HEADER]: 'admin' })));
const identity = () => createClient(IdentityService, transport(asWebBff()));
const sha = (token: string) => createHash('sha256').update(token).digest();

describe('AdminService and IdentityService', () => {
  it('adds a user, issues a token shown once and stored hashed, and verifies it', async () => {
    const added = await admin().addUser({ userId: 'carol', displayName: 'Carol C.', role: UserRole.ADMIN });
    expect(added.user).toMatchObject({ id: 'carol', displayName: 'Carol C.', role: UserRole.ADMIN });
    expect((await rpcError(admin().addUser({ userId: 'carol' }))).code).toBe(Code.AlreadyExists);
    expect((await rpcError(admin().addUser({ userId: 'no spaces' }))).code).toBe(Code.InvalidArgument);

    const issued = await admin().issueToken({ userId: 'carol', label: 'laptop' });
    expect(issued.secret).toMatch(/^bdr_[A-Za-z0-9_-]{43}$/);
    expect(issued.token).toMatchObject({ userId: 'carol', label: 'laptop' });
    expect(issued.token!.expiresAt).toBeUndefined();
    // Only the hash is in the database.
    const { rows } = await h.pool.query<{ token_sha256: Buffer }>('SELECT token_sha256 FROM user_tokens WHERE id = $1', [issued.token!.id]);
    expect(rows[0]!.token_sha256.equals(sha(issued.secret))).toBe(true);
    const dump = JSON.stringify((await h.pool.query('SELECT * FROM user_tokens')).rows);
    expect(dump).not.toContain(issued.secret);

    const v = await identity().verifyToken({ tokenSha256: sha(issued.secret) });
    expect(v).toMatchObject({ status: IdentityStatus.OK, userId: 'carol', role: UserRole.ADMIN });
    const listed = await admin().listTokens({ userId: 'carol' });
    expect(listed.tokens.map((t) => t.id)).toEqual([issued.token!.id]);
    expect(listed.tokens[0]!.lastUsedAt).toBeDefined();
    expect(toJsonString(ListTokensResponseSchema, listed)).not.toContain(issued.secret);
    expect((await identity().verifyToken({ tokenSha256: sha('bdr_unknown') })).status).toBe(IdentityStatus.UNKNOWN);
  });

  it('revokes a token, expires one, and disabling a user stops every token of theirs', async () => {
    await admin().addUser({ userId: 'dave' });
    const a = await admin().issueToken({ userId: 'dave', label: 'a' });
    const b = await admin().issueToken({ userId: 'dave', label: 'b', expiresInSeconds: 3600n });
    expect(b.token!.expiresAt).toBeDefined();
    await admin().revokeToken({ tokenId: a.token!.id });
    expect((await identity().verifyToken({ tokenSha256: sha(a.secret) })).status).toBe(IdentityStatus.REVOKED);
    expect((await identity().verifyToken({ tokenSha256: sha(b.secret) })).status).toBe(IdentityStatus.OK);
    await h.pool.query(`UPDATE user_tokens SET expires_at = now() - interval '1 second' WHERE id = $1`, [b.token!.id]);
    expect((await identity().verifyToken({ tokenSha256: sha(b.secret) })).status).toBe(IdentityStatus.EXPIRED);

    const c = await admin().issueToken({ userId: 'dave' });
    const disabled = await admin().disableUser({ userId: 'dave' });
    expect(disabled.user!.disabledAt).toBeDefined();
    expect((await identity().verifyToken({ tokenSha256: sha(c.secret) })).status).toBe(IdentityStatus.USER_DISABLED);
    expect((await identity().resolveUser({ userId: 'dave' })).status).toBe(IdentityStatus.USER_DISABLED);
    expect((await rpcError(admin().issueToken({ userId: 'dave' }))).code).toBe(Code.FailedPrecondition);
    expect((await rpcError(admin().issueToken({ userId: 'nobody' }))).code).toBe(Code.NotFound);
    expect((await rpcError(admin().disableUser({ userId: 'nobody' }))).code).toBe(Code.NotFound);
    expect((await rpcError(admin().revokeToken({ tokenId: 'tok_nope' }))).code).toBe(Code.NotFound);
    const users = await admin().listUsers({});
    expect(users.users.find((u) => u.id === 'dave')?.disabledAt).toBeDefined();
  });

  it('resolves a user, creating one on first sign-in with the role user only when asked', async () => {
    expect((await identity().resolveUser({ userId: 'erin@example.com' })).status).toBe(IdentityStatus.UNKNOWN);
    const first = await identity().resolveUser({ userId: 'erin@example.com', create: true, displayName: 'Erin' });
    expect(first).toMatchObject({ status: IdentityStatus.OK, role: UserRole.USER, created: true });
    const again = await identity().resolveUser({ userId: 'erin@example.com', create: true });
    expect(again).toMatchObject({ status: IdentityStatus.OK, created: false });
    // Concurrent first sign-ins of one user: one creates, all see the user.
    const racing = await Promise.all(Array.from({ length: 8 }, () => identity().resolveUser({ userId: 'frank', create: true })));
    expect(racing.every((r) => r.status === IdentityStatus.OK)).toBe(true);
    expect(racing.filter((r) => r.created)).toHaveLength(1);
  });

  it('answers IdentityService only to web-bff, and AdminService only to web-bff acting for an admin', async () => {
    const none = createClient(IdentityService, transport());
    expect((await rpcError(none.verifyToken({ tokenSha256: sha('x') }))).code).toBe(Code.Unauthenticated);
    const gateway = createClient(IdentityService, transport(serviceTokenInterceptor(h.services.tokens['llm-gateway']!)));
    const refused = await rpcError(gateway.verifyToken({ tokenSha256: sha('x') }));
    expect(refused.code).toBe(Code.PermissionDenied);
    expect(refused.rawMessage).toContain('only web-bff may');

    const asUser = createClient(AdminService, transport(asWebBff(), headers({ [USER_HEADER]: 'bob', [ROLE_HEADER]: 'user' })));
    const denied = await rpcError(asUser.addUser({ userId: 'mallory' }));
    expect(denied.code).toBe(Code.PermissionDenied);
    expect(denied.rawMessage).toBe('AddUser needs the admin role; user bob has the role user');
    const noRole = createClient(AdminService, transport(asWebBff(), headers({ [USER_HEADER]: 'bob' })));
    expect((await rpcError(noRole.listUsers({}))).code).toBe(Code.PermissionDenied);
    const forged = createClient(
      AdminService,
      transport(serviceTokenInterceptor(h.services.tokens['llm-gateway']!), headers({ [USER_HEADER]: 'root', [ROLE_HEADER]: 'admin' })),
    );
    expect((await rpcError(forged.listUsers({}))).code).toBe(Code.PermissionDenied);
    const { rows } = await h.pool.query("SELECT 1 FROM users WHERE id = 'mallory'");
    expect(rows).toHaveLength(0);
  });
});
