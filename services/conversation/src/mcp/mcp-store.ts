/** Each user's own MCP servers (table mcp_servers, migration 020). */
import type pg from 'pg';
import type { McpServerConfig } from './servers.ts';

export interface McpStore {
  list(ownerId: string): Promise<McpServerConfig[]>;
  /** False when the owner already has a server of that name. */
  add(ownerId: string, server: McpServerConfig): Promise<boolean>;
  /** False when there was none of that name. */
  remove(ownerId: string, name: string): Promise<boolean>;
  count(ownerId: string): Promise<number>;
}

interface Row {
  name: string;
  command: string;
  args: string[];
  env: Record<string, string>;
  timeout_ms: string;
}

export function createMcpStore(pool: pg.Pool): McpStore {
  return {
    async list(ownerId) {
      const { rows } = await pool.query<Row>(
        'SELECT name, command, args, env, timeout_ms FROM mcp_servers WHERE owner_id = $1 ORDER BY name',
        [ownerId],
      );
      return rows.map((r) => ({
        name: r.name,
        command: r.command,
        args: r.args,
        env: r.env,
        trusted: false,
        timeoutMs: Number(r.timeout_ms),
        source: 'user' as const,
      }));
    },
    async add(ownerId, s) {
      const { rowCount } = await pool.query(
        `INSERT INTO mcp_servers (owner_id, name, command, args, env, timeout_ms) VALUES ($1, $2, $3, $4, $5, $6)
         ON CONFLICT (owner_id, name) DO NOTHING`,
        [ownerId, s.name, s.command, JSON.stringify(s.args), JSON.stringify(s.env), s.timeoutMs],
      );
      return rowCount === 1;
    },
    async remove(ownerId, name) {
      const { rowCount } = await pool.query('DELETE FROM mcp_servers WHERE owner_id = $1 AND name = $2', [ownerId, name]);
      return rowCount === 1;
    },
    async count(ownerId) {
      const { rows } = await pool.query<{ n: string }>('SELECT count(*) AS n FROM mcp_servers WHERE owner_id = $1', [ownerId]);
      return Number(rows[0]?.n ?? 0);
    },
  };
}
