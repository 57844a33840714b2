/**
 * Redis Cluster's key slot (CRC16-XMODEM of the key's hash tag, or of the whole key, mod 16384),
 * as the servers compute it: the first `{...}` with something between the braces is the tag.
 */

const TABLE = (() => {
  const table = new Uint16Array(256);
  for (let i = 0; i < 256; i++) {
    let crc = i << 8;
    for (let bit = 0; bit < 8; bit++) crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
    table[i] = crc;
  }
  return table;
})();

function crc16(bytes: Uint8Array): number {
  let crc = 0;
  for (const byte of bytes) crc = ((crc << 8) & 0xffff) ^ TABLE[((crc >> 8) ^ byte) & 0xff]!;
  return crc;
}

/** The part of `key` that is hashed: its hash tag if it has one, else the whole key. */
export function hashTagOf(key: string): string {
  const open = key.indexOf('{');
  if (open === -1) return key;
  const close = key.indexOf('}', open + 1);
  if (close === -1 || close === open + 1) return key;
  return key.slice(open + 1, close);
}

export const CLUSTER_SLOTS = 16384;

export function keySlot(key: string): number {
  return crc16(Buffer.from(hashTagOf(key), 'utf8')) % CLUSTER_SLOTS;
}
