/**
 * Per-user limits, spend, reservations and message rate as stored (spend/limits.ts decides
 * with them): user_limits, user_daily_spend, budget_reservations, user_message_rate, and the
 * per-user advisory locks that keep the counts right across replicas.
 */
import type { Pool, PoolClient } from 'pg';
import { BUSY_STATE_SQL, inTransaction } from './conversation-rows.ts';
import { auditInsertSql, auditJson, type AuditRow } from './audit-store.ts';

/** A user_limits row (NULL: the service's default). */
export interface LimitsRow {
  daily_budget_micros: string | null;
  monthly_budget_micros: string | null;
  max_busy_conversations: number | null;
  messages_per_minute: number | null;
  max_conversations: number | null;
}

const USAGE_SQL = `SELECT
  (SELECT row_to_json(l) FROM user_limits l WHERE l.user_id = $1) AS limits,
  (SELECT COALESCE(sum(cost_micros), 0) FROM user_daily_spend WHERE user_id = $1 AND day = $2::date)::text AS today,
  (SELECT COALESCE(sum(cost_micros), 0) FROM user_daily_spend WHERE user_id = $1 AND day >= $3::date AND day <= $2::date)::text AS month,
  (SELECT count(*) FROM conversations WHERE owner_id = $1 AND parent_id IS NULL AND ${BUSY_STATE_SQL})::int AS busy,
  (SELECT COALESCE(sum(micros), 0) FROM budget_reservations WHERE user_id = $1 AND expires_at > $4 AND conversation_id <> $5)::text AS reserved,
  (SELECT count(*) FROM conversations WHERE owner_id = $1 AND parent_id IS NULL)::int AS conversations,
  (SELECT json_build_object(
     'today', json_build_object('input', COALESCE(sum(input_tokens) FILTER (WHERE day = $2::date), 0)::text,
                                'output', COALESCE(sum(output_tokens) FILTER (WHERE day = $2::date), 0)::text,
                                'cacheCreation', COALESCE(sum(cache_creation_tokens) FILTER (WHERE day = $2::date), 0)::text,
                                'cacheRead', COALESCE(sum(cache_read_tokens) FILTER (WHERE day = $2::date), 0)::text),
     'month', json_build_object('input', COALESCE(sum(input_tokens), 0)::text,
                                'output', COALESCE(sum(output_tokens), 0)::text,
                                'cacheCreation', COALESCE(sum(cache_creation_tokens), 0)::text,
                                'cacheRead', COALESCE(sum(cache_read_tokens), 0)::text))
     FROM user_daily_spend WHERE user_id = $1 AND day >= $3::date AND day <= $2::date) AS tokens`;

/** What a reservation needs (no counts of conversations): read before every LLM request. */
const BUDGET_SQL = `SELECT
  (SELECT row_to_json(l) FROM user_limits l WHERE l.user_id = $1) AS limits,
  (SELECT COALESCE(sum(cost_micros), 0) FROM user_daily_spend WHERE user_id = $1 AND day = $2::date)::text AS today,
  (SELECT COALESCE(sum(cost_micros), 0) FROM user_daily_spend WHERE user_id = $1 AND day >= $3::date AND day <= $2::date)::text AS month,
  0 AS busy,
  (SELECT COALESCE(sum(micros), 0) FROM budget_reservations WHERE user_id = $1 AND expires_at > $4 AND conversation_id <> $5)::text AS reserved,
  0 AS conversations,
  NULL AS tokens`;

export interface TokenTotalsRow {
  readonly input: string;
  readonly output: string;
  readonly cacheCreation: string;
  readonly cacheRead: string;
}

/** Advisory lock space of the per-user busy-count lock (distinct from the relay's). */
const USER_LOCK_SPACE = 0x4c494d; // 'LIM'
/** Advisory lock space of the per-user reservation lock (transaction-scoped). */
const RESERVE_LOCK_SPACE = 0x524553; // 'RES'

/** What a usage read is for: `day` and `monthStart` are UTC dates (YYYY-MM-DD); `except`, a conversation whose hold is not counted. */
export interface UsageRead {
  readonly userId: string;
  readonly day: string;
  readonly monthStart: string;
  readonly now: Date;
  readonly except: string;
}

/** A user's figures as one statement reads them. */
export interface UsageRow {
  readonly limits: LimitsRow | null;
  readonly today: string;
  readonly month: string;
  readonly busy: number;
  readonly reserved: string;
  readonly conversations: number;
  readonly tokens: { readonly today: TokenTotalsRow; readonly month: TokenTotalsRow } | null;
}

/** A hold of budget for an LLM request (one per conversation). */
export interface ReservationRow {
  readonly conversationId: string;
  readonly userId: string;
  readonly requestId: string;
  readonly micros: number;
  readonly expiresAt: Date;
}

/** Limits to set; null leaves one as it is. */
export interface LimitValues {
  readonly dailyBudgetMicros: number | null;
  readonly monthlyBudgetMicros: number | null;
  readonly maxBusyConversations: number | null;
  readonly messagesPerMinute: number | null;
  readonly maxConversations: number | null;
}

export interface UserLimitsStore {
  /** The user's limits, spend, holds and counts; `budgetOnly`: what a reservation needs (no counts, no tokens). */
  readUsage(read: UsageRead, budgetOnly: boolean, client?: PoolClient): Promise<UsageRow>;
  /** Runs `fn` holding the user's session advisory lock, on a connection of its own for that time. */
  withUserLock<T>(userId: string, fn: () => Promise<T>): Promise<T>;
  /** Runs `work` in a transaction of its own. */
  inTransaction<T>(work: (client: PoolClient) => Promise<T>): Promise<T>;
  /** Takes the user's reservation lock until `client`'s transaction ends. */
  lockReservations(client: PoolClient, userId: string): Promise<void>;
  /** Holds budget for a conversation's request, replacing its previous hold. */
  holdReservation(client: PoolClient, hold: ReservationRow): Promise<void>;
  /** Takes one message of the user's `minute`, or says the minute is full (one statement; replicas share the row). */
  takeMessage(userId: string, minute: Date, perMinute: number): Promise<boolean>;
  /** Deletes the user's limits (back to the defaults) and writes `audit`, in one statement. */
  resetLimits(userId: string, audit: AuditRow): Promise<void>;
  /** Sets some of the user's limits and writes `audit`, in one statement. */
  setLimits(userId: string, values: LimitValues, updatedBy: string, audit: AuditRow): Promise<void>;
}

export function createUserLimitsStore(pool: Pool): UserLimitsStore {
  return {
    async readUsage(read, budgetOnly, client) {
      const { rows } = await (client ?? pool).query<UsageRow>(budgetOnly ? BUDGET_SQL : USAGE_SQL, [
        read.userId,
        read.day,
        read.monthStart,
        read.now,
        read.except,
      ]);
      return rows[0]!;
    },

    async withUserLock(userId, fn) {
      const client = await pool.connect();
      try {
        await client.query('SELECT pg_advisory_lock($1, hashtext($2))', [USER_LOCK_SPACE, userId]);
        try {
          return await fn();
        } finally {
          await client.query('SELECT pg_advisory_unlock($1, hashtext($2))', [USER_LOCK_SPACE, userId]);
        }
      } finally {
        client.release();
      }
    },

    inTransaction: (work) => inTransaction(pool, work),

    async lockReservations(client, userId) {
      await client.query('SELECT pg_advisory_xact_lock($1, hashtext($2))', [RESERVE_LOCK_SPACE, userId]);
    },

    async holdReservation(client, r) {
      await client.query(
        `INSERT INTO budget_reservations (conversation_id, user_id, request_id, micros, expires_at) VALUES ($1, $2, $3, $4, $5)
         ON CONFLICT (conversation_id) DO UPDATE
           SET user_id = EXCLUDED.user_id, request_id = EXCLUDED.request_id, micros = EXCLUDED.micros, expires_at = EXCLUDED.expires_at`,
        [r.conversationId, r.userId, r.requestId, r.micros, r.expiresAt],
      );
    },

    async takeMessage(userId, minute, perMinute) {
      const { rowCount } = await pool.query(
        `INSERT INTO user_message_rate AS r (user_id, minute, count) VALUES ($1, $2, 1)
         ON CONFLICT (user_id) DO UPDATE
           SET minute = EXCLUDED.minute, count = CASE WHEN r.minute = EXCLUDED.minute THEN r.count + 1 ELSE 1 END
         WHERE r.minute <> EXCLUDED.minute OR r.count < $3
         RETURNING count`,
        [userId, minute, perMinute],
      );
      return rowCount === 1;
    },

    async resetLimits(userId, audit) {
      await pool.query(`WITH d AS (DELETE FROM user_limits WHERE user_id = $1), a AS (${auditInsertSql(2)}) SELECT 1`, [
        userId,
        auditJson([audit]),
      ]);
    },

    async setLimits(userId, v, updatedBy, audit) {
      await pool.query(
        `WITH u AS (
           INSERT INTO user_limits (user_id, daily_budget_micros, monthly_budget_micros, max_busy_conversations, messages_per_minute,
                                    max_conversations, updated_by)
           VALUES ($1, $2, $3, $4, $5, $6, $7)
           ON CONFLICT (user_id) DO UPDATE SET
             daily_budget_micros = COALESCE($2, user_limits.daily_budget_micros),
             monthly_budget_micros = COALESCE($3, user_limits.monthly_budget_micros),
             max_busy_conversations = COALESCE($4, user_limits.max_busy_conversations),
             messages_per_minute = COALESCE($5, user_limits.messages_per_minute),
             max_conversations = COALESCE($6, user_limits.max_conversations),
             updated_at = now(), updated_by = $7
         ), a AS (${auditInsertSql(8)}) SELECT 1`,
        [
          userId,
          v.dailyBudgetMicros,
          v.monthlyBudgetMicros,
          v.maxBusyConversations,
          v.messagesPerMinute,
          v.maxConversations,
          updatedBy,
          auditJson([audit]),
        ],
      );
    },
  };
}
