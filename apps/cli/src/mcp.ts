/**
 * `bedrock mcp add|ls|rm|login|logout`: the caller's MCP servers, through web-bff's McpService
 * (docs/mcp.md). `mcp add NAME -- CMD ARGS...`: everything after NAME is the server's command
 * line (`--` keeps its options from being read as bedrock's); `mcp add NAME --url URL`: a remote
 * server. `mcp login NAME`: prints the authorization URL, then reads the URL the browser landed
 * on (the paste flow) and completes the login with it.
 */
import { createInterface } from 'node:readline/promises';
import { createClient } from '@connectrpc/connect';
import { toJson } from '@bufbuild/protobuf';
import { AddMcpServerResponseSchema, ListMcpServersResponseSchema, McpService, type McpServer } from '@bedrock/contracts';
import { apiTransport } from './connection.ts';
import { EXIT, UsageError } from './exit-codes.ts';
import type { Output } from './output.ts';
import { USAGE } from './usage.ts';

const AUTH_LABEL: Record<string, string> = { none: '-', logged_in: 'logged in', login_required: 'LOGIN REQUIRED' };

/** The rows of `mcp ls`: name, source, login (when a server is remote), command line or URL. */
export function renderMcpServers(servers: readonly McpServer[]): string {
  const remote = servers.some((s) => s.url);
  const rows = [
    ['NAME', 'SOURCE', ...(remote ? ['LOGIN'] : []), 'COMMAND'],
    ...servers.map((s) => [
      s.name,
      s.trusted ? `${s.source} (trusted)` : s.source,
      ...(remote ? [s.url ? (AUTH_LABEL[s.authStatus] ?? s.authStatus) : ''] : []),
      s.url || [s.command, ...s.args].join(' '),
    ]),
  ];
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)));
  return rows.map((r) => `${r.map((cell, i) => (i === r.length - 1 ? cell : cell.padEnd(widths[i]!))).join('  ')}\n`).join('');
}

export async function mcp(rest: string[], json: boolean, env: NodeJS.ProcessEnv, output: Output, url?: string): Promise<number> {
  const client = createClient(McpService, apiTransport(env));
  const [sub, ...args] = rest;
  const line = (value: unknown) => `${JSON.stringify(value)}\n`;
  switch (sub) {
    case 'add': {
      if (url !== undefined) {
        if (args.length !== 1) throw new UsageError(`expected mcp add NAME --url URL (and no command)\n\n${USAGE}`);
        const res = await client.addMcpServer({ name: args[0]!, url });
        output.out(
          json
            ? line(toJson(AddMcpServerResponseSchema, res))
            : `added MCP server ${args[0]} (${url}): its tools are mcp__${args[0]}__TOOL; if it needs a login: bedrock mcp login ${args[0]}\n`,
        );
        return EXIT.ok;
      }
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
    case 'login': {
      if (args.length !== 1) throw new UsageError(`expected mcp login NAME\n\n${USAGE}`);
      const name = args[0]!;
      const { authorizationUrl } = await client.startMcpLogin({ name });
      output.err(
        `Open this URL in a browser and approve:\n\n  ${authorizationUrl}\n\nThen paste here the whole URL the browser landed on (it holds ?code=...&state=...):\n`,
      );
      const rl = createInterface({ input: process.stdin, output: process.stderr, terminal: false });
      const pasted = await new Promise<string>((resolve) => {
        rl.once('line', resolve);
        rl.once('close', () => resolve(''));
      });
      rl.close();
      if (pasted.trim() === '') throw new UsageError('no URL was pasted: the login was not completed');
      await client.completeMcpLogin({ redirectedUrl: pasted.trim() });
      output.out(json ? line({ name }) : `logged in to MCP server ${name}\n`);
      return EXIT.ok;
    }
    case 'logout': {
      if (args.length !== 1) throw new UsageError(`expected mcp logout NAME\n\n${USAGE}`);
      const { revoked } = await client.logoutMcpServer({ name: args[0]! });
      output.out(
        json
          ? line({ revoked })
          : `logged out of MCP server ${args[0]}${revoked ? ' (its tokens were revoked at the authorization server)' : ''}\n`,
      );
      return EXIT.ok;
    }
    default:
      throw new UsageError(`expected mcp add, mcp ls, mcp rm, mcp login or mcp logout\n\n${USAGE}`);
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
