/**
 * The audit log (migration 010, docs/security.md "Audit"): its rows, inserted only in the
 * transaction of the action they record, and read for ListAuditEvents. No function updates or
 * deletes a row (the table's triggers refuse both).
 */
import type { Pool, PoolClient } from 'pg';

/**
 * Every action the log records. `limit_changed` is kept for per-user limits and budgets (issue
 * 18, item 2): when admins can set them, the RPC that does writes this action with the old
 * and new values in the same transaction.
 */
export const AUDIT_ACTIONS = [
  'mode_upgrade_requested',
  'mode_upgrade_approved',
  'mode_upgrade_denied',
  'mode_downgraded',
  'conversation_cancelled',
  'conversation_deleted',
  'user_added',
  'user_disabled',
  'user_deleted',
  'token_issued',
  'token_revoked',
  'limit_changed',
  'conversation_rewound',
] as const;

export type AuditAction = (typeof AUDIT_ACTIONS)[number];

/** Who asked for a user action: the user web-bff named and the client it saw (empty: unknown). */
export interface AuditActor {
  readonly userId: string;
  readonly client: string;
}

export interface AuditRow {
  /** Who acted. */
  readonly userId: string;
  readonly action: AuditAction;
  readonly conversationId: string | null;
  readonly details: Readonly<Record<string, unknown>>;
}

/** The details every user action carries: the client it came from, when known. */
export function clientDetails(actor: AuditActor | undefined): Record<string, unknown> {
  return actor?.client ? { client: actor.client } : {};
}

/** An audit row as stored. */
export interface StoredAuditEvent {
  readonly id: string;
  readonly at: Date;
  readonly userId: string;
  readonly action: string;
  readonly conversationId: string | null;
  readonly details: Record<string, unknown>;
}

export interface AuditFilter {
  readonly userId?: string;
  readonly action?: string;
  readonly since?: Date;
  readonly until?: Date;
  /** Events older than this id (the previous page's last). */
  readonly beforeId?: bigint;
  readonly limit: number;
}

/**
 * The audit rows as the JSON the SQL below reads (`jsonb_to_recordset`), for actions whose
 * statement inserts its audit rows itself.
 */
export function auditJson(rows: readonly AuditRow[]): string {
  return JSON.stringify(rows.map(auditRowValues));
}

/** One audit row's columns, as `auditJson` writes them. */
export function auditRowValues(a: AuditRow): { user_id: string; action: string; conversation_id: string | null; details: unknown } {
  return { user_id: a.userId, action: a.action, conversation_id: a.conversationId, details: a.details };
}

/** `INSERT … SELECT` of audit rows given as `auditJson` in parameter `$n`, for a CTE of an action's own statement. */
export const auditInsertSql = (n: number) =>
  `INSERT INTO audit_events (user_id, action, conversation_id, details)
   SELECT r.user_id, r.action, r.conversation_id, r.details
     FROM jsonb_to_recordset($${n}::jsonb) AS r(user_id text, action text, conversation_id text, details jsonb)`;

/** Inserts audit rows within the caller's transaction. */
export async function insertAuditRows(client: PoolClient, rows: readonly AuditRow[]): Promise<void> {
  if (rows.length === 0) return;
  await client.query(auditInsertSql(1), [auditJson(rows)]);
}

interface DbAudit {
  id: string;
  at: Date;
  user_id: string;
  action: string;
  conversation_id: string | null;
  details: Record<string, unknown>;
}

export interface AuditStore {
  /** Newest first. */
  list(filter: AuditFilter): Promise<StoredAuditEvent[]>;
}

export function createAuditStore(pool: Pool): AuditStore {
  return {
    async list(f) {
      const { rows } = await pool.query<DbAudit>(
        `SELECT id::text, at, user_id, action, conversation_id, details FROM audit_events
          WHERE ($1::text IS NULL OR user_id = $1)
            AND ($2::text IS NULL OR action = $2)
            AND ($3::timestamptz IS NULL OR at >= $3)
            AND ($4::timestamptz IS NULL OR at < $4)
            AND ($5::bigint IS NULL OR audit_events.id < $5)
          ORDER BY audit_events.id DESC
          LIMIT $6`,
        [f.userId ?? null, f.action ?? null, f.since ?? null, f.until ?? null, f.beforeId?.toString() ?? null, f.limit],
      );
      return rows.map((r) => ({
        id: r.id,
        at: r.at,
        userId: r.user_id,
        action: r.action,
        conversationId: r.conversation_id,
        details: r.details,
      }));
    },
  };
}
