/** Deleting a conversation tree (DeleteConversation) and a user with all their data (DeleteUser), each in one transaction. */
import type { Pool, PoolClient } from 'pg';
import { RESTING_STATE_NAMES } from '@bedrock/contracts';
import type { DeletedUserRow, DeleteResult, DeleteUserResult } from './records.ts';
import { inTransaction, toRecord, type ConversationRowDb } from './conversation-rows.ts';
import { clientDetails, insertAuditRows, type AuditActor } from './audit-store.ts';
import { claimRequest, storeOutcome, type RequestRecorder } from './request-outcomes.ts';
import { RELAY_LOCK_SPACE } from './outbox-store.ts';

export interface DeletionStore {
  /**
   * Deletes a conversation and its sub-agents at every depth in one transaction, when all of
   * them are at rest: their rows (messages and sub-agents go by ON DELETE CASCADE), outbox rows
   * and request outcomes (scoped to them, and the CreateConversation/ForkConversation outcomes
   * that created them: `createdIdOf` reads the id from a stored response). Forks of them keep
   * their link, marked `forked_from_deleted`. Every row of the tree is locked first, so an event
   * applied at the same time either finishes before (and is seen here) or finds nothing.
   * With a request recorder, the request id (scope '') is claimed and its outcome stored here.
   */
  deleteTree(
    id: string,
    ownerId: string,
    createdIdOf: (response: Uint8Array) => string | null,
    request?: RequestRecorder<{ ids: readonly string[] }>,
    actor?: AuditActor,
  ): Promise<DeleteResult>;
  /**
   * Deletes a user and their data in one transaction (DeleteUser): every conversation they own,
   * each tree as deleteTree deletes it (deleteLockedTree, with `with_user` in its audit row),
   * then the rest of their request outcomes, their rows in USER_TABLES, their tokens and the
   * users row, and a `user_deleted` audit row. Every row of every tree is locked first (in
   * deleteTree's order, so the two cannot deadlock), then the users row; a busy conversation
   * anywhere refuses it all. NOT_FOUND-like (`not_found`) when the user has neither a row nor
   * a conversation. With a request recorder, the admin's request id (scope '') is claimed and
   * its outcome stored here.
   */
  deleteUser(
    userId: string,
    actor: AuditActor,
    createdIdOf: (response: Uint8Array) => string | null,
    request?: RequestRecorder<{ ids: readonly string[]; user: DeletedUserRow | null; tokens: number }>,
  ): Promise<DeleteUserResult>;
}

/**
 * Tables with a row per user id and no foreign key to `users` (a tokens-file or OpenID Connect
 * user may have none), deleted with the user; `user_tokens` goes by its foreign key.
 */
const USER_TABLES = ['user_daily_spend', 'user_limits', 'user_message_rate'] as const;

/**
 * Deletes one tree whose rows the caller's transaction has locked and found at rest: `root`
 * (a top-level conversation) and `tree` (its rows, sub-agents at every depth, root included).
 * Its rows (messages and sub-agents go by ON DELETE CASCADE), outbox rows and request outcomes
 * (scoped to them, and the CreateConversation/ForkConversation outcomes that created them:
 * `createdIdOf` reads the id from a stored response); forks of them keep their link, marked
 * `forked_from_deleted`; a `conversation_deleted` audit row. Returns the ids, root first.
 */
async function deleteLockedTree(
  client: PoolClient,
  root: ConversationRowDb,
  tree: readonly ConversationRowDb[],
  createdIdOf: (response: Uint8Array) => string | null,
  actor: AuditActor | undefined,
  extraDetails: Record<string, unknown> = {},
): Promise<string[]> {
  const ids = [root.id, ...tree.filter((r) => r.id !== root.id).map((r) => r.id)];
  // Wait for a relay publishing their rows (outbox/relay.ts holds this lock while it does).
  for (const treeId of ids) await client.query('SELECT pg_advisory_xact_lock($1, hashtext($2))', [RELAY_LOCK_SPACE, treeId]);
  await client.query('DELETE FROM outbox WHERE conversation_id = ANY($1::text[])', [ids]);
  await client.query('DELETE FROM request_outcomes WHERE owner_id = $1 AND scope = ANY($2::text[])', [root.owner_id, ids]);
  // The outcomes of the requests that created them (scope ''): a retry would name a deleted conversation.
  const created = await client.query<{ request_id: string; response: Buffer }>(
    `SELECT request_id, response FROM request_outcomes
        WHERE owner_id = $1 AND scope = '' AND method IN ('CreateConversation', 'ForkConversation') AND response IS NOT NULL
          AND position(convert_to($2, 'UTF8') IN response) > 0`,
    [root.owner_id, root.id],
  );
  const stale = created.rows.filter((r) => createdIdOf(r.response) === root.id).map((r) => r.request_id);
  if (stale.length > 0) {
    await client.query("DELETE FROM request_outcomes WHERE owner_id = $1 AND scope = '' AND request_id = ANY($2::text[])", [
      root.owner_id,
      stale,
    ]);
  }
  await client.query(
    'UPDATE conversations SET forked_from_deleted = true, revision = revision + 1, updated_at = now() WHERE forked_from_id = ANY($1::text[])',
    [ids],
  );
  await client.query('DELETE FROM conversations WHERE id = $1', [root.id]);
  // The conversations' own MCP servers and off-switches (keyed by id, no foreign key: '' means all).
  for (const table of ['mcp_servers', 'mcp_servers_off']) {
    await client.query(`DELETE FROM ${table} WHERE owner_id = $1 AND conversation_id = ANY($2::text[])`, [root.owner_id, ids]);
  }
  // The audit row commits with the deletion (ids only: the deleted content stays deleted).
  await insertAuditRows(client, [
    {
      userId: actor?.userId ?? root.owner_id,
      action: 'conversation_deleted',
      conversationId: root.id,
      details: { ...clientDetails(actor), sub_agent_ids: ids.slice(1), ...extraDetails },
    },
  ]);
  return ids;
}

/**
 * Locks and reads the trees whose top-level rows `rootsWhere` selects, sub-agents at every depth,
 * oldest first (both deletions lock in this order, so they cannot deadlock).
 */
async function lockTrees(client: PoolClient, rootsWhere: string, params: readonly unknown[]): Promise<ConversationRowDb[]> {
  const { rows } = await client.query<ConversationRowDb>(
    `WITH RECURSIVE tree AS (
       SELECT id FROM conversations WHERE ${rootsWhere}
       UNION ALL
       SELECT c.id FROM conversations c JOIN tree t ON c.parent_id = t.id
     )
     SELECT c.* FROM conversations c WHERE c.id IN (SELECT id FROM tree) ORDER BY c.created_at, c.id FOR UPDATE`,
    [...params],
  );
  return rows;
}

/** A refusal keeps nothing: rolls back what the transaction did (a claimed request id too) and begins anew, then answers `result`. */
async function undone<T>(client: PoolClient, result: T): Promise<T> {
  await client.query('ROLLBACK');
  await client.query('BEGIN');
  return result;
}

export function createDeletionStore(pool: Pool): DeletionStore {
  return {
    async deleteTree(
      id: string,
      ownerId: string,
      createdIdOf: (response: Uint8Array) => string | null,
      request?: RequestRecorder<{ ids: readonly string[] }>,
      actor?: AuditActor,
    ): Promise<DeleteResult> {
      return inTransaction(pool, async (client) => {
        if (request) {
          const prior = await claimRequest(client, request.key);
          if (prior) return { kind: 'replayed', prior } as const;
        }
        const rows = await lockTrees(client, 'id = $1 AND owner_id = $2', [id, ownerId]);
        const root = rows.find((r) => r.id === id);
        const refuse = (result: DeleteResult) => undone(client, result);
        if (!root) return refuse({ kind: 'not_found' });
        if (root.parent_id !== null) return refuse({ kind: 'sub_agent', parentId: root.parent_id });
        const busy = rows.filter((r) => !(RESTING_STATE_NAMES as readonly string[]).includes(r.state_kind));
        if (busy.length > 0) return refuse({ kind: 'busy', busy: busy.map(toRecord) });
        const ids = await deleteLockedTree(client, root, rows, createdIdOf, actor);
        if (request) {
          const outcome = request.outcome({ ids });
          if (outcome) await storeOutcome(client, request.key, outcome);
        }
        const notifySeqs = new Map(rows.map((r) => [r.id, Number(r.notify_seq)]));
        return { kind: 'deleted', ids, record: toRecord(root), notifySeqs } as const;
      });
    },

    async deleteUser(
      userId: string,
      actor: AuditActor,
      createdIdOf: (response: Uint8Array) => string | null,
      request?: RequestRecorder<{ ids: readonly string[]; user: DeletedUserRow | null; tokens: number }>,
    ): Promise<DeleteUserResult> {
      return inTransaction(pool, async (client) => {
        if (request) {
          const prior = await claimRequest(client, request.key);
          if (prior) return { kind: 'replayed', prior } as const;
        }
        const rows = await lockTrees(client, 'owner_id = $1 AND parent_id IS NULL', [userId]);
        const users = await client.query<DeletedUserRow>(
          'SELECT id, display_name, role, created_at, disabled_at FROM users WHERE id = $1 FOR UPDATE',
          [userId],
        );
        const user = users.rows[0] ?? null;
        const refuse = (result: DeleteUserResult) => undone(client, result);
        const owned = await client.query<{ id: string }>('SELECT id FROM workspaces WHERE owner_id = $1 FOR UPDATE', [userId]);
        if (!user && rows.length === 0 && owned.rows.length === 0) return refuse({ kind: 'not_found' });
        // Each row's top-level conversation.
        const parentOf = new Map(rows.map((r) => [r.id, r.parent_id]));
        const topOf = (id: string): string => {
          let at = id;
          for (let up = parentOf.get(at); up; up = parentOf.get(at)) at = up;
          return at;
        };
        const rootOf = new Map(rows.map((r) => [r.id, topOf(r.id)]));
        const busy = rows.filter((r) => !(RESTING_STATE_NAMES as readonly string[]).includes(r.state_kind));
        if (busy.length > 0) return refuse({ kind: 'busy', busy: busy.map(toRecord), rootOf });
        const ids: string[] = [];
        for (const root of rows.filter((r) => r.parent_id === null)) {
          const tree = rows.filter((r) => rootOf.get(r.id) === root.id);
          ids.push(...(await deleteLockedTree(client, root, tree, createdIdOf, actor, { with_user: userId })));
        }
        // What is left of theirs: request outcomes of other scopes (e.g. a refused CreateConversation), spend, limits, tokens.
        await client.query('DELETE FROM request_outcomes WHERE owner_id = $1', [userId]);
        for (const table of USER_TABLES) await client.query(`DELETE FROM ${table} WHERE user_id = $1`, [userId]);
        // Their MCP servers (whose env may hold their secrets), off-switches and OAuth logins.
        for (const table of ['mcp_servers', 'mcp_servers_off', 'mcp_oauth_logins', 'mcp_oauth_pending']) {
          await client.query(`DELETE FROM ${table} WHERE owner_id = $1`, [userId]);
        }
        const tokens = await client.query('DELETE FROM user_tokens WHERE user_id = $1', [userId]);
        if (user) await client.query('DELETE FROM users WHERE id = $1', [userId]);
        // Their workspaces' records; the caller removes the files after the commit.
        await client.query('DELETE FROM workspaces WHERE owner_id = $1', [userId]);
        const workspaceIds = owned.rows.map((r) => r.id);
        // The records of their checkpoints (no foreign key): the snapshots go with the workspaces' files.
        await client.query(
          'DELETE FROM conversation_checkpoints WHERE conversation_id = ANY($1::text[]) OR workspace_id = ANY($2::text[])',
          [ids, workspaceIds],
        );
        const roots = rows.filter((r) => r.parent_id === null).length;
        await insertAuditRows(client, [
          {
            userId: actor.userId,
            action: 'user_deleted',
            conversationId: null,
            details: {
              ...clientDetails(actor),
              user_id: userId,
              had_user_row: user !== null,
              conversations: roots,
              sub_agents: ids.length - roots,
              tokens: tokens.rowCount ?? 0,
              workspaces: workspaceIds.length,
            },
          },
        ]);
        if (request) {
          const outcome = request.outcome({ ids, user, tokens: tokens.rowCount ?? 0 });
          if (outcome) await storeOutcome(client, request.key, outcome);
        }
        const notifySeqs = new Map(rows.map((r) => [r.id, Number(r.notify_seq)]));
        return { kind: 'deleted', user, ids, tokens: tokens.rowCount ?? 0, notifySeqs, workspaceIds } as const;
      });
    },
  };
}
