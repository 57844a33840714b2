/**
 * The MCP servers on this tool-runner: one session per conversation and server (session.ts),
 * reused, replaced or stopped when idle; calls with the mode rule, timeouts and cancels (docs/mcp.md).
 */
import { ErrorCode, McpError } from '@modelcontextprotocol/sdk/types.js';
import type { Tool } from '@modelcontextprotocol/sdk/types.js';
import { mcpLoginInvalidMessage, mcpLoginNeededMessage, mcpRestrictedRefusal, mcpToolName } from '@bedrock/contracts';
import type { McpServerSpec } from '@bedrock/contracts';
import type { OutputCaptureOptions } from '../process/output-capture.ts';
import { mapCallResult } from './result.ts';
import type { McpCallResult } from './result.ts';
import { createSessionStarter, isUnauthorized, LoginNeeded, ServerDown } from './session.ts';
import type { McpPlace, Session, SessionStartOptions } from './session.ts';

export type { McpPlace } from './session.ts';

export interface McpHostOptions extends SessionStartOptions {
  readonly capture: OutputCaptureOptions;
  /** Per-call timeout when the server's spec sets none, ms. */
  readonly defaultTimeoutMs: number;
  /** A server unused this long is stopped, ms. */
  readonly idleMs: number;
  /** After a cancel, the server must answer a ping within this, ms, or it is killed. */
  readonly cancelGraceMs: number;
  /** Servers running at once on this runner; starting one more stops the least recently used idle one. */
  readonly maxServers: number;
}

export const MCP_HOST_DEFAULTS = {
  defaultTimeoutMs: 5 * 60_000,
  startTimeoutMs: 30_000,
  idleMs: 10 * 60_000,
  cancelGraceMs: 2_000,
  maxServers: 256,
} as const;

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

export function createMcpHost(options: McpHostOptions): McpHost {
  const sessions = new Map<string, Session>();
  const starting = new Map<string, Promise<Session>>();
  const starter = createSessionStarter(options);
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
        if (spec.url !== '' && spec.sealedAccessToken !== '') existing.token = starter.tokenOf(place, spec);
        return [key, existing];
      }
      // Dead, or started for another mode or configuration: replace it.
      if (existing) await stop(key, existing);
      await makeRoom();
      const started = starter.start(place, spec, fingerprint);
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
