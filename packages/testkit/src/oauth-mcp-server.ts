/**
 * An OAuth-protected remote MCP server for tests (docs/mcp.md, "OAuth logins to remote servers"), as strict
 * as a real one: an authorization server on its own origin (RFC 8414 metadata, dynamic client registration,
 * PKCE, refresh token rotation, revocation) and a resource server on another origin (RFC 9728 metadata, an
 * SDK McpServer at `/mcp` behind bearer tokens). It counts logins, refreshes and refused tokens, so a test
 * can show there was no re-login.
 */
import { createHash, randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { z } from 'zod';

export interface OAuthMcpServerOptions {
  /** How long an access token lives, ms. Default 60 s. */
  readonly accessTokenLifetimeMs?: number;
  /** The resource metadata names this resource instead of the server's own URL (an attack). */
  readonly resourceOverride?: string;
  /** `/mcp` answers a redirect to this URL instead of MCP (an attack). */
  readonly redirectMcpTo?: string;
  /** No OAuth at all: `/mcp` is open. */
  readonly open?: boolean;
}

export interface OAuthMcpServer {
  /** The MCP endpoint: `http://127.0.0.1:PORT/mcp`. */
  readonly url: string;
  readonly issuer: string;
  /** Logins (codes issued), refreshes, refused tokens, revocations and MCP calls so far. */
  readonly stats: { logins: number; refreshes: number; refused: number; revocations: number; calls: number };
  /** Every access and refresh token issued (to look for them where they must not be). */
  readonly issued: string[];
  /** Revokes every grant (the user withdrew consent at the provider). */
  revokeAll(): void;
  close(): Promise<void>;
}

interface Grant {
  clientId: string;
  refreshToken: string;
  revoked: boolean;
}

const form = async (req: IncomingMessage): Promise<URLSearchParams> => {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  return new URLSearchParams(Buffer.concat(chunks).toString('utf8'));
};

const json = (res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) => {
  res.writeHead(status, { 'content-type': 'application/json', 'cache-control': 'no-store', ...headers });
  res.end(JSON.stringify(body));
};

const listen = async (server: Server): Promise<string> => {
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
};

/**
 * Starts both servers on 127.0.0.1:
 *
 * - the authorization server: RFC 8414 metadata, dynamic client registration (RFC 7591), `/authorize`
 *   that approves the test user at once (302 to the registered redirect URI with code and state), `/token`
 *   (authorization_code with a PKCE S256 check, the registered redirect URI and client; refresh_token with
 *   rotation: a used refresh token is spent), `/revoke` (RFC 7009: revoking a refresh token ends the grant);
 * - the resource server: RFC 9728 protected resource metadata and, at `/mcp`, an SDK McpServer over
 *   StreamableHTTPServerTransport (stateless) with a read-only tool `echo` and a write tool `write`, behind
 *   bearer tokens (401 with WWW-Authenticate naming the metadata).
 */
export async function startOAuthMcpServer(options: OAuthMcpServerOptions = {}): Promise<OAuthMcpServer> {
  const lifetime = options.accessTokenLifetimeMs ?? 60_000;
  const stats = { logins: 0, refreshes: 0, refused: 0, revocations: 0, calls: 0 };
  const clients = new Map<string, { redirectUris: string[] }>();
  const codes = new Map<string, { clientId: string; redirectUri: string; challenge: string; resource: string | null; expires: number }>();
  const access = new Map<string, { grant: Grant; expires: number }>();
  const refresh = new Map<string, Grant>();
  const issued: string[] = [];
  const token = () => {
    const t = randomBytes(24).toString('base64url');
    issued.push(t);
    return t;
  };

  const as = createServer((req, res) => {
    void (async () => {
      const url = new URL(req.url ?? '/', issuer);
      if (url.pathname === '/.well-known/oauth-authorization-server') {
        return json(res, 200, {
          issuer,
          authorization_endpoint: `${issuer}/authorize`,
          token_endpoint: `${issuer}/token`,
          registration_endpoint: `${issuer}/register`,
          revocation_endpoint: `${issuer}/revoke`,
          response_types_supported: ['code'],
          grant_types_supported: ['authorization_code', 'refresh_token'],
          code_challenge_methods_supported: ['S256'],
          token_endpoint_auth_methods_supported: ['none'],
        });
      }
      if (url.pathname === '/register' && req.method === 'POST') {
        const chunks: Buffer[] = [];
        for await (const c of req) chunks.push(c as Buffer);
        const meta = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { redirect_uris?: string[] };
        if (!Array.isArray(meta.redirect_uris) || meta.redirect_uris.length === 0) {
          return json(res, 400, { error: 'invalid_redirect_uri' });
        }
        const clientId = `client-${token()}`;
        clients.set(clientId, { redirectUris: meta.redirect_uris });
        return json(res, 201, { ...meta, client_id: clientId, client_id_issued_at: Math.floor(Date.now() / 1000) });
      }
      if (url.pathname === '/authorize' && req.method === 'GET') {
        const p = url.searchParams;
        const client = clients.get(p.get('client_id') ?? '');
        const redirectUri = p.get('redirect_uri') ?? '';
        if (!client || !client.redirectUris.includes(redirectUri)) return json(res, 400, { error: 'invalid_request' });
        if (p.get('response_type') !== 'code' || p.get('code_challenge_method') !== 'S256' || !p.get('code_challenge')) {
          return json(res, 400, { error: 'invalid_request', error_description: 'PKCE S256 is required' });
        }
        // The test user approves at once.
        const code = token();
        codes.set(code, {
          clientId: p.get('client_id')!,
          redirectUri,
          challenge: p.get('code_challenge')!,
          resource: p.get('resource'),
          expires: Date.now() + 60_000,
        });
        stats.logins++;
        const back = new URL(redirectUri);
        back.searchParams.set('code', code);
        if (p.get('state')) back.searchParams.set('state', p.get('state')!);
        res.writeHead(302, { location: back.href });
        return res.end();
      }
      if (url.pathname === '/token' && req.method === 'POST') {
        const p = await form(req);
        const issue = (grant: Grant) => {
          const at = token();
          access.set(at, { grant, expires: Date.now() + lifetime });
          return json(res, 200, {
            access_token: at,
            token_type: 'Bearer',
            expires_in: Math.max(1, Math.round(lifetime / 1000)),
            refresh_token: grant.refreshToken,
          });
        };
        if (p.get('grant_type') === 'authorization_code') {
          const c = codes.get(p.get('code') ?? '');
          codes.delete(p.get('code') ?? '');
          const verifier = p.get('code_verifier') ?? '';
          const challenge = createHash('sha256').update(verifier).digest('base64url');
          if (!c || c.expires < Date.now() || c.clientId !== p.get('client_id') || c.redirectUri !== p.get('redirect_uri')) {
            return json(res, 400, { error: 'invalid_grant' });
          }
          if (challenge !== c.challenge) return json(res, 400, { error: 'invalid_grant', error_description: 'PKCE verification failed' });
          const grant: Grant = { clientId: c.clientId, refreshToken: token(), revoked: false };
          refresh.set(grant.refreshToken, grant);
          return issue(grant);
        }
        if (p.get('grant_type') === 'refresh_token') {
          const grant = refresh.get(p.get('refresh_token') ?? '');
          if (!grant || grant.revoked || grant.clientId !== p.get('client_id')) return json(res, 400, { error: 'invalid_grant' });
          // Rotation: the used refresh token is spent.
          refresh.delete(grant.refreshToken);
          grant.refreshToken = token();
          refresh.set(grant.refreshToken, grant);
          stats.refreshes++;
          return issue(grant);
        }
        return json(res, 400, { error: 'unsupported_grant_type' });
      }
      if (url.pathname === '/revoke' && req.method === 'POST') {
        const p = await form(req);
        const t = p.get('token') ?? '';
        const grant = refresh.get(t) ?? access.get(t)?.grant;
        if (grant) {
          grant.revoked = true;
          stats.revocations++;
        }
        res.writeHead(200);
        return res.end();
      }
      json(res, 404, { error: 'not_found' });
    })().catch(() => json(res, 500, { error: 'server_error' }));
  });
  const issuer = await listen(as);

  const rs = createServer((req, res) => {
    void (async () => {
      const url = new URL(req.url ?? '/', base);
      if (url.pathname === '/.well-known/oauth-protected-resource' || url.pathname === '/.well-known/oauth-protected-resource/mcp') {
        if (options.open) return json(res, 404, { error: 'not_found' });
        return json(res, 200, { resource: options.resourceOverride ?? `${base}/mcp`, authorization_servers: [issuer] });
      }
      if (url.pathname !== '/mcp') return json(res, 404, { error: 'not_found' });
      if (options.redirectMcpTo) {
        res.writeHead(307, { location: options.redirectMcpTo });
        return res.end();
      }
      if (!options.open) {
        const bearer = /^Bearer (.+)$/.exec(req.headers.authorization ?? '')?.[1];
        const found = bearer ? access.get(bearer) : undefined;
        if (!found || found.expires < Date.now() || found.grant.revoked) {
          stats.refused++;
          return json(
            res,
            401,
            { error: 'invalid_token' },
            { 'www-authenticate': `Bearer error="invalid_token", resource_metadata="${base}/.well-known/oauth-protected-resource/mcp"` },
          );
        }
      }
      // Stateless: a fresh server and transport per request.
      const server = new McpServer({ name: 'oauth-test', version: '1.0.0' });
      server.registerTool(
        'echo',
        { description: 'Echoes its text.', inputSchema: { text: z.string() }, annotations: { readOnlyHint: true } },
        ({ text }) => {
          stats.calls++;
          return { content: [{ type: 'text', text: `echo: ${text}` }] };
        },
      );
      server.registerTool(
        'write',
        { description: 'Pretends to write.', inputSchema: { text: z.string() }, annotations: { readOnlyHint: false } },
        ({ text }) => {
          stats.calls++;
          return { content: [{ type: 'text', text: `wrote: ${text}` }] };
        },
      );
      const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
      res.on('close', () => {
        void transport.close();
        void server.close();
      });
      await server.connect(transport);
      await transport.handleRequest(req, res);
    })().catch(() => {
      if (!res.headersSent) json(res, 500, { error: 'server_error' });
    });
  });
  const base = await listen(rs);

  return {
    url: `${base}/mcp`,
    issuer,
    stats,
    issued,
    revokeAll() {
      for (const g of refresh.values()) g.revoked = true;
    },
    async close() {
      as.closeAllConnections();
      rs.closeAllConnections();
      await Promise.all([new Promise((r) => as.close(r)), new Promise((r) => rs.close(r))]);
    },
  };
}
