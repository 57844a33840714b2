/**
 * OpenID Connect through the real web-bff and conversation service, with a test issuer (a local
 * discovery document and JSON Web Key Set): good tokens sign users in; expired ones, other
 * audiences or issuers, `iat` or `nbf` beyond the clock skew in the future, unknown keys, `alg: none`
 * and HMAC are refused. First sign-in creates the user (BEDROCK_OIDC_USERS=auto), or is refused
 * until an admin added them (registered); a disabled user is refused.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import pg from 'pg';
import { exportJWK, generateKeyPair, SignJWT, type CryptoKey, type JWK } from 'jose';
import { Code, ConnectError, createClient } from '@connectrpc/connect';
import { createGrpcTransport } from '@connectrpc/connect-node';
import { AdminService, ConversationService } from '@bedrock/contracts';
import { createLogger, createTokenStore, serviceTokenInterceptor, tokenEntriesOf } from '@bedrock/platform/server';
import { createWebBff, type WebBff } from '../src/create-web-bff.ts';
import { testBffConfig } from './support/bff-config.ts';
import { startSystem, type System } from './support/system.ts';

const AUDIENCE = 'bedrock-test';
let issuer: string;
let idp: Server;
let key: CryptoKey;
let otherKey: CryptoKey;
let jwksFetches = 0;
let s: System;
let registered: WebBff;
let pool: pg.Pool;

beforeAll(async () => {
  const pair = await generateKeyPair('RS256');
  key = pair.privateKey;
  const published = pair.publicKey;
  ({ privateKey: otherKey } = await generateKeyPair('RS256'));
  const jwk: JWK = { ...(await exportJWK(published)), kid: 'k1', alg: 'RS256', use: 'sig' };
  idp = createServer((req, res) => {
    res.setHeader('content-type', 'application/json');
    if (req.url === '/.well-known/openid-configuration') res.end(JSON.stringify({ issuer, jwks_uri: `${issuer}/jwks` }));
    else if (req.url === '/jwks') {
      jwksFetches++;
      res.end(JSON.stringify({ keys: [jwk] }));
    } else res.writeHead(404).end('{}');
  });
  await new Promise<void>((r) => idp.listen(0, '127.0.0.1', r));
  issuer = `http://127.0.0.1:${(idp.address() as AddressInfo).port}`;
  const oidc = { issuer, audience: [AUDIENCE], clockSkew: 30_000 };
  s = await startSystem({ label: 'oidc', playWorkers: false, bff: { oidc, auth: { admins: ['alice'] } } });
  registered = createWebBff(
    testBffConfig({
      oidc: { ...oidc, users: 'registered' },
      auth: { admins: ['alice'] },
      upstream: { conversationUrls: [s.conversation.grpcUrl] },
    }),
    {
      logger: createLogger({ service: 'web-bff-2', level: 'silent' }),
      tokens: createTokenStore(tokenEntriesOf(s.tokens)),
      serviceToken: s.serviceToken,
    },
  );
  await registered.start();
  pool = new pg.Pool({ connectionString: s.db.url, max: 1 });
});
afterAll(async () => {
  await pool?.end();
  await registered?.stop();
  await s?.close();
  await new Promise((r) => idp?.close(r));
});

const now = () => Math.floor(Date.now() / 1000);

function jwt(
  claims: Record<string, unknown>,
  opts: { key?: CryptoKey; kid?: string; exp?: number; alg?: string; iat?: number } = {},
): Promise<string> {
  return new SignJWT({ name: 'Test User', ...claims })
    .setProtectedHeader({ alg: opts.alg ?? 'RS256', kid: opts.kid ?? 'k1', typ: 'JWT' })
    .setIssuer((claims.iss as string | undefined) ?? issuer)
    .setAudience((claims.aud as string | undefined) ?? AUDIENCE)
    .setIssuedAt(opts.iat ?? now())
    .setExpirationTime(opts.exp ?? now() + 300)
    .sign(opts.key ?? key);
}

const b64 = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url');

async function call(token: string, bff: 'auto' | 'registered' = 'auto'): Promise<{ code: Code | 'ok'; message?: string }> {
  const client = createClient(
    ConversationService,
    createGrpcTransport({ baseUrl: (bff === 'auto' ? s.bff : registered).grpcUrl, interceptors: [serviceTokenInterceptor(token)] }),
  );
  try {
    await client.listConversations({});
    return { code: 'ok' };
  } catch (err) {
    const e = ConnectError.from(err);
    return { code: e.code, message: e.rawMessage };
  }
}

const userRow = async (id: string) =>
  (await pool.query<{ role: string; display_name: string }>('SELECT role, display_name FROM users WHERE id = $1', [id])).rows[0];

describe('OpenID Connect sign-in', () => {
  it('signs a user in with a good token, creating them with the role user on first sign-in', async () => {
    expect(await call(await jwt({ sub: 'u-1001' }))).toEqual({ code: 'ok' });
    expect(await userRow('u-1001')).toEqual({ role: 'user', display_name: 'Test User' });
    // Their conversations are theirs.
    const client = createClient(
      ConversationService,
      createGrpcTransport({ baseUrl: s.bff.grpcUrl, interceptors: [serviceTokenInterceptor(await jwt({ sub: 'u-1001' }))] }),
    );
    const created = await client.createConversation({ cwd: '/tmp' });
    const { rows } = await pool.query<{ owner_id: string }>('SELECT owner_id FROM conversations WHERE id = $1', [created.conversation!.id]);
    expect(rows[0]!.owner_id).toBe('u-1001');
    // Within the clock skew an expired token still counts, and so do `iat` and `nbf` slightly ahead.
    expect(await call(await jwt({ sub: 'u-1001' }, { exp: now() - 10 }))).toEqual({ code: 'ok' });
    expect(await call(await jwt({ sub: 'u-1001', nbf: now() + 10 }, { iat: now() + 10 }))).toEqual({ code: 'ok' });
  });

  it('refuses expired tokens, other audiences and issuers, unknown keys, alg none and HMAC', async () => {
    const cases: [string, Promise<string> | string, RegExp][] = [
      ['expired', jwt({ sub: 'u-1' }, { exp: now() - 120 }), /^invalid identity token: the token has expired$/],
      // Issued 600 s ahead (beyond the 30 s skew): a clock that is wrong, or a token minted to outlive its issuer's revocation.
      [
        'issued in the future',
        jwt({ sub: 'u-1' }, { iat: now() + 600, exp: now() + 900 }),
        /^invalid identity token: claim check failed: "iat" is in the future/,
      ],
      ['not valid before a future time', jwt({ sub: 'u-1', nbf: now() + 600 }), /^invalid identity token: claim check failed: "nbf"/],
      [
        'wrong audience',
        jwt({ sub: 'u-1', aud: 'someone-else' }),
        /^invalid identity token: claim check failed: unexpected "aud" claim value$/,
      ],
      [
        'wrong issuer',
        jwt({ sub: 'u-1', iss: 'https://evil.example.com' }),
        /^invalid identity token: claim check failed: unexpected "iss" claim value$/,
      ],
      [
        'a key the issuer does not publish (its kid)',
        jwt({ sub: 'u-1' }, { key: otherKey }),
        /^invalid identity token: the signature does not verify$/,
      ],
      [
        'an unknown kid',
        jwt({ sub: 'u-1' }, { key: otherKey, kid: 'k9' }),
        /^invalid identity token: no key of the issuer's key set matches the token$/,
      ],
      [
        'alg none',
        `${b64({ alg: 'none', typ: 'JWT' })}.${b64({ sub: 'u-1', iss: issuer, aud: AUDIENCE, exp: now() + 300 })}.`,
        /^invalid identity token: the signature algorithm is not accepted/,
      ],
      [
        'HMAC',
        new SignJWT({ sub: 'u-1' })
          .setProtectedHeader({ alg: 'HS256', kid: 'k1' })
          .setIssuer(issuer)
          .setAudience(AUDIENCE)
          .setExpirationTime(now() + 300)
          .sign(new TextEncoder().encode('a shared secret of thirty-two bytes!')),
        /^invalid identity token: the signature algorithm is not accepted/,
      ],
      ['no user claim', jwt({}), /^invalid identity token: the token has no "sub" claim$/],
      ['a claim that is no user id', jwt({ sub: 'auth0|123' }), /^invalid identity token: its user claim is not a Bedrock user id/],
    ];
    for (const [what, token, message] of cases) {
      const o = await call(await token);
      expect({ what, code: o.code }).toEqual({ what, code: Code.Unauthenticated });
      expect(o.message).toMatch(message);
    }
    expect(await userRow('u-1')).toBeUndefined();
    // The key set was fetched once, then again at most for the unknown kid.
    expect(jwksFetches).toBeLessThanOrEqual(2);
  });

  it('with BEDROCK_OIDC_USERS=registered, signs in only users an admin added; a disabled user is refused', async () => {
    const token = await jwt({ sub: 'u-2002' });
    expect(await call(token, 'registered')).toEqual({
      code: Code.Unauthenticated,
      message: 'user u-2002 is not registered: an admin adds them with bedrock admin users add',
    });
    const admin = createClient(
      AdminService,
      createGrpcTransport({ baseUrl: registered.grpcUrl, interceptors: [serviceTokenInterceptor(s.tokens.alice!)] }),
    );
    await admin.addUser({ userId: 'u-2002' });
    // The refusal was kept at most a second.
    await new Promise((r) => setTimeout(r, 1000));
    expect(await call(token, 'registered')).toEqual({ code: 'ok' });
    await admin.disableUser({ userId: 'u-2002' });
    await new Promise((r) => setTimeout(r, 1000));
    for (const bff of ['auto', 'registered'] as const)
      expect(await call(token, bff)).toEqual({ code: Code.Unauthenticated, message: 'user u-2002 is disabled' });
  });
});
