/** Defaults shared by both transports, so the embedded and distributed modes behave alike. */

/** Completed job ids are remembered this long so a re-published job is still a duplicate: 24 h. */
export const DEFAULT_COMPLETED_RETENTION_MS = 24 * 60 * 60 * 1000;
/** Jobs that used up their attempts stay inspectable (and de-duplicated) this long: 7 days. */
export const DEFAULT_FAILED_RETENTION_MS = 7 * 24 * 60 * 60 * 1000;
/** `Consumer.close()` waits this long for running jobs before handing them back: 10 s. */
export const DEFAULT_CLOSE_GRACE_MS = 10_000;
/** Handler attempts in all when it throws (ConsumeOptions.attempts). */
export const DEFAULT_ATTEMPTS = 5;
/** First retry delay, doubled on each later retry (ConsumeOptions.backoffMs), ms. */
export const DEFAULT_BACKOFF_MS = 500;
/** Entries kept per notification stream (approximate in Redis: MAXLEN ~). */
export const DEFAULT_STREAM_MAX_LEN = 10_000;
/** A notification stream expires this long after its last append: 24 h. */
export const DEFAULT_STREAM_TTL_MS = 24 * 60 * 60 * 1000;
/**
 * Lock a consumer holds on a running job (BullMQ `lockDuration`), renewed every quarter of it:
 * a consumer that died (kill -9, lost node) loses its jobs once the lock expires. 2 s: a dead
 * consumer's work is back within 2 to 3 s, so a kill delays a turn by about that much
 * (docs/transports.md, "Finding dead consumers").
 */
export const DEFAULT_JOB_LOCK_MS = 2000;
/** How often consumers look for jobs whose lock expired (BullMQ `stalledInterval`): 1 s. */
export const DEFAULT_JOB_STALLED_INTERVAL_MS = 1000;
/** Locks are renewed this often, as a fraction of the lock (BullMQ's default is 1/2). */
export const JOB_LOCK_RENEW_FRACTION = 1 / 4;

/** Events returned by one `read` when the caller gives no limit. */
export const DEFAULT_READ_LIMIT = 1000;

/** Delay before retry number `failures` (1-based): backoffMs, 2x, 4x, ... */
export function backoffDelay(backoffMs: number, failures: number): number {
  return Math.round(backoffMs * 2 ** (failures - 1));
}

/** The conversation a job's payload names (its `conversation_id` field), or null. */
export function conversationOfPayload(payload: object): string | null {
  const id = (payload as { conversationId?: unknown }).conversationId;
  return typeof id === 'string' && id !== '' ? id : null;
}

/** BullMQ forbids `:` in queue names (it separates key parts); both transports enforce it. */
export function assertQueueName(queue: string): void {
  if (queue === '' || queue.includes(':')) throw new Error(`invalid queue name ${JSON.stringify(queue)}: must be non-empty without ':'`);
}
