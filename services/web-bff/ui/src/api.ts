/** The ConversationService, WorkspaceService, CheckpointService and McpService clients over Connect (fetch; HTTP/1.1 is enough, streams included). */
import { Code, ConnectError, createClient, type Client, type Interceptor } from '@connectrpc/connect';
import { createConnectTransport } from '@connectrpc/connect-web';
import { CLIENT_HEADER, CheckpointService, ConversationService, McpService, WorkspaceService, rejectionOf } from '@bedrock/contracts';
import { storedToken } from './auth.ts';
import { retriesExhausted } from '@bedrock/agent-view/retry';

export type Api = Client<typeof ConversationService>;
export type WorkspaceApi = Client<typeof WorkspaceService>;

const bearer: Interceptor = (next) => (req) => {
  const token = storedToken();
  if (token) req.header.set('Authorization', `Bearer ${token}`);
  // Which client this is, for the audit log (docs/security.md, "Audit").
  req.header.set(CLIENT_HEADER, 'web');
  return next(req);
};

/**
 * fetch rejects with a TypeError when the network fails (the server is down, the connection
 * was reset): connect would call that UNKNOWN. It is UNAVAILABLE, which actions retry (retry.ts).
 */
const networkFailures: Interceptor = (next) => async (req) => {
  try {
    return await next(req);
  } catch (err) {
    if (err instanceof TypeError && !req.signal.aborted)
      throw new ConnectError(`network error: ${err.message}`, Code.Unavailable, undefined, undefined, err);
    throw err;
  }
};

function transportTo(baseUrl: string) {
  return createConnectTransport({ baseUrl, useBinaryFormat: true, interceptors: [networkFailures, bearer] });
}

export function createApi(baseUrl: string = location.origin): Api {
  return createClient(ConversationService, transportTo(baseUrl));
}

/** The caller's workspaces (docs/web-ui.md, "New conversation"). */
export function createWorkspaceApi(baseUrl: string = location.origin): WorkspaceApi {
  return createClient(WorkspaceService, transportTo(baseUrl));
}

export function isUnauthenticated(err: unknown): boolean {
  return ConnectError.from(err).code === Code.Unauthenticated;
}

/** What the user reads: the server's own message, without the "[code]" prefix. */
export function errorText(err: unknown): string {
  const gaveUp = retriesExhausted(err);
  if (gaveUp) {
    return `${errorText(gaveUp.last)} — gave up after ${gaveUp.attempts} attempts over ${Math.round(gaveUp.elapsedMs / 1000)}s; check the conversation before trying again.`;
  }
  const e = ConnectError.from(err);
  if (e.code === Code.Unavailable && /fetch|network/i.test(e.rawMessage)) return 'The server cannot be reached. Is Bedrock running?';
  // A refused action (busy, finished, ...) carries its user-facing words in a Rejection detail.
  return rejectionOf(e)?.message || e.rawMessage || `request failed (${Code[e.code] ?? e.code})`;
}

export type CheckpointApi = Client<typeof CheckpointService>;

/** Checkpoints of a conversation's workspace: what a rewind undoes, and the rewind (docs/web-ui.md, "Rewind to here"). */
export function createCheckpointApi(baseUrl: string = location.origin): CheckpointApi {
  return createClient(CheckpointService, transportTo(baseUrl));
}

export type McpApi = Client<typeof McpService>;

/** The user's MCP servers and their per-conversation switches (docs/web-ui.md, "MCP servers"). */
export function createMcpApi(baseUrl: string = location.origin): McpApi {
  return createClient(McpService, transportTo(baseUrl));
}

/**
 * Starts the user's OAuth login to their remote MCP server `name` (docs/mcp.md, "OAuth"):
 * web-bff's `/mcp/oauth/start` answers the authorization server's URL to open, and binds the
 * login to this browser with a cookie its callback checks. Rejects with the route's words.
 */
export async function startMcpLogin(name: string, baseUrl: string = location.origin): Promise<string> {
  const token = storedToken();
  const res = await fetch(new URL(`/mcp/oauth/start?server=${encodeURIComponent(name)}`, baseUrl), {
    headers: { Accept: 'application/json', ...(token ? { Authorization: `Bearer ${token}` } : {}) },
    credentials: 'same-origin',
  });
  const body = (await res.json().catch(() => ({}))) as { authorizationUrl?: string; error?: string };
  if (!res.ok || !body.authorizationUrl) throw new Error(body.error ?? `the login could not start (HTTP ${res.status})`);
  return body.authorizationUrl;
}
