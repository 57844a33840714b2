/**
 * The audit log (migration 010, docs/security.md "Audit"). Rows are only ever inserted, each in
 * the transaction of the action it records (`insertAuditRows` with that transaction's client,
 * or a CTE of the action's own statement); this module reads them for ListAuditEvents. There
 * is deliberately no function that updates or deletes a row, and the table's triggers refuse
 * both.
 */
import type { Pool, PoolClient } from 'pg';
import type { AuditRow } from '../mapping/audit-rows.ts';

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
  return JSON.stringify(rows.map((a) => ({ user_id: a.userId, action: a.action, conversation_id: a.conversationId, details: a.details })));
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
