/**
 * AES-256-GCM sealing of small secrets (MCP OAuth tokens; docs/mcp.md, "OAuth logins to remote servers"):
 * the key is BEDROCK_MCP_TOKEN_KEY, 32 bytes given as base64 or as the path of a file holding them (raw, or
 * base64 text). A sealed value's "associated data" (what it is for: the user, the server, the purpose) must
 * match when it is opened, so a sealed value cannot be moved to another row or use.
 */
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync, chmodSync } from 'node:fs';

const VERSION = 1;
const NONCE = 12;
const TAG = 16;

export interface SecretBox {
  seal(plain: string, associated: string): Buffer;
  /** Throws when the value was not sealed with this key and this associated data. */
  open(sealed: Buffer, associated: string): string;
}

/** 32 bytes from base64 text, or from a file (raw 32 bytes, or base64 text). Throws saying what is wrong. */
export function parseSecretKey(value: string, what = 'BEDROCK_MCP_TOKEN_KEY'): Buffer {
  const text = value.trim();
  if (text.startsWith('/')) {
    let bytes: Buffer;
    try {
      bytes = readFileSync(text);
    } catch (err) {
      throw new Error(`${what}: cannot read the key file ${text} (${(err as Error).message})`);
    }
    if (bytes.length === 32) return bytes;
    return decode(bytes.toString('utf8').trim(), `${what} (the file ${text})`);
  }
  return decode(text, what);
}

function decode(text: string, what: string): Buffer {
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(text)) {
    throw new Error(`${what}: expected 32 bytes as base64 (e.g. \`openssl rand -base64 32\`) or an absolute file path`);
  }
  const key = Buffer.from(text, 'base64');
  if (key.length !== 32) throw new Error(`${what}: the key is ${key.length} bytes; AES-256 needs 32 (\`openssl rand -base64 32\`)`);
  return key;
}

/** The key file of the embedded product: created once (32 random bytes as base64, mode 0600), then read. */
export function ensureSecretKeyFile(file: string): string {
  if (!existsSync(file)) {
    writeFileSync(file, `${randomBytes(32).toString('base64')}\n`, { mode: 0o600, flag: 'wx' });
    chmodSync(file, 0o600);
  }
  return file;
}

/**
 * A sealed value is `1 | 12-byte nonce | 16-byte tag | ciphertext`. node:crypto, no library: the primitive
 * is the standard one and the format is these four fields.
 */
export function createSecretBox(key: Buffer): SecretBox {
  if (key.length !== 32) throw new Error('a secret box key is 32 bytes');
  return {
    seal(plain, associated) {
      const nonce = randomBytes(NONCE);
      const cipher = createCipheriv('aes-256-gcm', key, nonce);
      cipher.setAAD(Buffer.from(associated, 'utf8'));
      const body = Buffer.concat([cipher.update(plain, 'utf8'), cipher.final()]);
      return Buffer.concat([Buffer.from([VERSION]), nonce, cipher.getAuthTag(), body]);
    },
    open(sealed, associated) {
      if (sealed.length < 1 + NONCE + TAG || sealed[0] !== VERSION) throw new Error('not a sealed value of this format');
      const decipher = createDecipheriv('aes-256-gcm', key, sealed.subarray(1, 1 + NONCE));
      decipher.setAAD(Buffer.from(associated, 'utf8'));
      decipher.setAuthTag(sealed.subarray(1 + NONCE, 1 + NONCE + TAG));
      return Buffer.concat([decipher.update(sealed.subarray(1 + NONCE + TAG)), decipher.final()]).toString('utf8');
    },
  };
}

/** The associated data of an access token sent to a tool-runner for one conversation's server. */
export const mcpAccessTokenAad = (conversationId: string, server: string): string => `mcp-access\u0000${conversationId}\u0000${server}`;
