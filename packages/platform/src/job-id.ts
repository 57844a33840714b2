/**
 * Job ids as BullMQ stores them. BullMQ rejects custom ids that contain `:` (unless they happen to have
 * exactly three parts, a legacy repeatable-job form) and ids that read as integers (they would collide with
 * its auto-generated ids). Producers use ids like `conv-1:llm:3`, so every id goes through a reversible
 * percent-encoding that stays readable in redis-cli (`conv-1%3Allm%3A3`; docs/transports.md, "Queues").
 */

const ESCAPED = /[%:]/g;
const INTEGER = /^[+-]?\d/;

function escapeChar(ch: string): string {
  return `%${ch.charCodeAt(0).toString(16).toUpperCase().padStart(2, '0')}`;
}

/**
 * Encodes any non-empty string into an id BullMQ accepts: `%` -> `%25`, `:` -> `%3A`, and the first
 * character of an integer-looking id -> `%3X`. See {@link decodeJobId}.
 */
export function encodeJobId(id: string): string {
  if (id === '') throw new Error('job id must not be empty');
  const escaped = id.replace(ESCAPED, escapeChar);
  // BullMQ's test is `${parseInt(id, 10)}` === id; escaping the first character of anything
  // that starts like a number is simpler than mirroring parseInt and is still reversible.
  return INTEGER.test(escaped) ? escapeChar(escaped.charAt(0)) + escaped.slice(1) : escaped;
}

/** The inverse of {@link encodeJobId}. */
export function decodeJobId(encoded: string): string {
  return encoded.replace(/%([0-9A-F]{2})/g, (_, hex: string) => String.fromCharCode(parseInt(hex, 16)));
}
