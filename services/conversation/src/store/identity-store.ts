/**
 * Users and their bearer tokens (migration 007) for AdminService and IdentityService. Tokens are
 * kept as the SHA-256 of their secret (generated here, returned once). One statement per call; each
 * change writes its audit row (migration 010) in that statement, so it never commits without it.
 */
import { randomBytes } from 'node:crypto';
import type { Pool } from 'pg';
import { generateToken, hashToken } from '@bedrock/platform/server';
import { clientDetails, type AuditActor } from './audit-store.ts';

export type Role = 'user' | 'admin';

export interface UserRow {
  readonly id: string;
  readonly displayName: string;
  readonly role: Role;
  readonly createdAt: Date;
  readonly disabledAt: Date | null;
}

export interface TokenRow {
  readonly id: string;
  readonly userId: string;
  readonly label: string;
  readonly createdAt: Date;
  readonly expiresAt: Date | null;
  readonly revokedAt: Date | null;
  readonly lastUsedAt: Date | null;
}

/** What a token or a user id stands for now. */
export type Verdict =
  | { readonly status: 'ok'; readonly userId: string; readonly role: Role; readonly expiresAt: Date | null }
  | { readonly status: 'unknown' | 'revoked' | 'expired' | 'user_disabled'; readonly userId?: string };

export interface IdentityStore {
  /** `exists` when the id is taken. */
  addUser(user: { id: string; displayName: string; role: Role }, actor: AuditActor): Promise<UserRow | 'exists'>;
  listUsers(): Promise<UserRow[]>;
  /** Sets disabled_at (kept from the first disable); undefined for an unknown id. */
  disableUser(id: string, actor: AuditActor): Promise<UserRow | undefined>;
  /** A new token for an existing user: the row and the secret (shown once). */
  issueToken(
    userId: string,
    label: string,
    expiresInSeconds: number,
    actor: AuditActor,
  ): Promise<{ row: TokenRow; secret: string } | 'no_user' | 'disabled'>;
  /** Newest first; one user's when `userId` is given. */
  listTokens(userId?: string): Promise<TokenRow[]>;
  /** Sets revoked_at (kept from the first revoke); undefined for an unknown id. */
  revokeToken(id: string, actor: AuditActor): Promise<TokenRow | undefined>;
  /** The user of a token, by its SHA-256; notes its use (at most once a minute per token). */
  verifyToken(sha256: Uint8Array): Promise<Verdict>;
  /** A user by id; with `create`, an unknown one is added with the role `user` (audited as added by themselves, `by: first_sign_in`). */
  resolveUser(id: string, create: { displayName: string } | undefined): Promise<Verdict & { readonly created?: boolean }>;
}

interface DbUser {
  id: string;
  display_name: string;
  role: Role;
  created_at: Date;
  disabled_at: Date | null;
}

interface DbToken {
  id: string;
  user_id: string;
  label: string;
  created_at: Date;
  expires_at: Date | null;
  revoked_at: Date | null;
  last_used_at: Date | null;
}

const USER_COLUMNS = 'id, display_name, role, created_at, disabled_at';
const qualified = (table: string, columns: string) =>
  columns
    .split(', ')
    .map((c) => `${table}.${c}`)
    .join(', ');

/**
 * The audited UPDATE of a stamp set once (disabling a user, revoking a token): sets `stamp` of
 * row $1 unless set already (`upd.already` says which), inserts the audit row that `auditSelect`
 * selects FROM upd, and returns `columns`; one statement, so neither commits without the other.
 */
const stampOnceAudited = (table: string, alias: string, stamp: string, columns: string, auditSelect: string) =>
  `WITH prev AS (SELECT id, ${stamp} FROM ${table} WHERE id = $1),
        upd AS (
          UPDATE ${table} ${alias} SET ${stamp} = COALESCE(${alias}.${stamp}, now()) FROM prev WHERE ${alias}.id = prev.id
          RETURNING ${qualified(alias, columns)}, prev.${stamp} IS NOT NULL AS already),
        a AS (
          INSERT INTO audit_events (user_id, action, details)
          ${auditSelect})
   SELECT ${columns} FROM upd`;

const TOKEN_COLUMNS = 'id, user_id, label, created_at, expires_at, revoked_at, last_used_at';

const userOf = (r: DbUser): UserRow => ({
  id: r.id,
  displayName: r.display_name,
  role: r.role,
  createdAt: r.created_at,
  disabledAt: r.disabled_at,
});
const tokenOf = (r: DbToken): TokenRow => ({
  id: r.id,
  userId: r.user_id,
  label: r.label,
  createdAt: r.created_at,
  expiresAt: r.expires_at,
  revokedAt: r.revoked_at,
  lastUsedAt: r.last_used_at,
});

/** How often a token's last_used_at is written at most (a verification every second would otherwise write every second). */
const LAST_USED_RESOLUTION = '1 minute';

export function createIdentityStore(pool: Pool): IdentityStore {
  return {
    async addUser({ id, displayName, role }, actor) {
      const details = { ...clientDetails(actor), user_id: id, role, display_name: displayName };
      const { rows } = await pool.query<DbUser>(
        `WITH ins AS (
           INSERT INTO users (id, display_name, role) VALUES ($1, $2, $3) ON CONFLICT (id) DO NOTHING RETURNING ${USER_COLUMNS}
         ), a AS (
           INSERT INTO audit_events (user_id, action, details) SELECT $4, 'user_added', $5::jsonb FROM ins
         )
         SELECT * FROM ins`,
        [id, displayName, role, actor.userId, JSON.stringify(details)],
      );
      return rows[0] ? userOf(rows[0]) : 'exists';
    },
    async listUsers() {
      const { rows } = await pool.query<DbUser>(`SELECT ${USER_COLUMNS} FROM users ORDER BY created_at, id`);
      return rows.map(userOf);
    },
    async disableUser(id, actor) {
      // Every disable is recorded; one of a user disabled already says so.
      const { rows } = await pool.query<DbUser>(
        stampOnceAudited(
          'users',
          'u',
          'disabled_at',
          USER_COLUMNS,
          `SELECT $2, 'user_disabled', $3::jsonb || jsonb_build_object('already_disabled', upd.already) FROM upd`,
        ),
        [id, actor.userId, JSON.stringify({ ...clientDetails(actor), user_id: id })],
      );
      return rows[0] && userOf(rows[0]);
    },
    async issueToken(userId, label, expiresInSeconds, actor) {
      const secret = generateToken();
      const id = `tok_${randomBytes(9).toString('base64url')}`;
      // Inserted only for an existing, enabled user; the SELECT tells which refusal it was.
      const { rows } = await pool.query<DbToken & { inserted: boolean; disabled: boolean | null }>(
        `WITH u AS (SELECT id, disabled_at IS NOT NULL AS disabled FROM users WHERE id = $2),
              ins AS (
                INSERT INTO user_tokens (id, user_id, token_sha256, label, expires_at)
                SELECT $1, u.id, $3, $4, CASE WHEN $5::bigint > 0 THEN now() + make_interval(secs => $5::bigint) END
                  FROM u WHERE NOT u.disabled
                RETURNING ${TOKEN_COLUMNS}),
              a AS (
                INSERT INTO audit_events (user_id, action, details)
                SELECT $6, 'token_issued', $7::jsonb || jsonb_build_object('token_id', ins.id, 'expires_at', ins.expires_at) FROM ins)
         SELECT ins.*, (ins.id IS NOT NULL) AS inserted, u.disabled FROM u LEFT JOIN ins ON true`,
        [
          id,
          userId,
          Buffer.from(hashToken(secret), 'hex'),
          label,
          expiresInSeconds,
          actor.userId,
          JSON.stringify({ ...clientDetails(actor), user_id: userId, label }),
        ],
      );
      const row = rows[0];
      if (!row) return 'no_user';
      if (!row.inserted) return 'disabled';
      return { row: tokenOf(row), secret };
    },
    async listTokens(userId) {
      const { rows } = await pool.query<DbToken>(
        `SELECT ${TOKEN_COLUMNS} FROM user_tokens WHERE $1::text IS NULL OR user_id = $1 ORDER BY created_at DESC, id`,
        [userId ?? null],
      );
      return rows.map(tokenOf);
    },
    async revokeToken(id, actor) {
      // Every revoke is recorded; one of a token revoked already says so.
      const { rows } = await pool.query<DbToken>(
        stampOnceAudited(
          'user_tokens',
          't',
          'revoked_at',
          TOKEN_COLUMNS,
          `SELECT $2, 'token_revoked', $3::jsonb || jsonb_build_object('token_id', upd.id, 'user_id', upd.user_id, 'already_revoked', upd.already)
             FROM upd`,
        ),
        [id, actor.userId, JSON.stringify(clientDetails(actor))],
      );
      return rows[0] && tokenOf(rows[0]);
    },
    async verifyToken(sha256) {
      const { rows } = await pool.query<{
        id: string;
        user_id: string;
        role: Role;
        expires_at: Date | null;
        expired: boolean;
        revoked: boolean;
        disabled: boolean;
        stale_use: boolean;
      }>(
        `SELECT t.id, t.user_id, u.role, t.expires_at,
                t.expires_at IS NOT NULL AND t.expires_at <= now() AS expired,
                t.revoked_at IS NOT NULL AS revoked,
                u.disabled_at IS NOT NULL AS disabled,
                t.last_used_at IS NULL OR t.last_used_at < now() - interval '${LAST_USED_RESOLUTION}' AS stale_use
           FROM user_tokens t JOIN users u ON u.id = t.user_id
          WHERE t.token_sha256 = $1`,
        [Buffer.from(sha256)],
      );
      const r = rows[0];
      if (!r) return { status: 'unknown' };
      if (r.revoked) return { status: 'revoked', userId: r.user_id };
      if (r.expired) return { status: 'expired', userId: r.user_id };
      if (r.disabled) return { status: 'user_disabled', userId: r.user_id };
      if (r.stale_use) await pool.query('UPDATE user_tokens SET last_used_at = now() WHERE id = $1', [r.id]);
      return { status: 'ok', userId: r.user_id, role: r.role, expiresAt: r.expires_at };
    },
    async resolveUser(id, create) {
      if (create) {
        const { rows } = await pool.query<DbUser & { created: boolean }>(
          `WITH ins AS (
             INSERT INTO users (id, display_name, role) VALUES ($1, $2, 'user') ON CONFLICT (id) DO NOTHING
             RETURNING ${USER_COLUMNS}, true AS created),
           a AS (
             INSERT INTO audit_events (user_id, action, details)
             SELECT ins.id, 'user_added', jsonb_build_object('user_id', ins.id, 'role', 'user', 'display_name', ins.display_name, 'by', 'first_sign_in')
               FROM ins)
           SELECT * FROM ins
           UNION ALL
           SELECT ${USER_COLUMNS}, false AS created FROM users WHERE id = $1 AND NOT EXISTS (SELECT 1 FROM ins)`,
          [id, create.displayName],
        );
        const r = rows[0];
        // No row: another sign-in added the user while this statement ran (its snapshot
        // predates that commit); the plain read below sees it.
        if (r) {
          return r.disabled_at
            ? { status: 'user_disabled', userId: r.id }
            : { status: 'ok', userId: r.id, role: r.role, expiresAt: null, created: r.created };
        }
      }
      const { rows } = await pool.query<DbUser>(`SELECT ${USER_COLUMNS} FROM users WHERE id = $1`, [id]);
      const r = rows[0];
      if (!r) return { status: 'unknown' };
      return r.disabled_at ? { status: 'user_disabled', userId: r.id } : { status: 'ok', userId: r.id, role: r.role, expiresAt: null };
    },
  };
}
