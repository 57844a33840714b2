/**
 * Idempotent client requests (docs/conversation.md, "Idempotent requests"): a mutating RPC
 * that carries a `request_id` has its outcome stored in `request_outcomes`, in the same
 * transaction that applied it (or in which the state machine refused it). A retry with the
 * same id finds the row and is answered from it; nothing is applied twice.
 */
import { createHash } from 'node:crypto';
import type { Pool, PoolClient } from 'pg';

/** Identifies one client request: the user, its scope (a conversation, or '' for creation) and the client's id. */
export interface RequestKey {
  readonly ownerId: string;
  /** The conversation id; '' for CreateConversation (scoped to the user alone). */
  readonly scope: string;
  readonly requestId: string;
  /** RPC name, e.g. `SendMessage`. */
  readonly method: string;
  /** {@link requestFingerprint} of the request without its id: a retry must match it. */
  readonly fingerprint: string;
}

/** What a request was answered with: a response, or an error. */
export interface StoredOutcome {
  /** The response, protobuf binary. SendMessage stores it without the message (images can be large). */
  readonly response?: Uint8Array;
  /** SendMessage: the persisted message, read back from `messages` on a retry. */
  readonly messageId?: string;
  readonly error?: { readonly code: number; readonly message: string; readonly rejection?: string };
}

/** A stored outcome found for a request id. */
export interface PriorOutcome {
  readonly method: string;
  /** False when the id was first used for another method or another body. */
  readonly sameRequest: boolean;
  readonly outcome: StoredOutcome;
  readonly createdAt: Date;
}

/** Passed to a store method that applies a request: its key and how to turn the result into what is stored. */
export interface RequestRecorder<R> {
  readonly key: RequestKey;
  /** Runs inside the transaction, before commit; null stores nothing (e.g. not found). */
  outcome(result: R): StoredOutcome | null;
}

/** At most this many characters; printable ASCII without spaces (UUIDs, ULIDs, base64 all fit). */
export const MAX_REQUEST_ID_CHARS = 128;
const REQUEST_ID_PATTERN = /^[\x21-\x7e]+$/;

/** Why a request id is not acceptable, or null. */
export function requestIdProblem(id: string): string | null {
  if (id.length > MAX_REQUEST_ID_CHARS) return `request_id is too long (${id.length} characters; at most ${MAX_REQUEST_ID_CHARS})`;
  if (!REQUEST_ID_PATTERN.test(id)) return 'request_id must be printable ASCII characters without spaces (a UUID, for example)';
  return null;
}

/** SHA-256 (hex) of the method and the request's bytes, serialized without the request id. */
export function requestFingerprint(method: string, body: Uint8Array): string {
  return createHash('sha256').update(method).update('\0').update(body).digest('hex');
}

interface OutcomeRowDb {
  method: string;
  fingerprint: string;
  response: Buffer | null;
  message_id: string | null;
  error_code: number | null;
  error_message: string | null;
  rejection: string | null;
  created_at: Date;
}

function toPrior(row: OutcomeRowDb, key: RequestKey): PriorOutcome {
  return {
    method: row.method,
    sameRequest: row.method === key.method && row.fingerprint === key.fingerprint,
    createdAt: row.created_at,
    outcome: {
      ...(row.response ? { response: new Uint8Array(row.response) } : {}),
      ...(row.message_id ? { messageId: row.message_id } : {}),
      ...(row.error_code !== null
        ? { error: { code: row.error_code, message: row.error_message ?? '', ...(row.rejection ? { rejection: row.rejection } : {}) } }
        : {}),
    },
  };
}

/** The stored outcome of a request id, if any (committed rows only). */
export async function findOutcome(db: Pool | PoolClient, key: RequestKey): Promise<PriorOutcome | null> {
  const { rows } = await db.query<OutcomeRowDb>('SELECT * FROM request_outcomes WHERE owner_id = $1 AND scope = $2 AND request_id = $3', [
    key.ownerId,
    key.scope,
    key.requestId,
  ]);
  return rows[0] ? toPrior(rows[0], key) : null;
}

/**
 * Claims a request id inside the caller's transaction: inserts its row (outcome still empty)
 * unless one exists. Concurrent duplicates serialise on the conversation's row lock (the caller
 * holds it) or, for CreateConversation, on this row's primary key: a concurrent transaction
 * inserting the same key waits here until the first commits (then finds its row) or rolls back
 * (then claims it). Returns the prior outcome, or null when this transaction now owns the id.
 */
export async function claimRequest(client: PoolClient, key: RequestKey): Promise<PriorOutcome | null> {
  const inserted = await client.query(
    `INSERT INTO request_outcomes (owner_id, scope, request_id, method, fingerprint)
     VALUES ($1, $2, $3, $4, $5) ON CONFLICT (owner_id, scope, request_id) DO NOTHING`,
    [key.ownerId, key.scope, key.requestId, key.method, key.fingerprint],
  );
  if (inserted.rowCount === 1) return null;
  const prior = await findOutcome(client, key);
  if (!prior) throw new Error(`request ${key.requestId} is neither new nor stored`);
  return prior;
}

/** Writes the outcome of a claimed request id (same transaction as the claim). */
export async function storeOutcome(client: PoolClient, key: RequestKey, outcome: StoredOutcome): Promise<void> {
  await client.query(
    `UPDATE request_outcomes
        SET response = $4, message_id = $5, error_code = $6, error_message = $7, rejection = $8
      WHERE owner_id = $1 AND scope = $2 AND request_id = $3`,
    [
      key.ownerId,
      key.scope,
      key.requestId,
      outcome.response ? Buffer.from(outcome.response) : null,
      outcome.messageId ?? null,
      outcome.error?.code ?? null,
      outcome.error?.message ?? null,
      outcome.error?.rejection ?? null,
    ],
  );
}

/** Releases a claimed id whose request ended without an outcome worth keeping (e.g. not found). */
export async function releaseRequest(client: PoolClient, key: RequestKey): Promise<void> {
  await client.query('DELETE FROM request_outcomes WHERE owner_id = $1 AND scope = $2 AND request_id = $3', [
    key.ownerId,
    key.scope,
    key.requestId,
  ]);
}

/** Deletes outcomes older than `retentionMs`; returns how many. */
export async function pruneOutcomes(pool: Pool, retentionMs: number): Promise<number> {
  const { rowCount } = await pool.query(
    "DELETE FROM request_outcomes WHERE created_at < now() - ($1::double precision * interval '1 millisecond')",
    [retentionMs],
  );
  return rowCount ?? 0;
}

/**
 * Prunes request outcomes older than `retentionMs`, every `intervalMs` (default: a minute, or
 * the retention if shorter). Every replica runs one; the DELETE is idempotent.
 */
export function startRequestPruner(options: {
  readonly prune: (retentionMs: number) => Promise<number>;
  readonly retentionMs: number;
  readonly intervalMs?: number;
  readonly onError: (err: unknown) => void;
}): { stop(): Promise<void> } {
  const intervalMs = options.intervalMs ?? Math.max(1000, Math.min(60_000, options.retentionMs));
  let running: Promise<unknown> = Promise.resolve();
  const timer = setInterval(() => {
    running = options.prune(options.retentionMs).catch(options.onError);
  }, intervalMs);
  timer.unref();
  return {
    async stop() {
      clearInterval(timer);
      await running;
    },
  };
}
