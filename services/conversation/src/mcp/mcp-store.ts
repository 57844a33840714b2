/** Each user's own MCP servers (table mcp_servers, migration 017), for all their conversations or one. */
import type pg from 'pg';
import type { McpServerConfig } from './servers.ts';

export interface McpStore {
  /** The owner's servers for all conversations, then (given one) that conversation's own. */
  list(ownerId: string, conversationId?: string): Promise<McpServerConfig[]>;
  /** False when the owner already has a server of that name there. */
  add(ownerId: string, server: McpServerConfig): Promise<boolean>;
  /** False when there was none of that name there. */
  remove(ownerId: string, name: string, conversationId?: string): Promise<boolean>;
  /** The owner's servers for all conversations, or (given one) of that conversation. */
  count(ownerId: string, conversationId?: string): Promise<number>;
  /** The names of the servers the owner turned off for this conversation (table mcp_servers_off). */
  offIn(ownerId: string, conversationId: string): Promise<Set<string>>;
  /** Turns a server off (or on again) for one conversation; idempotent. */
  setOff(ownerId: string, conversationId: string, name: string, off: boolean): Promise<void>;
}

interface Row {
  name: string;
  command: string;
  url: string;
  args: string[];
  env: Record<string, string>;
  timeout_ms: string;
  conversation_id: string;
}

export function createMcpStore(pool: pg.Pool): McpStore {
  return {
    async list(ownerId, conversationId = '') {
      const { rows } = await pool.query<Row>(
        `SELECT name, command, url, args, env, timeout_ms, conversation_id FROM mcp_servers
          WHERE owner_id = $1 AND conversation_id IN ('', $2) ORDER BY conversation_id <> '', name`,
        [ownerId, conversationId],
      );
      return rows.map((r) => ({
        name: r.name,
        command: r.command,
        ...(r.url ? { url: r.url } : {}),
        args: r.args,
        env: r.env,
        trusted: false,
        timeoutMs: Number(r.timeout_ms),
        source: 'user' as const,
        conversationId: r.conversation_id,
      }));
    },
    async add(ownerId, s) {
      const { rowCount } = await pool.query(
        `INSERT INTO mcp_servers (owner_id, conversation_id, name, command, url, args, env, timeout_ms) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
         ON CONFLICT (owner_id, conversation_id, name) DO NOTHING`,
        [ownerId, s.conversationId ?? '', s.name, s.command, s.url ?? '', JSON.stringify(s.args), JSON.stringify(s.env), s.timeoutMs],
      );
      return rowCount === 1;
    },
    async remove(ownerId, name, conversationId = '') {
      const { rowCount } = await pool.query('DELETE FROM mcp_servers WHERE owner_id = $1 AND conversation_id = $2 AND name = $3', [
        ownerId,
        conversationId,
        name,
      ]);
      return rowCount === 1;
    },
    async count(ownerId, conversationId = '') {
      const { rows } = await pool.query<{ n: string }>(
        'SELECT count(*) AS n FROM mcp_servers WHERE owner_id = $1 AND conversation_id = $2',
        [ownerId, conversationId],
      );
      return Number(rows[0]?.n ?? 0);
    },
    async offIn(ownerId, conversationId) {
      if (conversationId === '') return new Set();
      const { rows } = await pool.query<{ name: string }>('SELECT name FROM mcp_servers_off WHERE owner_id = $1 AND conversation_id = $2', [
        ownerId,
        conversationId,
      ]);
      return new Set(rows.map((r) => r.name));
    },
    async setOff(ownerId, conversationId, name, off) {
      if (off) {
        await pool.query(
          'INSERT INTO mcp_servers_off (owner_id, conversation_id, name) VALUES ($1, $2, $3) ON CONFLICT (owner_id, conversation_id, name) DO NOTHING',
          [ownerId, conversationId, name],
        );
      } else {
        await pool.query('DELETE FROM mcp_servers_off WHERE owner_id = $1 AND conversation_id = $2 AND name = $3', [
          ownerId,
          conversationId,
          name,
        ]);
      }
    },
  };
}
