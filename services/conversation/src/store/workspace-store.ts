/**
 * Workspaces' records and each user's tool uid (migration 013; docs/workspaces.md). The files
 * live on the tool-runners' storage; this store keeps who owns what, its name and its path.
 */
import type { Pool, PoolClient } from 'pg';

export type WorkspaceState = 'preparing' | 'ready';

export interface WorkspaceRow {
  readonly id: string;
  readonly ownerId: string;
  readonly name: string;
  /** '' until the storage has made it. */
  readonly path: string;
  readonly origin: string;
  readonly state: WorkspaceState;
  readonly quotaBytes: number;
  readonly quotaInodes: number;
  readonly requestId: string | null;
  readonly createdAt: Date;
  readonly lastUsedAt: Date;
  /** Conversations created in it (sub-agents not counted). */
  readonly conversations: number;
}

export interface NewWorkspace {
  readonly id: string;
  readonly ownerId: string;
  readonly name: string;
  readonly origin: string;
  readonly quotaBytes: number;
  readonly quotaInodes: number;
  readonly requestId: string | null;
}

/** An inclusive range of uids (BEDROCK_TOOL_UIDS). */
export interface UidRange {
  readonly first: number;
  readonly last: number;
}

export class UidRangeExhaustedError extends Error {}

export interface WorkspaceStore {
  /** The user's tool uid, allocated from `range` at the first call (never reused). */
  toolUid(userId: string, range: UidRange): Promise<number>;
  /** Inserts a `preparing` row; null when the owner already has a workspace of that name. */
  insert(input: NewWorkspace): Promise<WorkspaceRow | null>;
  markReady(id: string, path: string): Promise<WorkspaceRow | null>;
  /** By id or name, of this owner only. */
  find(ownerId: string, idOrName: string): Promise<WorkspaceRow | null>;
  list(ownerId: string): Promise<WorkspaceRow[]>;
  count(ownerId: string): Promise<number>;
  /** Deletes the row when no conversation uses it; false when one does (or it is gone). */
  remove(id: string): Promise<boolean>;
  /** Ids of the user-initiated conversations created in it. */
  conversationIds(id: string): Promise<string[]>;
}

interface WorkspaceRowDb {
  id: string;
  owner_id: string;
  name: string;
  path: string;
  origin: string;
  state: WorkspaceState;
  quota_bytes: string;
  quota_inodes: string;
  request_id: string | null;
  created_at: Date;
  last_used_at: Date;
  conversations?: string;
}

function toRow(row: WorkspaceRowDb): WorkspaceRow {
  return {
    id: row.id,
    ownerId: row.owner_id,
    name: row.name,
    path: row.path,
    origin: row.origin,
    state: row.state,
    quotaBytes: Number(row.quota_bytes),
    quotaInodes: Number(row.quota_inodes),
    requestId: row.request_id,
    createdAt: row.created_at,
    lastUsedAt: row.last_used_at,
    conversations: Number(row.conversations ?? 0),
  };
}

/**
 * A workspace with its conversations' count, and its last use: its creation or the last change of
 * a conversation in it (a tool's result is one), derived rather than written on the hot path.
 */
const WITH_COUNT = `SELECT w.id, w.owner_id, w.name, w.path, w.origin, w.state, w.quota_bytes, w.quota_inodes, w.request_id, w.created_at,
    GREATEST(w.last_used_at, (SELECT max(c.updated_at) FROM conversations c WHERE c.workspace_id = w.id)) AS last_used_at,
    (SELECT count(*) FROM conversations c WHERE c.workspace_id = w.id AND c.parent_id IS NULL) AS conversations
  FROM workspaces w`;

export function createWorkspaceStore(pool: Pool): WorkspaceStore {
  async function allocateUid(client: Pool | PoolClient, userId: string, range: UidRange): Promise<number> {
    // The next uid after the highest given; two users at once may pick the same one, and the
    // UNIQUE constraint sends the loser round again.
    for (let attempt = 0; attempt < 5; attempt++) {
      try {
        const { rows } = await client.query<{ uid: number }>(
          `INSERT INTO user_tool_ids (user_id, uid)
           SELECT $1, GREATEST($2::integer, COALESCE((SELECT max(uid) + 1 FROM user_tool_ids WHERE uid BETWEEN $2 AND $3), $2))
           ON CONFLICT (user_id) DO UPDATE SET user_id = EXCLUDED.user_id
           RETURNING uid`,
          [userId, range.first, range.last],
        );
        const uid = rows[0]!.uid;
        if (uid > range.last) {
          await client.query('DELETE FROM user_tool_ids WHERE user_id = $1 AND uid = $2', [userId, uid]);
          throw new UidRangeExhaustedError(
            `every tool uid of BEDROCK_TOOL_UIDS (${range.first}-${range.last}) is taken: widen the range to give a new user their own uid`,
          );
        }
        return uid;
      } catch (err) {
        if ((err as { code?: string }).code !== '23505') throw err;
      }
    }
    throw new Error('could not allocate a tool uid after 5 attempts');
  }

  return {
    async toolUid(userId, range) {
      const { rows } = await pool.query<{ uid: number }>('SELECT uid FROM user_tool_ids WHERE user_id = $1', [userId]);
      return rows[0]?.uid ?? allocateUid(pool, userId, range);
    },

    async insert(input) {
      const { rows } = await pool.query<WorkspaceRowDb>(
        `INSERT INTO workspaces (id, owner_id, name, origin, quota_bytes, quota_inodes, request_id)
         VALUES ($1, $2, $3, $4, $5, $6, $7)
         ON CONFLICT (owner_id, name) DO NOTHING
         RETURNING *`,
        [input.id, input.ownerId, input.name, input.origin, input.quotaBytes, input.quotaInodes, input.requestId],
      );
      return rows[0] ? toRow(rows[0]) : null;
    },

    async markReady(id, path) {
      const { rows } = await pool.query<WorkspaceRowDb>(
        `UPDATE workspaces SET state = 'ready', path = $2, last_used_at = now() WHERE id = $1 RETURNING *`,
        [id, path],
      );
      return rows[0] ? toRow(rows[0]) : null;
    },

    async find(ownerId, idOrName) {
      const { rows } = await pool.query<WorkspaceRowDb>(`${WITH_COUNT} WHERE w.owner_id = $1 AND (w.id = $2 OR w.name = $2)`, [
        ownerId,
        idOrName,
      ]);
      return rows[0] ? toRow(rows[0]) : null;
    },

    async list(ownerId) {
      const { rows } = await pool.query<WorkspaceRowDb>(`${WITH_COUNT} WHERE w.owner_id = $1 ORDER BY w.name`, [ownerId]);
      return rows.map(toRow);
    },

    async count(ownerId) {
      const { rows } = await pool.query<{ n: string }>('SELECT count(*) AS n FROM workspaces WHERE owner_id = $1', [ownerId]);
      return Number(rows[0]?.n ?? 0);
    },

    async remove(id) {
      const { rowCount } = await pool.query(
        'DELETE FROM workspaces w WHERE w.id = $1 AND NOT EXISTS (SELECT 1 FROM conversations c WHERE c.workspace_id = w.id)',
        [id],
      );
      return (rowCount ?? 0) > 0;
    },

    async conversationIds(id) {
      const { rows } = await pool.query<{ id: string }>(
        'SELECT id FROM conversations WHERE workspace_id = $1 AND parent_id IS NULL ORDER BY created_at',
        [id],
      );
      return rows.map((r) => r.id);
    },
  };
}
