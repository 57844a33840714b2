/**
 * The MCP servers running on this tool-runner: one process per conversation and server (so a
 * server keeps no state across conversations and runs in exactly that conversation's
 * workspace, user and mode), started on first use inside the sandbox, reused while it lives,
 * started again when it died, when the conversation's mode changed or its configuration did,
 * and stopped after it has been idle for a while. A call: find the tool by its model name,
 * apply the mode rule (mcpRestrictedRefusal), call it with a timeout that progress
 * notifications restart, map the result; cancel sends notifications/cancelled (the SDK does, on
 * abort) and answers at once; in the background the server must then answer a ping soon, or it
 * is killed (the next call of that server waits for this and starts it again if it was).
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport, StreamableHTTPError } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ErrorCode, McpError, ToolListChangedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import type { Tool } from '@modelcontextprotocol/sdk/types.js';
import { mcpLoginInvalidMessage, mcpLoginNeededMessage, mcpRestrictedRefusal, mcpToolName } from '@bedrock/contracts';
import type { McpServerSpec } from '@bedrock/contracts';
import { commandEnv } from '../sandbox/command-env.ts';
import { resolveToolUser } from '../sandbox/sandboxed-run.ts';
import type { RunMode, SandboxSettings } from '../sandbox/sandboxed-run.ts';
import type { OutputCaptureOptions } from '../process/output-capture.ts';
import { serverHelperArgs } from './sandboxed-server.ts';
import { mapCallResult } from './result.ts';
import type { McpCallResult } from './result.ts';

export interface McpHostOptions {
  readonly sandbox: SandboxSettings;
  readonly capture: OutputCaptureOptions;
  /** Per-call timeout when the server's spec sets none, ms. */
  readonly defaultTimeoutMs: number;
  /** Starting a server and its initialize handshake, ms. */
  readonly startTimeoutMs: number;
  /** A server unused this long is stopped, ms. */
  readonly idleMs: number;
  /** After a cancel, the server must answer a ping within this, ms, or it is killed. */
  readonly cancelGraceMs: number;
  /** Servers running at once on this runner; starting one more stops the least recently used idle one. */
  readonly maxServers: number;
  /**
   * Opens a remote server's sealed access token (McpServerSpec.sealed_access_token) for this
   * conversation and server; unset: this runner has no BEDROCK_MCP_TOKEN_KEY.
   */
  readonly openAccessToken?: (sealed: string, conversationId: string, server: string) => string;
  /** The fetch remote servers are reached with (tests); default the global one. */
  readonly fetch?: typeof fetch;
}

export const MCP_HOST_DEFAULTS = {
  defaultTimeoutMs: 5 * 60_000,
  startTimeoutMs: 30_000,
  idleMs: 10 * 60_000,
  cancelGraceMs: 2_000,
  maxServers: 256,
} as const;

/** Where and as whom a conversation's servers run. */
export interface McpPlace {
  readonly conversationId: string;
  readonly mode: RunMode;
  readonly cwd: string;
  readonly user?: { readonly uid: number; readonly gid: number };
  readonly workspace?: string;
}

export interface McpToolListing {
  readonly tools: { name: string; description: string; inputSchemaJson: string }[];
  readonly problems: Record<string, string>;
}

export interface McpCallOutcome {
  readonly content: string;
  readonly isError: boolean;
  readonly cancelled: boolean;
  readonly display: Record<string, unknown>;
}

export interface McpHost {
  /** The tools of these servers, for the model: started (or reused) in the conversation's place. */
  list(place: McpPlace, servers: readonly McpServerSpec[]): Promise<McpToolListing>;
  /** Runs one call of `modelName` (`mcp__<server>__<tool>`) on `server`. Never throws for the server's failures. */
  call(
    place: McpPlace,
    server: McpServerSpec,
    modelName: string,
    input: Record<string, unknown>,
    signal: AbortSignal,
    onOutput?: (text: string) => void,
  ): Promise<McpCallOutcome>;
  /** Servers running now. */
  readonly size: number;
  /** The process id of the helper running this conversation's server (tests), or undefined. */
  pidOf(conversationId: string, server: string): number | undefined;
  close(): Promise<void>;
}

interface Session {
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

const STDERR_TAIL = 2000;
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** A failure to start or talk to a server: the model reads `message`. */
class ServerDown extends Error {}
/** A remote server refused us for want of a (valid) login. */
class LoginNeeded extends Error {}

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

export function createMcpHost(options: McpHostOptions): McpHost {
  const sessions = new Map<string, Session>();
  const starting = new Map<string, Promise<Session>>();
  let sequence = 0;
  let closing = false;

  const keyOf = (conversationId: string, server: string) => `${conversationId}\u0000${server}`;

  const reaper = setInterval(
    () => {
      const now = Date.now();
      for (const [key, s] of sessions) {
        if (s.busy === 0 && now - s.lastUsed > options.idleMs) void stop(key, s);
      }
    },
    Math.min(60_000, Math.max(1000, options.idleMs / 4)),
  );
  reaper.unref();

  async function stop(key: string, s: Session): Promise<void> {
    if (sessions.get(key) === s) sessions.delete(key);
    s.closed = true;
    await s.client.close().catch(() => {});
    s.release();
  }

  /** SIGTERM to the helper, which kills the server's whole tree at once. */
  function kill(key: string, s: Session): void {
    const pid = s.stdio?.pid;
    if (pid) {
      try {
        process.kill(pid, 'SIGTERM');
      } catch {
        /* gone already */
      }
    }
    void stop(key, s);
  }

  /** A remote server: no process, no sandbox; a client on Streamable HTTP confined to its origin. */
  async function startRemote(place: McpPlace, spec: McpServerSpec, fingerprint: string): Promise<Session> {
    const url = new URL(spec.url);
    const session: Session = {
      fingerprint,
      client: new Client({ name: 'bedrock', version: '0.1.0' }, { capabilities: {} }),
      stdio: undefined,
      token: tokenOf(place, spec),
      release: () => {},
      tools: undefined,
      closed: false,
      busy: 0,
      lastUsed: Date.now(),
      stderr: '',
      settling: undefined,
    };
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
    session.client.onclose = () => {
      session.closed = true;
    };
    session.client.setNotificationHandler(ToolListChangedNotificationSchema, () => {
      session.tools = undefined;
    });
    try {
      await session.client.connect(transport, { timeout: options.startTimeoutMs });
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
    const client = new Client({ name: 'bedrock', version: '0.1.0' }, { capabilities: {} });
    const session: Session = {
      fingerprint,
      client,
      stdio: transport,
      token: undefined,
      release,
      tools: undefined,
      closed: false,
      busy: 0,
      lastUsed: Date.now(),
      stderr: '',
      settling: undefined,
    };
    transport.stderr?.on('data', (chunk: Buffer) => {
      session.stderr = (session.stderr + chunk.toString('utf8')).slice(-STDERR_TAIL);
    });
    client.onclose = () => {
      session.closed = true;
      release();
    };
    client.setNotificationHandler(ToolListChangedNotificationSchema, () => {
      session.tools = undefined;
    });
    try {
      await client.connect(transport, { timeout: options.startTimeoutMs });
    } catch (err) {
      await client.close().catch(() => {});
      release();
      // The helper's own errors (sandbox setup) and the server's complaints are on stderr.
      const tail = session.stderr.trim();
      throw new ServerDown(`it could not be started: ${(err as Error).message}${tail ? `\nIts stderr:\n${tail}` : ''}`);
    }
    return session;
  }

  /** The conversation's session of this server, started when there is none usable. */
  async function sessionFor(place: McpPlace, spec: McpServerSpec): Promise<[string, Session]> {
    const key = keyOf(place.conversationId, spec.name);
    if (spec.loginRequired) throw new LoginNeeded(mcpLoginInvalidMessage(spec.name));
    // A remote server is the same whatever the conversation's mode and place: its URL only.
    const fingerprint =
      spec.url !== ''
        ? JSON.stringify(['url', spec.url])
        : JSON.stringify([
            place.mode,
            place.cwd,
            place.user ?? null,
            place.workspace ?? null,
            spec.command,
            spec.args,
            Object.entries(spec.env).sort(),
          ]);
    for (;;) {
      if (closing) throw new ServerDown('the tool-runner is stopping');
      const pending = starting.get(key);
      if (pending) {
        await pending.catch(() => {});
        continue;
      }
      const existing = sessions.get(key);
      if (existing?.settling) {
        // A cancelled call's server is being checked: use it only once it answered (or was killed).
        await existing.settling;
        continue;
      }
      if (existing && !existing.closed && existing.fingerprint === fingerprint) {
        // A newer access token (refreshed by the conversation service) replaces the session's.
        if (spec.url !== '' && spec.sealedAccessToken !== '') existing.token = tokenOf(place, spec);
        return [key, existing];
      }
      // Dead, or started for another mode or configuration: replace it.
      if (existing) await stop(key, existing);
      await makeRoom();
      const started = start(place, spec, fingerprint);
      starting.set(key, started);
      try {
        const session = await started;
        sessions.set(key, session);
        return [key, session];
      } finally {
        starting.delete(key);
      }
    }
  }

  /** At the cap: stops the least recently used idle server, or refuses when every one is busy. */
  async function makeRoom(): Promise<void> {
    if (sessions.size + starting.size < options.maxServers) return;
    let oldest: [string, Session] | undefined;
    for (const entry of sessions) if (entry[1].busy === 0 && (!oldest || entry[1].lastUsed < oldest[1].lastUsed)) oldest = entry;
    if (!oldest) throw new ServerDown(`this tool-runner already runs ${options.maxServers} MCP servers, all busy; try again later`);
    await stop(...oldest);
  }

  async function toolsOf(s: Session): Promise<Tool[]> {
    if (s.tools) return s.tools;
    const tools: Tool[] = [];
    let cursor: string | undefined;
    do {
      const page = await s.client.listTools(cursor ? { cursor } : {}, { timeout: options.startTimeoutMs });
      tools.push(...page.tools);
      cursor = page.nextCursor;
    } while (cursor);
    s.tools = tools;
    return tools;
  }

  const stderrNote = (s: Session) => (s.stderr.trim() ? `\nIts stderr (last lines):\n${s.stderr.trim().slice(-800)}` : '');

  return {
    async list(place, servers) {
      const tools: McpToolListing['tools'] = [];
      const problems: Record<string, string> = {};
      const seen = new Set<string>();
      await Promise.all(
        servers.map(async (spec) => {
          try {
            const [, s] = await sessionFor(place, spec);
            s.lastUsed = Date.now();
            for (const t of await toolsOf(s)) {
              const name = mcpToolName(spec.name, t.name);
              if (seen.has(name)) {
                problems[spec.name] = `${problems[spec.name] ?? ''}two tools are both named ${name}; the second is left out. `;
                continue;
              }
              seen.add(name);
              const readOnly = t.annotations?.readOnlyHint === true;
              const where = readOnly ? 'declared read-only' : 'may write, so it runs only in Unrestricted mode';
              tools.push({
                name,
                description: `${t.description ?? t.title ?? t.name}\n[MCP server "${spec.name}", tool "${t.name}": ${where}]`,
                inputSchemaJson: JSON.stringify(t.inputSchema),
              });
            }
          } catch (err) {
            problems[spec.name] = (err as Error).message;
          }
        }),
      );
      tools.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
      return { tools, problems };
    },

    async call(place, spec, modelName, input, signal, onOutput) {
      const display = { mcp: true, server: spec.name };
      const fail = (kind: string, content: string): McpCallOutcome => ({
        content,
        isError: true,
        cancelled: false,
        display: { ...display, error: kind },
      });
      let key: string;
      let s: Session;
      try {
        [key, s] = await sessionFor(place, spec);
      } catch (err) {
        if (err instanceof LoginNeeded) return fail('auth', err.message);
        return fail('server_down', `The MCP server "${spec.name}" is not available: ${(err as Error).message}`);
      }
      s.busy++;
      s.lastUsed = Date.now();
      try {
        let tools: Tool[];
        try {
          tools = await toolsOf(s);
        } catch (err) {
          return fail('protocol', `The MCP server "${spec.name}" could not list its tools: ${(err as Error).message}${stderrNote(s)}`);
        }
        const tool = tools.find((t) => mcpToolName(spec.name, t.name) === modelName);
        if (!tool) {
          const names = tools.map((t) => mcpToolName(spec.name, t.name)).join(', ');
          return fail('unknown_tool', `The MCP server "${spec.name}" has no tool ${modelName}. Its tools: ${names || '(none)'}.`);
        }
        // A remote server is never sandboxed: only the operator's trust makes its readOnlyHint count.
        const sandboxed = spec.url === '' && place.mode === 'restricted' && options.sandbox.sandboxAvailable;
        const refusal = mcpRestrictedRefusal(
          { name: modelName, ...(tool.annotations ? { hints: tool.annotations } : {}) },
          { sandboxedRestricted: sandboxed, trusted: spec.trusted },
          place.mode,
        );
        if (refusal) return fail('mode', refusal);
        if (signal.aborted) return { content: 'Cancelled by the user.', isError: true, cancelled: true, display };
        const timeoutMs = Number(spec.timeoutMs) || options.defaultTimeoutMs;
        try {
          const result = await s.client.callTool({ name: tool.name, arguments: input }, undefined, {
            signal,
            timeout: timeoutMs,
            resetTimeoutOnProgress: true,
            onprogress: (p) => {
              const of = p.total !== undefined ? `/${p.total}` : '';
              onOutput?.(`[progress ${p.progress}${of}${p.message ? `: ${p.message}` : ''}]\n`);
            },
          });
          const mapped = mapCallResult(result as McpCallResult, options.capture);
          return { content: mapped.content, isError: mapped.isError, cancelled: false, display: { ...display, ...mapped.display } };
        } catch (err) {
          if (signal.aborted) {
            // The call is answered at once; whether the server stopped is checked in the background.
            s.settling ??= settleAfterCancel(key, s).finally(() => {
              s.settling = undefined;
            });
            return {
              content: `Cancelled by the user; the MCP server "${spec.name}" was sent notifications/cancelled.`,
              isError: true,
              cancelled: true,
              display,
            };
          }
          if (err instanceof McpError && err.code === ErrorCode.RequestTimeout) {
            await settleAfterCancel(key, s);
            return fail(
              'timeout',
              `The MCP tool ${modelName} timed out: no result and no progress for ${Math.round(timeoutMs / 1000)}s; the call was cancelled.`,
            );
          }
          if (s.closed || (err instanceof McpError && err.code === ErrorCode.ConnectionClosed)) {
            return fail(
              'server_down',
              `The MCP server "${spec.name}" stopped during the call (${(err as Error).message}); it is started again at the next call.${stderrNote(s)}`,
            );
          }
          if (isUnauthorized(err)) {
            await stop(key, s);
            return fail('auth', s.token ? mcpLoginInvalidMessage(spec.name) : mcpLoginNeededMessage(spec.name));
          }
          if (err instanceof McpError) {
            return fail('protocol', `The MCP server "${spec.name}" answered the call with an error (code ${err.code}): ${err.message}`);
          }
          return fail('protocol', `The call to the MCP server "${spec.name}" failed: ${(err as Error).message}`);
        }
      } finally {
        s.busy--;
        s.lastUsed = Date.now();
      }
    },

    get size() {
      return sessions.size;
    },
    pidOf(conversationId, server) {
      return sessions.get(keyOf(conversationId, server))?.stdio?.pid ?? undefined;
    },
    async close() {
      closing = true;
      clearInterval(reaper);
      await Promise.all([...sessions].map(([key, s]) => stop(key, s)));
    },
  };

  /** A remote server's 401 (or the SDK's UnauthorizedError): a login is needed or no longer valid. */
  function isUnauthorized(err: unknown): boolean {
    return (err instanceof StreamableHTTPError && err.code === 401) || (err instanceof Error && err.name === 'UnauthorizedError');
  }

  /** After a cancel or a timeout: a server that does not answer a ping soon is stuck, and killed. */
  async function settleAfterCancel(key: string, s: Session): Promise<void> {
    if (s.closed) return;
    try {
      await s.client.ping({ timeout: options.cancelGraceMs });
    } catch {
      kill(key, s);
    }
  }
}
