/**
 * The editor's MCP servers of an ACP session (`session/new` and `session/load` `mcpServers`):
 * each stdio server becomes a server of that one conversation (McpService, `conversation_id`),
 * run like any other by the tool-runner, in the sandbox (docs/mcp.md); its command must exist
 * where the tools run. HTTP and SSE servers are not supported (the agent says so at
 * `initialize`) and are skipped with a note.
 */
import { Code, ConnectError, type Client } from '@connectrpc/connect';
import type { McpService } from '@bedrock/contracts';

export type McpClient = Client<typeof McpService>;

/** An ACP server name as a Bedrock one: a-z, 0-9 and `-`, 1 to 32 characters. */
export function serverName(name: string): string {
  const clean = name
    .toLowerCase()
    .replace(/[^a-z0-9-]+/g, '-')
    .replace(/-{2,}/g, '-')
    .slice(0, 32)
    .replace(/^-+|-+$/g, '');
  return clean || 'editor';
}

interface EditorServer {
  readonly name: string;
  readonly command: string;
  readonly args: string[];
  readonly env: Record<string, string>;
}

/** The stdio servers of `mcpServers`, and the names of those skipped. */
export function stdioServers(servers: unknown): { stdio: EditorServer[]; skipped: string[] } {
  const stdio: EditorServer[] = [];
  const skipped: string[] = [];
  for (const s of Array.isArray(servers) ? (servers as Record<string, unknown>[]) : []) {
    const name = typeof s.name === 'string' ? s.name : '';
    if ((s.type !== undefined && s.type !== 'stdio') || typeof s.command !== 'string') {
      skipped.push(name || '(unnamed)');
      continue;
    }
    const env: Record<string, string> = {};
    for (const v of Array.isArray(s.env) ? (s.env as { name?: unknown; value?: unknown }[]) : []) {
      if (typeof v.name === 'string' && typeof v.value === 'string') env[v.name] = v.value;
    }
    const args = Array.isArray(s.args) ? (s.args as unknown[]).filter((a): a is string => typeof a === 'string') : [];
    stdio.push({ name: serverName(name), command: s.command, args, env });
  }
  return { stdio, skipped };
}

/**
 * Makes the session's conversation have exactly the editor's stdio servers (replacing one of the
 * same name). A server the API refuses is noted and left out: the session works without it.
 */
export async function attachEditorServers(
  mcp: McpClient,
  conversationId: string,
  servers: unknown,
  note: (text: string) => void,
): Promise<void> {
  const { stdio, skipped } = stdioServers(servers);
  if (skipped.length) note(`MCP servers other than stdio are not supported, skipped: ${skipped.join(', ')}`);
  for (const s of stdio) {
    const add = () => mcp.addMcpServer({ conversationId, ...s });
    try {
      try {
        await add();
      } catch (err) {
        if (ConnectError.from(err).code !== Code.AlreadyExists) throw err;
        // Loaded again: the editor's definition now wins.
        await mcp.removeMcpServer({ conversationId, name: s.name });
        await add();
      }
    } catch (err) {
      note(`MCP server ${s.name} of session ${conversationId} not added: ${ConnectError.from(err).rawMessage}`);
    }
  }
}
