/**
 * Each user's OAuth 2.1 login to remote MCP servers (docs/mcp.md, "OAuth logins to remote
 * servers"): this service is the OAuth client. The protocol steps are the official SDK's
 * (`@modelcontextprotocol/sdk/client/auth.js`); this module keeps their state: logins stored
 * sealed (AES-256-GCM, BEDROCK_MCP_TOKEN_KEY) in mcp_oauth_logins, refreshed, revoked on logout.
 * The tool-runners never see a refresh token, only each conversation's access token, sealed.
 */
import { randomBytes } from 'node:crypto';
import type pg from 'pg';
import { auth, refreshAuthorization } from '@modelcontextprotocol/sdk/client/auth.js';
import type { OAuthClientProvider, OAuthDiscoveryState } from '@modelcontextprotocol/sdk/client/auth.js';
import type { OAuthClientInformationMixed, OAuthClientMetadata, OAuthTokens } from '@modelcontextprotocol/sdk/shared/auth.js';
import { mcpAccessTokenAad, type Logger, type SecretBox } from '@bedrock/platform/server';
import { mcpUrlProblem, type McpAuthStatus, type McpServerConfig } from './servers.ts';

/** A login under way is forgotten after this. */
export const MCP_LOGIN_PENDING_MS = 10 * 60_000;

/** Refresh when less than this is left of the access token's life, or less than 10% of it. */
const REFRESH_MARGIN_MS = 30_000;

/** A login failure the user can act on; `kind` maps to a Connect code at the API. */
export class McpLoginError extends Error {
  constructor(
    readonly kind: 'invalid' | 'not_found' | 'precondition' | 'unavailable',
    message: string,
  ) {
    super(message);
  }
}

interface Login {
  tokens: OAuthTokens;
  client: OAuthClientInformationMixed;
  discovery: OAuthDiscoveryState;
  /** When the tokens were obtained, ms since the epoch (expires_in counts from it). */
  obtainedAt: number;
}

interface Pending {
  verifier: string;
  client: OAuthClientInformationMixed | undefined;
  discovery: OAuthDiscoveryState | undefined;
}

export interface McpOAuth {
  /** The owner's login state of each remote server, by name. */
  statuses(ownerId: string, servers: readonly McpServerConfig[]): Promise<Map<string, McpAuthStatus>>;
  /**
   * The access token a tool-runner gets for this conversation's server, sealed for that
   * conversation and server (refreshed first when it is near its end, one refresh at a time per
   * login: the row is locked); `loginRequired` when the stored login was refused. The tool-runners
   * never see a refresh token.
   */
  accessTokenFor(ownerId: string, conversationId: string, server: McpServerConfig): Promise<{ sealed?: string; loginRequired: boolean }>;
  /**
   * The URL the user opens to log in; the verifier and state stay here. Discovers the server's
   * authorization server (protected resource metadata, then authorization server metadata) and
   * registers a client when the server offers dynamic registration; the login is authorization
   * code + PKCE.
   */
  start(ownerId: string, server: McpServerConfig, redirectUri: string): Promise<string>;
  /** Exchanges the code of the redirected URL; answers the server's name. */
  complete(ownerId: string, redirectedUrl: string, serverNamed: (name: string) => Promise<McpServerConfig | undefined>): Promise<string>;
  /** Deletes the owner's login, revoking its tokens first when the authorization server offers that. */
  logout(ownerId: string, server: McpServerConfig): Promise<boolean>;
}

export interface McpOAuthOptions {
  readonly pool: pg.Pool;
  readonly box: SecretBox;
  readonly logger: Logger;
  /** The fetch OAuth requests go through (tests); default the global one. */
  readonly fetch?: typeof fetch;
  readonly now?: () => number;
}

const loginAad = (ownerId: string, name: string, url: string) => `mcp-login\u0000${ownerId}\u0000${name}\u0000${url}`;
const pendingAad = (state: string, ownerId: string) => `mcp-pending\u0000${state}\u0000${ownerId}`;

/**
 * OAuth requests: https, or http to loopback only (the rule of server URLs), and no redirects
 * followed (a redirect is an error). The authorization server may live on another origin than
 * the MCP server (that is how OAuth works); the SDK checks that the protected resource metadata
 * names the server's own URL as its resource.
 */
function oauthFetch(base: typeof fetch): typeof fetch {
  return async (input, init) => {
    const url = input instanceof Request ? input.url : String(input);
    const problem = mcpUrlProblem(url.split('#')[0]!);
    if (problem) throw new Error(`refused an OAuth request to ${new URL(url).origin}: ${problem}`);
    const res = await base(url, { ...init, redirect: 'manual' });
    if (res.status >= 300 && res.status < 400) throw new Error(`${new URL(url).origin} answered a redirect, which is not followed`);
    return res;
  };
}

export function createMcpOAuth(options: McpOAuthOptions): McpOAuth {
  const { pool, box, logger } = options;
  const fetchFn = oauthFetch(options.fetch ?? fetch);
  const now = options.now ?? Date.now;

  const clientMetadata = (redirectUri: string): OAuthClientMetadata => ({
    client_name: 'Bedrock',
    redirect_uris: [redirectUri],
    grant_types: ['authorization_code', 'refresh_token'],
    response_types: ['code'],
    token_endpoint_auth_method: 'none',
  });

  async function readLogin(
    db: pg.Pool | pg.PoolClient,
    ownerId: string,
    server: McpServerConfig,
    lock = false,
  ): Promise<{ login: Login; invalid: boolean } | undefined> {
    const { rows } = await db.query<{ sealed: Buffer; invalid: boolean }>(
      `SELECT sealed, invalid FROM mcp_oauth_logins WHERE owner_id = $1 AND name = $2 AND server_url = $3${lock ? ' FOR UPDATE' : ''}`,
      [ownerId, server.name, server.url],
    );
    const row = rows[0];
    if (!row) return undefined;
    try {
      return { login: JSON.parse(box.open(row.sealed, loginAad(ownerId, server.name, server.url!))) as Login, invalid: row.invalid };
    } catch {
      // Sealed with another key (BEDROCK_MCP_TOKEN_KEY changed): as good as revoked.
      return { login: undefined as never, invalid: true };
    }
  }

  async function writeLogin(db: pg.Pool | pg.PoolClient, ownerId: string, server: McpServerConfig, login: Login): Promise<void> {
    const expiresAt = login.tokens.expires_in !== undefined ? new Date(login.obtainedAt + login.tokens.expires_in * 1000) : null;
    await db.query(
      `INSERT INTO mcp_oauth_logins (owner_id, name, server_url, sealed, expires_at, invalid, updated_at) VALUES ($1, $2, $3, $4, $5, false, now())
       ON CONFLICT (owner_id, name) DO UPDATE SET server_url = $3, sealed = $4, expires_at = $5, invalid = false, updated_at = now()`,
      [ownerId, server.name, server.url, box.seal(JSON.stringify(login), loginAad(ownerId, server.name, server.url!)), expiresAt],
    );
  }

  async function markInvalid(db: pg.PoolClient, ownerId: string, name: string): Promise<void> {
    await db.query('UPDATE mcp_oauth_logins SET invalid = true, updated_at = now() WHERE owner_id = $1 AND name = $2', [ownerId, name]);
  }

  /** Less than 30 s, or less than 10% of its life, left. */
  function needsRefresh(login: Login): boolean {
    const life = login.tokens.expires_in;
    if (life === undefined) return false;
    const left = login.obtainedAt + life * 1000 - now();
    return left < Math.max(REFRESH_MARGIN_MS, life * 100);
  }

  /** Refreshes under the row's lock (a concurrent refresh would spend a rotated refresh token twice). */
  async function refreshed(ownerId: string, server: McpServerConfig): Promise<Login | 'invalid' | undefined> {
    const client = await pool.connect();
    try {
      await client.query('BEGIN');
      const found = await readLogin(client, ownerId, server, true);
      if (!found) {
        await client.query('COMMIT');
        return undefined;
      }
      if (found.invalid) {
        // A row that no longer opens (the key changed) is marked, so listings say so too.
        if (!found.login) await markInvalid(client, ownerId, server.name);
        await client.query('COMMIT');
        return 'invalid';
      }
      const { login } = found;
      if (!needsRefresh(login)) {
        await client.query('COMMIT');
        return login;
      }
      const expired = login.obtainedAt + (login.tokens.expires_in ?? 0) * 1000 <= now();
      if (!login.tokens.refresh_token) {
        if (!expired) {
          await client.query('COMMIT');
          return login;
        }
        await client.query('UPDATE mcp_oauth_logins SET invalid = true, updated_at = now() WHERE owner_id = $1 AND name = $2', [
          ownerId,
          server.name,
        ]);
        await client.query('COMMIT');
        return 'invalid';
      }
      try {
        const tokens = await refreshAuthorization(login.discovery.authorizationServerUrl, {
          ...(login.discovery.authorizationServerMetadata ? { metadata: login.discovery.authorizationServerMetadata } : {}),
          clientInformation: login.client,
          refreshToken: login.tokens.refresh_token,
          ...(login.discovery.resourceMetadata?.resource ? { resource: new URL(login.discovery.resourceMetadata.resource) } : {}),
          fetchFn,
        });
        // A server that does not rotate refresh tokens keeps the old one.
        const next: Login = { ...login, tokens: { refresh_token: login.tokens.refresh_token, ...tokens }, obtainedAt: now() };
        await writeLogin(client, ownerId, server, next);
        await client.query('COMMIT');
        return next;
      } catch (err) {
        const name = (err as Error).constructor?.name ?? '';
        // The authorization server refused the refresh token (revoked, expired): the login is over.
        // Anything else (unreachable, 5xx): keep the login, use the token while it lasts.
        const refused = /InvalidGrant|InvalidClient|UnauthorizedClient/.test(name);
        logger.warn({ err, server: server.name, refused }, 'MCP OAuth refresh failed');
        if (refused) {
          await client.query('UPDATE mcp_oauth_logins SET invalid = true, updated_at = now() WHERE owner_id = $1 AND name = $2', [
            ownerId,
            server.name,
          ]);
          await client.query('COMMIT');
          return 'invalid';
        }
        await client.query('COMMIT');
        return expired ? 'invalid' : login;
      }
    } catch (err) {
      await client.query('ROLLBACK').catch(() => {});
      throw err;
    } finally {
      client.release();
    }
  }

  return {
    async statuses(ownerId, servers) {
      const statuses = new Map<string, McpAuthStatus>();
      const remote = servers.filter((s) => s.url);
      if (remote.length === 0) return statuses;
      const { rows } = await pool.query<{ name: string; server_url: string; invalid: boolean }>(
        'SELECT name, server_url, invalid FROM mcp_oauth_logins WHERE owner_id = $1',
        [ownerId],
      );
      for (const s of remote) {
        const row = rows.find((r) => r.name === s.name && r.server_url === s.url);
        statuses.set(s.name, !row ? 'none' : row.invalid ? 'login_required' : 'logged_in');
      }
      return statuses;
    },

    async accessTokenFor(ownerId, conversationId, server) {
      if (!server.url) return { loginRequired: false };
      const login = await refreshed(ownerId, server);
      if (login === undefined) return { loginRequired: false };
      if (login === 'invalid') return { loginRequired: true };
      const sealed = box.seal(login.tokens.access_token, mcpAccessTokenAad(conversationId, server.name)).toString('base64');
      return { sealed, loginRequired: false };
    },

    async start(ownerId, server, redirectUri) {
      if (!server.url) throw new McpLoginError('precondition', `"${server.name}" is a stdio server: only remote servers have a login`);
      const problem = mcpUrlProblem(redirectUri);
      if (problem) throw new McpLoginError('invalid', `the redirect URI: ${problem}`);
      const state = randomBytes(24).toString('base64url');
      const pending: Pending = { verifier: '', client: undefined, discovery: undefined };
      let authorizationUrl: URL | undefined;
      // An earlier registration with this authorization server is reused when its redirect URI is the same.
      const previous = await readLogin(pool, ownerId, server).catch(() => undefined);
      const reusable =
        previous?.login?.client && (previous.login.client as { redirect_uris?: string[] }).redirect_uris?.includes(redirectUri)
          ? previous.login.client
          : undefined;
      const provider: OAuthClientProvider = {
        redirectUrl: redirectUri,
        clientMetadata: clientMetadata(redirectUri),
        state: () => state,
        clientInformation: () => pending.client ?? reusable,
        saveClientInformation: (c) => {
          pending.client = c;
        },
        tokens: () => undefined,
        saveTokens: () => {},
        redirectToAuthorization: (url) => {
          authorizationUrl = url;
        },
        saveCodeVerifier: (v) => {
          pending.verifier = v;
        },
        codeVerifier: () => pending.verifier,
        saveDiscoveryState: (d) => {
          pending.discovery = d;
        },
        discoveryState: () => pending.discovery,
      };
      try {
        const result = await auth(provider, { serverUrl: server.url, fetchFn });
        if (result !== 'REDIRECT' || !authorizationUrl) throw new Error('the authorization server gave no authorization URL');
      } catch (err) {
        throw new McpLoginError('unavailable', `MCP server ${server.name}: the login could not be started: ${(err as Error).message}`);
      }
      if (!pending.discovery?.resourceMetadata) {
        throw new McpLoginError(
          'precondition',
          `MCP server ${server.name} publishes no OAuth protected resource metadata (/.well-known/oauth-protected-resource): it does not use OAuth the MCP way`,
        );
      }
      pending.client ??= reusable;
      await pool.query(`DELETE FROM mcp_oauth_pending WHERE created_at < now() - $1::interval`, [`${MCP_LOGIN_PENDING_MS} milliseconds`]);
      await pool.query(
        'INSERT INTO mcp_oauth_pending (state, owner_id, name, server_url, redirect_uri, sealed) VALUES ($1, $2, $3, $4, $5, $6)',
        [state, ownerId, server.name, server.url, redirectUri, box.seal(JSON.stringify(pending), pendingAad(state, ownerId))],
      );
      return authorizationUrl.href;
    },

    async complete(ownerId, redirectedUrl, serverNamed) {
      const text = redirectedUrl.trim();
      let params: URLSearchParams;
      try {
        params = text.includes('://') ? new URL(text).searchParams : new URLSearchParams(text.replace(/^\?/, ''));
      } catch {
        throw new McpLoginError('invalid', 'that is not the URL you were redirected to (it should hold ?code=...&state=...)');
      }
      const error = params.get('error');
      const state = params.get('state');
      const code = params.get('code');
      if (error) {
        throw new McpLoginError(
          'invalid',
          `the authorization server refused the login: ${error}${params.get('error_description') ? ` (${params.get('error_description')})` : ''}`,
        );
      }
      if (!state || !code)
        throw new McpLoginError('invalid', 'the URL holds no code and state: paste the whole URL you were redirected to');
      const { rows } = await pool.query<{ name: string; server_url: string; redirect_uri: string; sealed: Buffer }>(
        `DELETE FROM mcp_oauth_pending WHERE state = $1 AND owner_id = $2 AND created_at > now() - $3::interval
         RETURNING name, server_url, redirect_uri, sealed`,
        [state, ownerId, `${MCP_LOGIN_PENDING_MS} milliseconds`],
      );
      const row = rows[0];
      if (!row)
        throw new McpLoginError(
          'not_found',
          'this login is unknown or expired (10 minutes), or was started by another user: start it again',
        );
      const pending = JSON.parse(box.open(row.sealed, pendingAad(state, ownerId))) as Pending;
      const server = await serverNamed(row.name);
      if (!server || server.url !== row.server_url) {
        throw new McpLoginError('not_found', `the MCP server ${row.name} was removed or changed during the login: start it again`);
      }
      let tokens: OAuthTokens | undefined;
      const provider: OAuthClientProvider = {
        redirectUrl: row.redirect_uri,
        clientMetadata: clientMetadata(row.redirect_uri),
        clientInformation: () => pending.client,
        saveClientInformation: (c) => {
          pending.client = c;
        },
        tokens: () => undefined,
        saveTokens: (t) => {
          tokens = t;
        },
        redirectToAuthorization: () => {},
        saveCodeVerifier: () => {},
        codeVerifier: () => pending.verifier,
        saveDiscoveryState: (d) => {
          pending.discovery = d;
        },
        discoveryState: () => pending.discovery,
      };
      try {
        const result = await auth(provider, { serverUrl: server.url, authorizationCode: code, fetchFn });
        if (result !== 'AUTHORIZED' || !tokens) throw new Error('no tokens were issued');
      } catch (err) {
        throw new McpLoginError('unavailable', `MCP server ${server.name}: the code could not be exchanged: ${(err as Error).message}`);
      }
      await writeLogin(pool, ownerId, server, { tokens, client: pending.client!, discovery: pending.discovery!, obtainedAt: now() });
      return server.name;
    },

    async logout(ownerId, server) {
      const found = await readLogin(pool, ownerId, server).catch(() => undefined);
      let revoked = false;
      const metadata = found?.login?.discovery.authorizationServerMetadata as { revocation_endpoint?: string } | undefined;
      const endpoint = metadata?.revocation_endpoint;
      if (found?.login && endpoint) {
        // RFC 7009: the refresh token (which revokes the grant), then the access token.
        for (const token of [found.login.tokens.refresh_token, found.login.tokens.access_token]) {
          if (!token) continue;
          try {
            const res = await fetchFn(endpoint, {
              method: 'POST',
              headers: { 'content-type': 'application/x-www-form-urlencoded' },
              body: new URLSearchParams({ token, client_id: found.login.client.client_id }),
            });
            revoked ||= res.ok;
          } catch (err) {
            logger.warn({ err, server: server.name }, 'MCP OAuth revocation failed; the tokens are deleted anyway');
          }
        }
      }
      await pool.query('DELETE FROM mcp_oauth_logins WHERE owner_id = $1 AND name = $2', [ownerId, server.name]);
      return revoked;
    },
  };
}
