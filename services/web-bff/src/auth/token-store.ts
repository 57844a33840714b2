/**
 * Bearer tokens → users. The operator lists `user_id:sha256hex` entries (the SHA-256 of each
 * token, hex) in BEDROCK_TOKENS_FILE and/or BEDROCK_TOKENS. Parsing, hashing and the
 * constant-time comparison are shared with the internal servers' service peers
 * (`@bedrock/platform/server`, token-entries.ts).
 */
import { readFileSync } from 'node:fs';
import { createTokenStore, parseTokenEntries, type TokenEntry, type TokenStore } from '@bedrock/platform/server';

export {
  bearerToken,
  createTokenStore,
  generateToken,
  hashToken,
  parseTokenEntries,
  type TokenEntry,
  type TokenStore,
} from '@bedrock/platform/server';

export interface TokenSources {
  /** Path of a file of entries. */
  readonly file?: string | undefined;
  /** Entries inline (BEDROCK_TOKENS). */
  readonly inline?: string | undefined;
}

/** Reads every configured entry; throws if a source is unreadable or malformed. */
export function loadTokenStore(sources: TokenSources): TokenStore {
  const entries: TokenEntry[] = [];
  if (sources.file) entries.push(...parseTokenEntries(readFileSync(sources.file, 'utf8'), sources.file));
  if (sources.inline) entries.push(...parseTokenEntries(sources.inline, 'BEDROCK_TOKENS'));
  return createTokenStore(entries);
}
