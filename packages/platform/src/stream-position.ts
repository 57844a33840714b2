/**
 * Stream positions (sequence, deltaIndex) and their Redis Stream entry ids. A durable event
 * at sequence n has id `n-0`; the ephemeral events after it are `n-1`, `n-2`, ... so Redis'
 * own id order is the notification order.
 */
import type { StreamPosition } from './interfaces.ts';

/** Negative, zero or positive as `a` is before, at or after `b`. */
export function comparePositions(a: StreamPosition, b: StreamPosition): number {
  if (a.sequence !== b.sequence) return a.sequence < b.sequence ? -1 : 1;
  return a.deltaIndex - b.deltaIndex;
}

/** The index of the first of `entries` (in position order) strictly after `after`; `entries.length` if none. */
export function firstAfter(entries: readonly { readonly position: StreamPosition }[], after: StreamPosition): number {
  let lo = 0;
  let hi = entries.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (comparePositions(entries[mid]!.position, after) <= 0) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

export function positionToStreamId(position: StreamPosition): string {
  return `${position.sequence}-${position.deltaIndex}`;
}

export function streamIdToPosition(id: string): StreamPosition {
  const dash = id.indexOf('-');
  if (dash <= 0) throw new Error(`not a stream entry id: ${id}`);
  return { sequence: BigInt(id.slice(0, dash)), deltaIndex: Number(id.slice(dash + 1)) };
}
