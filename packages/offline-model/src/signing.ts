/**
 * Signatures of the thinking blocks the local Messages API server issues, so it can reject a block sent
 * back modified or invented, as the real API does. A `thinking` block's signature is the base64
 * HMAC-SHA256 of exactly its `thinking` text; a `redacted_thinking` block's `data` is a random nonce
 * followed by the HMAC of that nonce (so only this server's data verifies).
 */
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';

export interface BlockSigner {
  /** The signature this server issues for a thinking block with exactly this text. */
  signThinking(thinking: string): string;
  /** True when `signature` is the one issued for exactly this thinking text. */
  verifyThinking(thinking: string, signature: unknown): boolean;
  /** A fresh `redacted_thinking` data string issued by this server. */
  redactedData(): string;
  /** True when `data` is a redacted_thinking data string this server issued. */
  verifyRedacted(data: unknown): boolean;
}

/**
 * The key of the offline demo model's server: stable, so its signatures outlive a restart and every
 * gateway's local server accepts the blocks of any other.
 */
export const OFFLINE_SIGNING_KEY = 'bedrock-offline-demo-model-thinking-signatures';

const NONCE_BYTES = 24;
const MAC_BYTES = 32;

/** A signer with `key`, random per server unless one is given ({@link OFFLINE_SIGNING_KEY}). */
export function createBlockSigner(key: string | Uint8Array = randomBytes(32)): BlockSigner {
  const mac = (domain: string, data: Uint8Array | string) => createHmac('sha256', key).update(domain).update('\0').update(data).digest();
  const equal = (a: Buffer, b: Buffer) => a.length === b.length && timingSafeEqual(a, b);
  // A thinking signature is the HMAC of the text alone (no domain), as the design states; redacted
  // data uses a domain prefix, so neither can stand in for the other.
  const thinkingMac = (thinking: string) => createHmac('sha256', key).update(thinking, 'utf8').digest();
  return {
    signThinking: (thinking) => thinkingMac(thinking).toString('base64'),
    verifyThinking: (thinking, signature) => {
      if (typeof signature !== 'string' || signature === '') return false;
      return (
        equal(Buffer.from(signature, 'base64'), thinkingMac(thinking)) && Buffer.from(signature, 'base64').toString('base64') === signature
      );
    },
    redactedData: () => {
      const nonce = randomBytes(NONCE_BYTES);
      return Buffer.concat([nonce, mac('redacted_thinking', nonce)]).toString('base64');
    },
    verifyRedacted: (data) => {
      if (typeof data !== 'string' || data === '') return false;
      const raw = Buffer.from(data, 'base64');
      if (raw.length !== NONCE_BYTES + MAC_BYTES || raw.toString('base64') !== data) return false;
      return equal(raw.subarray(NONCE_BYTES), mac('redacted_thinking', raw.subarray(0, NONCE_BYTES)));
    },
  };
}
