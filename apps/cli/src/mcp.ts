/**
 * `bedrock mcp add|ls|rm`: the caller's MCP servers, through web-bff's McpService (docs/mcp.md).
 * `mcp add NAME -- CMD ARGS...`: everything after NAME is the server's command line (`--` keeps
 * its options from being read as bedrock's).
 */
import { createClient } from '@connectrpc/connect';
import { toJson } from '@bufbuild/protobuf';
import { AddMcpServerResponseSchema, ListMcpServersResponseSchema, McpService, type McpServer } from '@bedrock/contracts';
import { apiTransport } from './connection.ts';
import { EXIT, UsageError } from './exit-codes.ts';
import type { Output } from './output.ts';
import { USAGE } from './usage.ts';

/** The rows of `mcp ls`: name, source, command line. */
export function renderMcpServers(servers: readonly McpServer[]): string {
  const rows = [
    ['NAME', 'SOURCE', 'COMMAND'],
    ...servers.map((s) => [s.name, s.trusted ? `${s.source} (trusted)` : s.source, [s.command, ...s.args].join(' ')]),
  ];
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)));
  return rows.map((r) => `${r.map((cell, i) => (i === r.length - 1 ? cell : cell.padEnd(widths[i]!))).join('  ')}\n`).join('');
}

export async function mcp(rest: string[], json: boolean, env: NodeJS.ProcessEnv, output: Output): Promise<number> {
  const client = createClient(McpService, apiTransport(env));
  const [sub, ...args] = rest;
  const line = (value: unknown) => `${JSON.stringify(value)}\n`;
  switch (sub) {
    case 'add': {
      const [name, command, ...commandArgs] = args;
      if (!name || !command) throw new UsageError(`expected mcp add NAME -- COMMAND [ARGS...]\n\n${USAGE}`);
      const res = await client.addMcpServer({ name, command, args: commandArgs });
      output.out(json ? line(toJson(AddMcpServerResponseSchema, res)) : `added MCP server ${name}: its tools are mcp__${name}__TOOL\n`);
      return EXIT.ok;
    }
    case 'ls': {
      if (args.length) throw new UsageError(`expected no arguments after mcp ls\n\n${USAGE}`);
      const res = await client.listMcpServers({});
      if (json) output.out(line(toJson(ListMcpServersResponseSchema, res)));
      else output.out(res.servers.length ? renderMcpServers(res.servers) : 'no MCP servers (bedrock mcp add NAME -- COMMAND ARGS...)\n');
      return EXIT.ok;
    }
    case 'rm': {
      if (args.length !== 1) throw new UsageError(`expected mcp rm NAME\n\n${USAGE}`);
      await client.removeMcpServer({ name: args[0]! });
      output.out(json ? line({}) : `removed MCP server ${args[0]}\n`);
      return EXIT.ok;
    }
    default:
      throw new UsageError(`expected mcp add, mcp ls or mcp rm\n\n${USAGE}`);
  }
}

/**
 * `bedrock settings ID --mcp-off NAME --mcp-on NAME`: turns the conversation's MCP servers off
 * or on for it alone, then shows its servers and their state (not with --json: the settings
 * command prints the conversation). A name both turned on and off is a usage error.
 */
export async function setConversationMcp(
  conversationId: string,
  on: readonly string[],
  off: readonly string[],
  json: boolean,
  env: NodeJS.ProcessEnv,
  output: Output,
): Promise<void> {
  const both = on.find((n) => off.includes(n));
  if (both !== undefined) throw new UsageError(`--mcp-on ${both} and --mcp-off ${both} contradict each other`);
  const client = createClient(McpService, apiTransport(env));
  for (const name of off) await client.setMcpServerEnabled({ conversationId, name, enabled: false });
  for (const name of on) await client.setMcpServerEnabled({ conversationId, name, enabled: true });
  if (json) return;
  const { servers } = await client.listMcpServers({ conversationId });
  output.out(`MCP servers: ${servers.length ? servers.map((s) => (s.disabled ? `${s.name} (off)` : s.name)).join(', ') : 'none'}\n`);
}
