import { describe, expect, it } from '@jest/globals';
import { bearerToken, createTokenStore, generateToken, hashToken, parseTokenEntries, tokenEntriesOf } from './token-entries.ts';

describe('token entries', () => {
  const a = generateToken();
  const b = generateToken();
  const store = createTokenStore(
    parseTokenEntries(`# users\nalice:${hashToken(a)}\n\nbob:${hashToken(b).toUpperCase()}  # upper-case hex is fine\n`, 'test'),
  );

  it('maps each token to its name and nothing else', () => {
    expect(store.authenticate(a)).toBe('alice');
    expect(store.authenticate(b)).toBe('bob');
    expect(store.authenticate(`${a}x`)).toBeUndefined();
    expect(store.authenticate('')).toBeUndefined();
    expect(store.authenticate(hashToken(a))).toBeUndefined();
    expect(store.names).toEqual(['alice', 'bob']);
  });

  it('accepts comma-separated entries (BEDROCK_TOKENS)', () => {
    const s = createTokenStore(parseTokenEntries(`alice:${hashToken(a)},bob:${hashToken(b)}`, 'BEDROCK_TOKENS'));
    expect(s.authenticate(b)).toBe('bob');
  });

  it('rejects malformed entries without echoing them', () => {
    expect(() => parseTokenEntries('alice:plaintext-token', 'f')).toThrow(/f entry 1 \(user alice\): expected the token's SHA-256/);
    expect(() => parseTokenEntries(`bad user:${hashToken(a)}`, 'f')).toThrow(/f entry 1: expected user_id:sha256hex/);
    try {
      parseTokenEntries('alice:plaintext-token', 'f');
    } catch (err) {
      expect(String(err)).not.toContain('plaintext-token');
    }
  });

  it('words errors for service peers', () => {
    expect(() => parseTokenEntries('\n# peers\nweb-bff:plaintext', 'peers', 'service')).toThrow(
      /peers entry 3 \(service web-bff\): expected the token's SHA-256/,
    );
    expect(() => parseTokenEntries(`:${hashToken(a)}`, 'peers', 'service')).toThrow(/peers entry 1: expected service:sha256hex/);
  });

  it('builds entries from tokens held in memory', () => {
    const s = createTokenStore(tokenEntriesOf({ 'web-bff': a, 'tool-runner': b }));
    expect(s.authenticate(a)).toBe('web-bff');
    expect(s.authenticate(b)).toBe('tool-runner');
    expect(s.names).toEqual(['web-bff', 'tool-runner']);
  });

  it('parses bearer headers', () => {
    expect(bearerToken('Bearer abc')).toBe('abc');
    expect(bearerToken('bearer  abc ')).toBe('abc');
    expect(bearerToken('Basic abc')).toBeUndefined();
    expect(bearerToken('Bearer')).toBeUndefined();
    expect(bearerToken(null)).toBeUndefined();
  });

  it('hashes as sha256 hex', () => {
    expect(hashToken('foo')).toBe('2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae');
  });
});
