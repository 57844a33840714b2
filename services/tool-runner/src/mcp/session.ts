/**
 * A conversation's session with one MCP server: a stdio server started in the sandbox through
 * the helper (in the conversation's place, user and mode), or a remote server on Streamable
 * HTTP confined to its origin.
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport, StreamableHTTPError } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ToolListChangedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import type { Tool } from '@modelcontextprotocol/sdk/types.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import { mcpLoginInvalidMessage, mcpLoginNeededMessage } from '@bedrock/contracts';
import type { McpServerSpec } from '@bedrock/contracts';
import { commandEnv } from '../sandbox/command-env.ts';
import { resolveToolUser } from '../sandbox/sandboxed-run.ts';
import type { RunMode, SandboxSettings } from '../sandbox/sandbox-settings.ts';
import { serverHelperArgs } from './sandboxed-server.ts';

/** Where and as whom a conversation's servers run. */
export interface McpPlace {
  readonly conversationId: string;
  readonly mode: RunMode;
  readonly cwd: string;
  readonly user?: { readonly uid: number; readonly gid: number };
  readonly workspace?: string;
}

/** What starting a session needs of the host's options. */
export interface SessionStartOptions {
  readonly sandbox: SandboxSettings;
  /** Starting a server and its initialize handshake, ms. */
  readonly startTimeoutMs: number;
  /**
   * Opens a remote server's sealed access token (McpServerSpec.sealed_access_token) for this
   * conversation and server; unset: this runner has no BEDROCK_MCP_TOKEN_KEY.
   */
  readonly openAccessToken?: (sealed: string, conversationId: string, server: string) => string;
  /** The fetch remote servers are reached with (tests); default the global one. */
  readonly fetch?: typeof fetch;
}

/** A running server: its client, and what the host keeps of it. */
export interface Session {
  readonly fingerprint: string;
  readonly client: Client;
  /** A stdio server's (its helper's pid); undefined for a remote server. */
  readonly stdio: StdioClientTransport | undefined;
  /** A remote server: the bearer token its requests carry now (the latest a spec brought). */
  token: string | undefined;
  readonly release: () => void;
  tools: Tool[] | undefined;
  closed: boolean;
  busy: number;
  lastUsed: number;
  stderr: string;
  /** After a cancel: the ping that decides whether the server is stuck (and kills it); the next call waits for it. */
  settling: Promise<void> | undefined;
}

/**
 * A session not yet connected: its client marks it closed (and releases what it holds) when the
 * connection ends, and forgets its tool list when the server says the list changed.
 */
function newSession(fingerprint: string, parts: Pick<Session, 'stdio' | 'token' | 'release'>): Session {
  const session: Session = {
    fingerprint,
    client: new Client({ name: 'bedrock', version: '0.1.0' }, { capabilities: {} }),
    ...parts,
    tools: undefined,
    closed: false,
    busy: 0,
    lastUsed: Date.now(),
    stderr: '',
    settling: undefined,
  };
  session.client.onclose = () => {
    session.closed = true;
    session.release();
  };
  session.client.setNotificationHandler(ToolListChangedNotificationSchema, () => {
    session.tools = undefined;
  });
  return session;
}

const STDERR_TAIL = 2000;
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** A failure to start or talk to a server: the model reads `message`. */
export class ServerDown extends Error {}
/** A remote server refused us for want of a (valid) login. */
export class LoginNeeded extends Error {}

/**
 * The only fetch a remote server's transport gets: every request goes to the server's own
 * origin (the configured URL's) or is refused, redirects are never followed to another origin
 * (the SDK follows same-origin ones through this function again), and the bearer token is added
 * here, so it is sent nowhere else.
 */
export function confinedFetch(origin: string, token: () => string | undefined, base: typeof fetch = fetch): typeof fetch {
  return async (input, init) => {
    const url = new URL(input instanceof Request ? input.url : String(input));
    if (url.origin !== origin) {
      throw new Error(`refused to connect to ${url.origin}: this MCP server may only be reached at ${origin}, its configured URL's origin`);
    }
    const headers = new Headers(init?.headers);
    const bearer = token();
    if (bearer) headers.set('authorization', `Bearer ${bearer}`);
    return base(url, { ...init, headers, redirect: init?.redirect === 'follow' || !init?.redirect ? 'manual' : init.redirect });
  };
}

/** A remote server's 401 (or the SDK's UnauthorizedError): a login is needed or no longer valid. */
export function isUnauthorized(err: unknown): boolean {
  return (err instanceof StreamableHTTPError && err.code === 401) || (err instanceof Error && err.name === 'UnauthorizedError');
}

/** Starts sessions; a stdio server's cgroup is named by this starter's own sequence. */
export function createSessionStarter(options: SessionStartOptions): {
  start(place: McpPlace, spec: McpServerSpec, fingerprint: string): Promise<Session>;
  tokenOf(place: McpPlace, spec: McpServerSpec): string | undefined;
} {
  let sequence = 0;

  /** A remote server: no process, no sandbox; a client on Streamable HTTP confined to its origin. */
  async function startRemote(place: McpPlace, spec: McpServerSpec, fingerprint: string): Promise<Session> {
    const url = new URL(spec.url);
    const session = newSession(fingerprint, { stdio: undefined, token: tokenOf(place, spec), release: () => {} });
    const transport = new StreamableHTTPClientTransport(url, {
      fetch: confinedFetch(url.origin, () => session.token, options.fetch),
      // A call's stream the server closes before answering is resumed (GET with Last-Event-ID,
      // after the server's `retry` delay), as the protocol asks; past 2 tries the call fails.
      reconnectionOptions: {
        maxReconnectionDelay: 30_000,
        initialReconnectionDelay: 1000,
        reconnectionDelayGrowFactor: 1.5,
        maxRetries: 2,
      },
    });
    try {
      await session.client.connect(transport, { timeout: options.startTimeoutMs });
      notificationsBeforeResponses(transport);
    } catch (err) {
      await session.client.close().catch(() => {});
      if (isUnauthorized(err)) throw new LoginNeeded(session.token ? mcpLoginInvalidMessage(spec.name) : mcpLoginNeededMessage(spec.name));
      throw new ServerDown(`it could not be reached at ${url.origin}${url.pathname}: ${(err as Error).message}`);
    }
    return session;
  }

  /** The spec's access token, opened; undefined when it has none. */
  function tokenOf(place: McpPlace, spec: McpServerSpec): string | undefined {
    if (spec.sealedAccessToken === '') return undefined;
    if (!options.openAccessToken) {
      throw new ServerDown(
        'this tool-runner has no BEDROCK_MCP_TOKEN_KEY, so it cannot use your login to this server (an operator must set it)',
      );
    }
    try {
      return options.openAccessToken(spec.sealedAccessToken, place.conversationId, spec.name);
    } catch {
      throw new ServerDown(
        "the login token sent for it cannot be opened with this tool-runner's BEDROCK_MCP_TOKEN_KEY (the services' keys differ)",
      );
    }
  }

  async function start(place: McpPlace, spec: McpServerSpec, fingerprint: string): Promise<Session> {
    if (spec.url !== '') return startRemote(place, spec, fingerprint);
    const { sandbox } = options;
    if (place.mode === 'restricted' && !sandbox.sandboxAvailable) {
      throw new ServerDown('this tool-runner has no working kernel sandbox, so it cannot run MCP servers in Restricted mode');
    }
    const user = place.user ?? (sandbox.toolUser ? await resolveToolUser(sandbox.toolUser, place.cwd) : undefined);
    const limits = sandbox.limits[place.mode];
    const bounds = sandbox.cgroups?.bounds;
    let cgroupDir: string | undefined;
    if (sandbox.cgroups) {
      cgroupDir = await sandbox.cgroups
        .create(`mcp-${process.pid}-${++sequence}`, {
          processes: limits.processes,
          ...(bounds?.memory ? { memory: limits.memory } : {}),
          ...(bounds?.cpu ? { cpus: limits.cpus } : {}),
        })
        .catch(() => undefined);
    }
    const release = () => {
      if (cgroupDir && sandbox.cgroups) sandbox.cgroups.release(cgroupDir);
    };
    const netRuleset = place.mode === 'restricted' ? undefined : await sandbox.netRuleset?.spec(sandbox.denyPorts);
    // The server's own variables are set by `env` inside the sandbox, never given to the helper:
    // it runs as root until it confines itself, and a variable such as LD_PRELOAD must not reach it.
    const extra = Object.entries(spec.env);
    if (extra.some(([k]) => !ENV_NAME.test(k))) throw new ServerDown('its environment has an invalid variable name');
    if (extra.length > 0 && spec.command.includes('=')) throw new ServerDown('a command containing "=" cannot be given an environment');
    const argv =
      extra.length > 0
        ? ['/usr/bin/env', '--', ...extra.map(([k, v]) => `${k}=${v}`), spec.command, ...spec.args]
        : [spec.command, ...spec.args];
    const args = serverHelperArgs(sandbox, {
      mode: place.mode,
      argv,
      ...(user ? { user } : {}),
      ...(place.workspace ? { workspace: place.workspace } : {}),
      ...(cgroupDir && sandbox.cgroups ? { cgroupDirs: sandbox.cgroups.dirs(cgroupDir) } : {}),
      ...(netRuleset ? { netRuleset } : {}),
    });
    const env = commandEnv(sandbox.baseEnv);
    const transport = new StdioClientTransport({
      command: sandbox.helperPath,
      args,
      env: env as Record<string, string>,
      cwd: place.cwd,
      stderr: 'pipe',
    });
    const session = newSession(fingerprint, { stdio: transport, token: undefined, release });
    const { client } = session;
    transport.stderr?.on('data', (chunk: Buffer) => {
      session.stderr = (session.stderr + chunk.toString('utf8')).slice(-STDERR_TAIL);
    });
    try {
      await client.connect(transport, { timeout: options.startTimeoutMs });
      notificationsBeforeResponses(transport);
    } catch (err) {
      await client.close().catch(() => {});
      release();
      // The helper's own errors (sandbox setup) and the server's complaints are on stderr.
      const tail = session.stderr.trim();
      throw new ServerDown(`it could not be started: ${(err as Error).message}${tail ? `\nIts stderr:\n${tail}` : ''}`);
    }
    return session;
  }

  return { start, tokenOf };
}

/**
 * The SDK (1.32) handles a notification a microtask after it arrives but a response at once, so a
 * server's last progress read together with its result was dropped: the result removed the call's
 * progress handler first. From here on a response reaches the SDK two microtasks later, after
 * every notification read before it (responses keep their order among themselves).
 */
export function notificationsBeforeResponses(transport: Transport): void {
  const deliver = transport.onmessage;
  if (!deliver) return;
  transport.onmessage = (message, extra) => {
    const response = 'id' in message && ('result' in message || 'error' in message);
    if (response) queueMicrotask(() => queueMicrotask(() => deliver(message, extra)));
    else deliver(message, extra);
  };
}
