/**
 * MCP servers as this service knows them: the operator's (BEDROCK_MCP_SERVERS, everyone's) and
 * each user's own (rows of mcp_servers), their validation, and the spec a tool-runner starts.
 * See docs/mcp.md.
 */
import { create } from '@bufbuild/protobuf';
import { MCP_SERVER_NAME, McpServerSchema, McpServerSpecSchema } from '@bedrock/contracts';
import type { McpServer, McpServerSpec } from '@bedrock/contracts';

export interface McpServerConfig {
  readonly name: string;
  /** A stdio server's program; '' for a remote one. */
  readonly command: string;
  /** A remote server's URL (Streamable HTTP); '' (or unset) for a stdio one. */
  readonly url?: string;
  readonly args: readonly string[];
  readonly env: Readonly<Record<string, string>>;
  /** Operator servers only: their readOnlyHint is believed whatever the sandbox. */
  readonly trusted: boolean;
  /** Per-call timeout, ms; 0: the service's default. */
  readonly timeoutMs: number;
  readonly source: 'operator' | 'user';
  /** A user's server for one conversation only; '' for all of theirs (and for the operator's). */
  readonly conversationId?: string;
  /** Turned off for the conversation it was resolved for (mcp_servers_off). */
  readonly disabled?: boolean;
}

/** Bounds of a server's definition (a row, a request). */
export const MCP_LIMITS = { maxArgs: 64, maxArgChars: 4096, maxEnv: 64, maxEnvChars: 4096, maxPerUser: 20, maxTimeoutMs: 60 * 60_000 };

const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,127}$/;

const LOOPBACK_HOST = /^(localhost|127(?:\.\d{1,3}){3}|\[::1\])$/i;

/** What is wrong with a remote server's URL, or undefined: https, or http to loopback only; no credentials, no fragment. */
export function mcpUrlProblem(url: string): string | undefined {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return `the URL "${url}" is not valid`;
  }
  if (url.length > 2048) return 'the URL is longer than 2048 characters';
  if (u.protocol !== 'https:' && !(u.protocol === 'http:' && LOOPBACK_HOST.test(u.hostname))) {
    return `the URL must be https (http only to this machine: localhost, 127.x.x.x, [::1]); got ${u.protocol}//${u.host}`;
  }
  if (u.username || u.password) return 'the URL cannot hold a user name or password (log in with `bedrock mcp login` instead)';
  if (u.hash) return 'the URL cannot hold a fragment (#...)';
  return undefined;
}

/** What is wrong with a server's definition, or undefined. */
export function mcpServerProblem(s: Pick<McpServerConfig, 'name' | 'command' | 'args' | 'env' | 'timeoutMs' | 'url'>): string | undefined {
  if (!MCP_SERVER_NAME.test(s.name)) {
    return `the server name "${s.name}" is not valid: 1 to 32 characters of a-z, 0-9 and "-", starting and ending with a letter or digit`;
  }
  if (s.url) {
    if (s.command.trim() !== '' || s.args.length > 0 || Object.keys(s.env).length > 0) {
      return 'a server is either a command (stdio) or a url (remote), not both; a remote server takes no args or env';
    }
    const problem = mcpUrlProblem(s.url);
    if (problem) return problem;
    return timeoutProblem(s.timeoutMs);
  }
  if (s.command.trim() === '') return 'the command is empty: give the program that starts the server (or a url for a remote server)';
  if (s.command.length > MCP_LIMITS.maxArgChars || s.command.includes('\0')) return 'the command is too long or holds a NUL';
  if (s.command.includes('=')) return 'the command cannot contain "=" (put the program first; environment variables go in env)';
  if (s.args.length > MCP_LIMITS.maxArgs) return `at most ${MCP_LIMITS.maxArgs} arguments`;
  if (s.args.some((a) => a.length > MCP_LIMITS.maxArgChars || a.includes('\0'))) return 'an argument is too long or holds a NUL';
  const env = Object.entries(s.env);
  if (env.length > MCP_LIMITS.maxEnv) return `at most ${MCP_LIMITS.maxEnv} environment variables`;
  for (const [k, v] of env) {
    if (!ENV_NAME.test(k)) return `"${k}" is not a valid environment variable name`;
    if (v.length > MCP_LIMITS.maxEnvChars || v.includes('\0')) return `the value of ${k} is too long or holds a NUL`;
  }
  return timeoutProblem(s.timeoutMs);
}

function timeoutProblem(timeoutMs: number): string | undefined {
  if (!Number.isInteger(timeoutMs) || timeoutMs < 0 || timeoutMs > MCP_LIMITS.maxTimeoutMs) {
    return `the timeout must be 0 (the default) to ${MCP_LIMITS.maxTimeoutMs} ms`;
  }
  return undefined;
}

/**
 * BEDROCK_MCP_SERVERS: `{"NAME": {"command": "...", "args": [...], "env": {...}, "trusted": false,
 * "timeoutMs": 300000}, "REMOTE": {"url": "https://..."}, ...}`. Throws with what is wrong.
 */
export function parseOperatorServers(json: string): McpServerConfig[] {
  let raw: unknown;
  try {
    raw = JSON.parse(json);
  } catch (err) {
    throw new Error(`not JSON (${(err as Error).message})`);
  }
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) throw new Error('expected a JSON object of servers by name');
  const servers: McpServerConfig[] = [];
  for (const [name, value] of Object.entries(raw as Record<string, unknown>)) {
    const v = (value ?? {}) as Record<string, unknown>;
    const known = new Set(['command', 'url', 'args', 'env', 'trusted', 'timeoutMs']);
    const unknown = Object.keys(v).filter((k) => !known.has(k));
    if (unknown.length > 0) throw new Error(`server "${name}": unknown field(s) ${unknown.join(', ')}`);
    const args = v.args ?? [];
    const env = v.env ?? {};
    if (v.url !== undefined && typeof v.url !== 'string') throw new Error(`server "${name}": "url" must be a string`);
    if (v.url === undefined && typeof v.command !== 'string') throw new Error(`server "${name}": "command" (or "url") must be a string`);
    if (v.url !== undefined && v.command !== undefined) throw new Error(`server "${name}": give "command" or "url", not both`);
    if (!Array.isArray(args) || args.some((a) => typeof a !== 'string'))
      throw new Error(`server "${name}": "args" must be a list of strings`);
    if (typeof env !== 'object' || Array.isArray(env) || Object.values(env as object).some((x) => typeof x !== 'string')) {
      throw new Error(`server "${name}": "env" must be an object of strings`);
    }
    if (v.trusted !== undefined && typeof v.trusted !== 'boolean') throw new Error(`server "${name}": "trusted" must be true or false`);
    const config: McpServerConfig = {
      name,
      command: typeof v.command === 'string' ? v.command : '',
      ...(typeof v.url === 'string' ? { url: v.url } : {}),
      args: args as string[],
      env: env as Record<string, string>,
      trusted: v.trusted === true,
      timeoutMs: typeof v.timeoutMs === 'number' ? v.timeoutMs : 0,
      source: 'operator',
    };
    const problem = mcpServerProblem(config);
    if (problem) throw new Error(`server "${name}": ${problem}`);
    servers.push(config);
  }
  return servers;
}

/** What a tool-runner starts; `defaultTimeoutMs` fills a server's unset timeout. */
export function toSpec(s: McpServerConfig, defaultTimeoutMs: number): McpServerSpec {
  return create(McpServerSpecSchema, {
    name: s.name,
    command: s.command,
    url: s.url ?? '',
    args: [...s.args],
    env: { ...s.env },
    trusted: s.source === 'operator' && s.trusted,
    timeoutMs: BigInt(s.timeoutMs || defaultTimeoutMs),
    disabled: s.disabled === true,
  });
}

/** A remote server's login state for the public API ('' for stdio servers). */
export type McpAuthStatus = '' | 'none' | 'logged_in' | 'login_required';

/** As the public API shows it. */
export function toProto(s: McpServerConfig, authStatus: McpAuthStatus = ''): McpServer {
  return create(McpServerSchema, {
    name: s.name,
    command: s.command,
    url: s.url ?? '',
    authStatus: s.url ? authStatus || 'none' : '',
    loginPath: s.url ? `/mcp/oauth/start?server=${encodeURIComponent(s.name)}` : '',
    args: [...s.args],
    env: { ...s.env },
    source: s.source,
    trusted: s.trusted,
    timeoutMs: BigInt(s.timeoutMs),
    conversationId: s.conversationId ?? '',
    disabled: s.disabled === true,
  });
}
