/**
 * Bearer tokens → users. The operator lists `user_id:sha256hex` entries (the SHA-256 of each
 * token, hex); plaintext tokens are never stored or logged. A presented token is hashed and
 * compared with every entry in constant time (no early exit), so response timing says
 * nothing about which entries exist or how close a guess came.
 */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { readFileSync } from 'node:fs';

/** Users are named by the operator; the id goes to the conversation service as the owner. */
const USER_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._@-]{0,127}$/;
const HASH_PATTERN = /^[0-9a-f]{64}$/;

interface Entry {
  readonly user: string;
  readonly hash: Buffer;
}

export interface TokenStore {
  /** The user a token belongs to, or undefined. */
  authenticate(token: string): string | undefined;
  /** Distinct users configured. */
  readonly users: readonly string[];
}

/** SHA-256 of a token, lowercase hex: what the operator puts in the tokens file. */
export function hashToken(token: string): string {
  return createHash('sha256').update(token, 'utf8').digest('hex');
}

/** A fresh random token (256 bits, base64url, `bdr_` prefix so it is recognisable in leaks). */
export function generateToken(): string {
  return `bdr_${randomBytes(32).toString('base64url')}`;
}

/**
 * Parses entries: one per line (or comma-separated), `user_id:sha256hex`; blank lines and
 * `#` comments are skipped. Throws naming the source and line of the first bad entry; the
 * message never contains the entry's hash.
 */
export function parseTokenEntries(text: string, source: string): Entry[] {
  const entries: Entry[] = [];
  const lines = text.split(/\r?\n|,/);
  lines.forEach((raw, i) => {
    const line = raw.replace(/#.*$/, '').trim();
    if (!line) return;
    const colon = line.lastIndexOf(':');
    const user = colon > 0 ? line.slice(0, colon).trim() : '';
    const hash = colon > 0 ? line.slice(colon + 1).trim().toLowerCase() : '';
    if (!USER_PATTERN.test(user)) throw new Error(`${source} entry ${i + 1}: expected user_id:sha256hex with a user id of letters, digits, . _ @ -`);
    if (!HASH_PATTERN.test(hash)) {
      throw new Error(`${source} entry ${i + 1} (user ${user}): expected the token's SHA-256 as 64 hex digits (bedrock token hash TOKEN)`);
    }
    entries.push({ user, hash: Buffer.from(hash, 'hex') });
  });
  return entries;
}

export interface TokenSources {
  /** Path of a file of entries. */
  readonly file?: string | undefined;
  /** Entries inline (BEDROCK_TOKENS). */
  readonly inline?: string | undefined;
}

/** Reads every configured entry; throws if a source is unreadable or malformed. */
export function loadTokenStore(sources: TokenSources): TokenStore {
  const entries: Entry[] = [];
  if (sources.file) entries.push(...parseTokenEntries(readFileSync(sources.file, 'utf8'), sources.file));
  if (sources.inline) entries.push(...parseTokenEntries(sources.inline, 'BEDROCK_TOKENS'));
  return createTokenStore(entries);
}

export function createTokenStore(entries: readonly Entry[]): TokenStore {
  const users = [...new Set(entries.map((e) => e.user))];
  return {
    users,
    authenticate(token) {
      if (!token) return undefined;
      const presented = createHash('sha256').update(token, 'utf8').digest();
      let found: string | undefined;
      for (const entry of entries) {
        // Every entry is compared; the match is remembered, not returned early.
        if (timingSafeEqual(presented, entry.hash) && found === undefined) found = entry.user;
      }
      return found;
    },
  };
}

/** Parses `Authorization: Bearer <token>`; undefined when absent or another scheme. */
export function bearerToken(authorization: string | null | undefined): string | undefined {
  if (!authorization) return undefined;
  const match = /^Bearer[ \t]+(\S+)[ \t]*$/i.exec(authorization);
  return match?.[1];
}
