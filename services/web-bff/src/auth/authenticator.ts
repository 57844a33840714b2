/**
 * Who a call is: `Authorization: Bearer <token>` → a user and a role, or the error to answer.
 * A token is looked for in BEDROCK_TOKENS_FILE / BEDROCK_TOKENS (no question asked), then, with
 * OpenID Connect configured, as a JWT of the issuer (./oidc.ts), then as a token issued by
 * AdminService, looked up by its SHA-256 through the conversation service's IdentityService.
 * docs/web-bff.md, "Authentication and ownership".
 */
import { createHash } from 'node:crypto';
import { timestampDate } from '@bufbuild/protobuf/wkt';
import { Code, ConnectError, type CallOptions, type Client } from '@connectrpc/connect';
import type { IdentityService } from '@bedrock/contracts';
import { IdentityStatus, USER_ID_PATTERN, UserRole } from '@bedrock/contracts';
import type { Logger } from '@bedrock/platform/server';
import { looksLikeJwt, type OidcVerifier } from './oidc.ts';
import { bearerToken, type TokenStore } from './token-store.ts';

export type Role = 'user' | 'admin';
export interface Identity {
  readonly user: string;
  readonly role: Role;
}
export type AuthResult = Identity | { readonly error: ConnectError };

export interface AuthenticatorOptions {
  /** The tokens of BEDROCK_TOKENS_FILE / BEDROCK_TOKENS (reloaded on SIGHUP: a getter). */
  readonly tokens: () => TokenStore;
  readonly identity: Client<typeof IdentityService>;
  /** Options of each call to IdentityService (web-bff's service credential, the deadline). */
  readonly callOptions: () => CallOptions;
  /** Users who are admins whatever the database says (BEDROCK_ADMIN_USERS: the first admin). */
  readonly admins: readonly string[];
  /** ms, at most 1000; 0: no reuse. */
  readonly cacheTtlMs: number;
  readonly oidc?: { readonly verifier: OidcVerifier; readonly autoCreate: boolean } | undefined;
  readonly logger: Logger;
  /** Clock (tests). */
  readonly now?: () => number;
}

export interface Authenticator {
  /** The identity of an Authorization header; synchronous when nothing has to be asked. */
  authenticate(authorization: string | null | undefined): AuthResult | Promise<AuthResult>;
}

interface Verdict {
  readonly status: IdentityStatus;
  readonly user: string;
  readonly role: UserRole;
  /** ms since the epoch; the answer is not reused past it. */
  readonly expiresAt?: number;
}

interface Entry {
  /** ms since the epoch after which the entry is not used. */
  until: number;
  readonly verdict: Promise<Verdict>;
  settled?: Verdict;
}

/** Entries beyond which expired ones are swept on insert. */
const SWEEP_AT = 10_000;

const unauthenticated = (message: string) => ({ error: new ConnectError(message, Code.Unauthenticated) });

export function createAuthenticator(options: AuthenticatorOptions): Authenticator {
  const now = options.now ?? Date.now;
  const admins = new Set(options.admins);
  const cache = new Map<string, Entry>();

  /**
   * The verdict for `key`, from the cache while fresh, else asked (once for concurrent callers).
   * An answer of the conversation service is reused for at most `cacheTtlMs`, counted from when
   * the question was asked, and never past a token's expiry: a revoke or a disable is in effect
   * on every web-bff replica within that time, with no message between replicas.
   */
  function cached(key: string, ask: () => Promise<Verdict>): Verdict | Promise<Verdict> {
    const t = now();
    const hit = cache.get(key);
    if (hit && hit.until > t) return hit.settled ?? hit.verdict;
    if (cache.size >= SWEEP_AT) for (const [k, e] of cache) if (e.until <= t) cache.delete(k);
    // Counted from before the question: an answer read before a revoke's commit ends within the TTL of it.
    const entry: Entry = { until: options.cacheTtlMs > 0 ? t + options.cacheTtlMs : t + 1, verdict: ask() };
    cache.set(key, entry);
    entry.verdict.then(
      (v) => {
        entry.settled = v;
        if (options.cacheTtlMs <= 0) cache.delete(key);
        else if (v.expiresAt !== undefined) entry.until = Math.min(entry.until, v.expiresAt);
      },
      () => cache.get(key) === entry && cache.delete(key),
    );
    return entry.verdict;
  }

  const roleOf = (user: string, role: UserRole): Role => (role === UserRole.ADMIN || admins.has(user) ? 'admin' : 'user');

  function decide(v: Verdict): AuthResult {
    switch (v.status) {
      case IdentityStatus.OK:
        return { user: v.user, role: roleOf(v.user, v.role) };
      case IdentityStatus.UNKNOWN:
        return unauthenticated('invalid bearer token');
      case IdentityStatus.REVOKED:
        return unauthenticated('bearer token revoked');
      case IdentityStatus.EXPIRED:
        return unauthenticated('bearer token expired');
      case IdentityStatus.USER_DISABLED:
        return unauthenticated(`user ${v.user} is disabled`);
      default:
        return unauthenticated('invalid bearer token');
    }
  }

  function unavailable(err: unknown): AuthResult {
    options.logger.warn(
      { err: ConnectError.from(err).message },
      'verifying a bearer token failed: the conversation service did not answer',
    );
    return {
      error: new ConnectError(
        'cannot verify the bearer token now: the conversation service is unavailable; try again shortly',
        Code.Unavailable,
      ),
    };
  }

  const settle = (v: Verdict | Promise<Verdict>, then: (v: Verdict) => AuthResult): AuthResult | Promise<AuthResult> =>
    v instanceof Promise ? v.then(then, unavailable) : then(v);

  /**
   * A conversation service from before users (during an upgrade; or a stand-in without
   * IdentityService) knows no issued token and no user: UNIMPLEMENTED reads as unknown.
   */
  const unknownIfUnimplemented = (err: unknown, user: string): Verdict => {
    if (ConnectError.from(err).code === Code.Unimplemented) return { status: IdentityStatus.UNKNOWN, user, role: UserRole.UNSPECIFIED };
    throw err;
  };

  /** What the database says of a user id (create: add an unknown one, role user). */
  const resolveUser = (user: string, create?: { displayName: string }) =>
    cached(`u:${create ? '+' : ''}${user}`, async () => {
      try {
        const r = await options.identity.resolveUser(
          { userId: user, create: !!create, displayName: create?.displayName ?? '' },
          options.callOptions(),
        );
        return { status: r.status, user, role: r.role };
      } catch (err) {
        return unknownIfUnimplemented(err, user);
      }
    });

  /**
   * A JWT of the OpenID Connect issuer: verified (./oidc.ts), then the conversation service is
   * asked about the user its claim names (disabled? an admin? unknown: created on first sign-in
   * with `autoCreate`, else refused; BEDROCK_OIDC_USERS).
   */
  function viaOidc(token: string, oidc: NonNullable<AuthenticatorOptions['oidc']>): Promise<AuthResult> {
    return oidc.verifier.verify(token).then((r) => {
      if (!r.ok) {
        if (r.unavailable) {
          options.logger.warn({ reason: r.reason }, 'OpenID Connect token not verified: the issuer is unavailable');
          return { error: new ConnectError(`cannot verify the identity token now: ${r.reason}`, Code.Unavailable) };
        }
        return unauthenticated(`invalid identity token: ${r.reason}`);
      }
      if (!USER_ID_PATTERN.test(r.user))
        return unauthenticated('invalid identity token: its user claim is not a Bedrock user id (letters, digits and . _ @ -)');
      const v = resolveUser(r.user, oidc.autoCreate ? { displayName: r.displayName } : undefined);
      return settle(v, (verdict) =>
        verdict.status === IdentityStatus.UNKNOWN
          ? unauthenticated(`user ${r.user} is not registered: an admin adds them with bedrock admin users add`)
          : decide(verdict),
      );
    });
  }

  return {
    authenticate(authorization) {
      const token = bearerToken(authorization);
      if (!token) return unauthenticated('missing bearer token: send "Authorization: Bearer <token>"');
      // The file vouches for its users by itself (their role: BEDROCK_ADMIN_USERS); nothing is asked.
      const fileUser = options.tokens().authenticate(token);
      if (fileUser !== undefined) return { user: fileUser, role: admins.has(fileUser) ? 'admin' : 'user' };
      if (options.oidc && looksLikeJwt(token)) return viaOidc(token, options.oidc);
      const sha256 = createHash('sha256').update(token, 'utf8').digest();
      const v = cached(`t:${sha256.toString('hex')}`, async () => {
        let r;
        try {
          r = await options.identity.verifyToken({ tokenSha256: sha256 }, options.callOptions());
        } catch (err) {
          return unknownIfUnimplemented(err, '');
        }
        return {
          status: r.status,
          user: r.userId,
          role: r.role,
          ...(r.expiresAt ? { expiresAt: timestampDate(r.expiresAt).getTime() } : {}),
        };
      });
      return settle(v, (verdict) => decide(verdict));
    },
  };
}
