/**
 * OpenID Connect: ID and access tokens (JWT) of one configured issuer, verified with `jose`
 * against the issuer's JSON Web Key Set: the signature (public-key algorithms only), the issuer,
 * the audience, the expiry, `nbf` and `iat` (each with the configured clock skew). The configured
 * claim names the user. docs/web-bff.md, "OpenID Connect".
 */
import { createRemoteJWKSet, errors, jwtVerify, type JWTPayload } from 'jose';

/**
 * Signature algorithms accepted: public-key ones only. `alg: none` and HMAC (whose key would be a
 * shared secret) are refused, and so is a key the issuer's set does not have.
 */
export const OIDC_ALGORITHMS = ['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512', 'ES256', 'ES384', 'ES512', 'EdDSA'];

export interface OidcSettings {
  readonly issuer: string;
  readonly audience: readonly string[];
  readonly jwksUrl?: string | undefined;
  readonly userClaim: string;
  /** ms. */
  readonly clockSkew: number;
}

export type OidcResult =
  | { readonly ok: true; readonly user: string; readonly displayName: string }
  | { readonly ok: false; readonly reason: string; readonly unavailable?: boolean };

export interface OidcVerifier {
  verify(token: string): Promise<OidcResult>;
}

/** A compact JWS: three base64url parts, the first a JSON header (`{"` is `eyJ`). Bedrock's own tokens have no dots. */
export function looksLikeJwt(token: string): boolean {
  return /^eyJ[A-Za-z0-9_-]*\.[A-Za-z0-9_-]*\.[A-Za-z0-9_-]*$/.test(token);
}

const DISCOVERY_TIMEOUT_MS = 5000;

/** The issuer's jwks_uri from its discovery document, whose `issuer` must be the configured one. */
async function discoverJwksUrl(issuer: string): Promise<URL> {
  const url = `${issuer.replace(/\/+$/, '')}/.well-known/openid-configuration`;
  const res = await fetch(url, { signal: AbortSignal.timeout(DISCOVERY_TIMEOUT_MS), redirect: 'error' });
  if (!res.ok) throw new Error(`${url} answered HTTP ${res.status}`);
  const doc = (await res.json()) as { issuer?: unknown; jwks_uri?: unknown };
  if (doc.issuer !== issuer) throw new Error(`${url} names the issuer ${JSON.stringify(doc.issuer)}, not ${issuer}`);
  if (typeof doc.jwks_uri !== 'string') throw new Error(`${url} has no jwks_uri`);
  return new URL(doc.jwks_uri);
}

/**
 * The issuer's key set is found through its discovery document unless BEDROCK_OIDC_JWKS_URL
 * names it (`jwksUrl`), then fetched and cached by `jose`'s createRemoteJWKSet, which fetches
 * again, at most every 30 s, when a token names a key it does not have.
 */
export function createOidcVerifier(settings: OidcSettings, onDiscoveryError?: (err: Error) => void): OidcVerifier {
  let keys: Promise<ReturnType<typeof createRemoteJWKSet>> | undefined;
  const keySet = () => {
    keys ??= (settings.jwksUrl ? Promise.resolve(new URL(settings.jwksUrl)) : discoverJwksUrl(settings.issuer)).then((u) =>
      createRemoteJWKSet(u, { timeoutDuration: DISCOVERY_TIMEOUT_MS }),
    );
    // A failed discovery is tried again by the next token.
    keys.catch((err: unknown) => {
      keys = undefined;
      onDiscoveryError?.(err as Error);
    });
    return keys;
  };
  return {
    async verify(token) {
      let jwks: Awaited<ReturnType<typeof keySet>>;
      try {
        jwks = await keySet();
      } catch (err) {
        return { ok: false, reason: `the identity provider's keys could not be fetched (${(err as Error).message})`, unavailable: true };
      }
      let payload: JWTPayload;
      try {
        ({ payload } = await jwtVerify(token, jwks, {
          issuer: settings.issuer,
          audience: [...settings.audience],
          algorithms: OIDC_ALGORITHMS,
          clockTolerance: Math.round(settings.clockSkew / 1000),
          requiredClaims: ['exp'],
        }));
      } catch (err) {
        // A key set that could not be fetched (a timeout, or fetch's own TypeError) is not the token's fault.
        if (err instanceof errors.JWKSTimeout || !(err instanceof errors.JOSEError))
          return { ok: false, reason: "the identity provider's keys could not be fetched", unavailable: true };
        return { ok: false, reason: describe(err) };
      }
      // jose checks `iat` only against a maximum token age, which Bedrock does not set: a token
      // "issued" in the future (a skewed or hostile issuer clock, or one minted ahead to outlive a
      // revocation) would pass. Refuse one issued later than now plus the clock skew.
      const skewSec = Math.round(settings.clockSkew / 1000);
      if (payload.iat !== undefined && payload.iat > Math.floor(Date.now() / 1000) + skewSec)
        return { ok: false, reason: 'claim check failed: "iat" is in the future (the token was issued later than now)' };
      const value = payload[settings.userClaim];
      if (typeof value !== 'string' || !value) return { ok: false, reason: `the token has no "${settings.userClaim}" claim` };
      const name = typeof payload.name === 'string' ? payload.name : typeof payload.email === 'string' ? payload.email : value;
      return { ok: true, user: value, displayName: name };
    },
  };
}

/** Why jose refused a token, in words (never the token). */
function describe(err: unknown): string {
  if (err instanceof errors.JWTExpired) return 'the token has expired';
  if (err instanceof errors.JWTClaimValidationFailed) return `claim check failed: ${err.message}`;
  if (err instanceof errors.JOSEAlgNotAllowed) return 'the signature algorithm is not accepted (public-key algorithms only)';
  if (err instanceof errors.JWKSNoMatchingKey) return "no key of the issuer's key set matches the token";
  if (err instanceof errors.JWSSignatureVerificationFailed) return 'the signature does not verify';
  if (err instanceof errors.JOSEError) return err.message;
  return 'the token is malformed';
}
