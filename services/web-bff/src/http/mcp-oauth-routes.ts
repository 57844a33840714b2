/**
 * The web UI's OAuth login to a remote MCP server (docs/mcp.md, "OAuth logins to remote servers"):
 * `GET /mcp/oauth/start?server=NAME` has the conversation service start the login and sends the
 * browser to the authorization server, with a cookie binding the login to this browser;
 * `GET /mcp/oauth/callback` completes the login of that cookie's state, and without the cookie asks
 * for its URL to be pasted into the CLI.
 */
import { timingSafeEqual } from 'node:crypto';
import { ConnectError } from '@connectrpc/connect';
import type { Logger } from '@bedrock/platform/server';
import type { Upstream } from '../upstream/conversation-client.ts';
import type { NodeHandler, NodeServerRequest, NodeServerResponse } from './node-types.ts';

export const MCP_OAUTH_START = '/mcp/oauth/start';
export const MCP_OAUTH_CALLBACK = '/mcp/oauth/callback';
const COOKIE = 'bedrock_mcp_login';

export interface McpOAuthRoutesOptions {
  readonly upstream: Upstream;
  readonly authenticate: (
    authorization: string | undefined,
  ) => { user: string } | { error: ConnectError } | Promise<{ user: string } | { error: ConnectError }>;
  /** The public origin the authorization server redirects to (BEDROCK_PUBLIC_URL); unset: the request's own. */
  readonly publicUrl?: string | undefined;
  readonly logger: Logger;
}

/** web-bff's callback URL as the browser reaches it. */
export function callbackUrl(publicUrl: string | undefined, host: string | undefined, tls: boolean): string {
  const base = publicUrl ?? `${tls ? 'https' : 'http'}://${host ?? '127.0.0.1'}`;
  return new URL(MCP_OAUTH_CALLBACK, base).href;
}

const escape = (s: string) => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

function page(res: NodeServerResponse, status: number, title: string, body: string): void {
  res.writeHead(status, { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-store', 'referrer-policy': 'no-referrer' });
  res.end(`<!doctype html><meta charset="utf-8"><title>${escape(title)}</title><h1>${escape(title)}</h1><p>${body}</p>`);
}

function cookieOf(req: NodeServerRequest): { user: string; state: string } | undefined {
  const raw = String(req.headers.cookie ?? '')
    .split(';')
    .map((c) => c.trim())
    .find((c) => c.startsWith(`${COOKIE}=`));
  if (!raw) return undefined;
  const [user, state] = raw.slice(COOKIE.length + 1).split('.');
  if (!user || !state) return undefined;
  return { user: Buffer.from(user, 'base64url').toString('utf8'), state };
}

const sameText = (a: string, b: string) => a.length === b.length && timingSafeEqual(Buffer.from(a), Buffer.from(b));

/** Serves the two routes; everything else goes to `next`. */
export function mcpOAuthRoutes(options: McpOAuthRoutesOptions, next: NodeHandler): NodeHandler {
  const { upstream, logger } = options;
  return (req, res) => {
    const url = new URL(req.url ?? '/', 'http://x');
    if (req.method !== 'GET' || (url.pathname !== MCP_OAUTH_START && url.pathname !== MCP_OAUTH_CALLBACK)) return next(req, res);
    const tls = Boolean((req.socket as { encrypted?: boolean }).encrypted);
    void (url.pathname === MCP_OAUTH_START ? start(req, res, url, tls) : callback(req, res, url)).catch((err: unknown) => {
      logger.warn({ err }, 'MCP OAuth route failed');
      if (!res.headersSent) page(res, 500, 'MCP login failed', 'An unexpected error; see the server log.');
    });
  };

  /**
   * `GET /mcp/oauth/start?server=NAME`, with the user's bearer token: the conversation service
   * starts the login (PKCE verifier and state kept in its database, never in a URL) and this
   * answers 302 to the authorization server, or `{"authorizationUrl": ...}` to a caller that
   * accepts JSON (the UI, which calls it with fetch and opens the URL). Its cookie (HttpOnly,
   * SameSite=Lax, 10 minutes, path /mcp/oauth/callback) holds the user and the login's state:
   * the browser that started the login is the one that may complete it.
   */
  async function start(req: NodeServerRequest, res: NodeServerResponse, url: URL, tls: boolean): Promise<void> {
    const json = String(req.headers.accept ?? '').includes('application/json');
    const fail = (status: number, message: string) => {
      if (json) {
        res.writeHead(status, { 'content-type': 'application/json', 'cache-control': 'no-store' });
        res.end(JSON.stringify({ error: message }));
      } else page(res, status, 'MCP login failed', escape(message));
    };
    const who = await options.authenticate(req.headers.authorization);
    if ('error' in who) return fail(401, `${who.error.rawMessage}: call this with your bearer token (Authorization header)`);
    const name = url.searchParams.get('server') ?? '';
    if (name === '') return fail(400, 'give the server: /mcp/oauth/start?server=NAME');
    let authorizationUrl: string;
    try {
      const host = req.headers.host ?? (req.headers as Record<string, string | undefined>)[':authority'];
      const redirectUri = callbackUrl(options.publicUrl, host, tls);
      ({ authorizationUrl } = await upstream.mcp.startMcpLogin({ name, redirectUri }, upstream.options(who.user)));
    } catch (err) {
      const e = ConnectError.from(err);
      return fail(e.code === 5 ? 404 : e.code === 9 || e.code === 3 ? 400 : 502, e.rawMessage);
    }
    const state = new URL(authorizationUrl).searchParams.get('state') ?? '';
    const secure = tls || options.publicUrl?.startsWith('https:') ? '; Secure' : '';
    const cookie = `${COOKIE}=${Buffer.from(who.user).toString('base64url')}.${state}; Path=${MCP_OAUTH_CALLBACK}; Max-Age=600; HttpOnly; SameSite=Lax${secure}`;
    if (json) {
      res.writeHead(200, { 'content-type': 'application/json', 'cache-control': 'no-store', 'set-cookie': cookie });
      res.end(JSON.stringify({ authorizationUrl }));
    } else {
      res.writeHead(302, { location: authorizationUrl, 'cache-control': 'no-store', 'set-cookie': cookie });
      res.end();
    }
  }

  /**
   * `GET /mcp/oauth/callback?code=...&state=...`: where the authorization server sends the
   * browser back. With the cookie of the same state, the code is exchanged (as the cookie's
   * user, for a login of that user's only) and a small page says so. Without it (the login was
   * started by `bedrock mcp login`, or in another browser) nothing is exchanged and the page
   * asks to paste this URL into the CLI, whose call is authenticated.
   */
  async function callback(req: NodeServerRequest, res: NodeServerResponse, url: URL): Promise<void> {
    const state = url.searchParams.get('state') ?? '';
    const bound = cookieOf(req);
    const clear = `${COOKIE}=; Path=${MCP_OAUTH_CALLBACK}; Max-Age=0; HttpOnly; SameSite=Lax`;
    if (!bound || state === '' || !sameText(bound.state, state)) {
      // Not this browser's login: the CLI completes it with this URL (its call is authenticated).
      page(
        res,
        200,
        'Finish the login in the CLI',
        'This login was started by <code>bedrock mcp login</code> (or in another browser): copy this page&#39;s full URL from the address bar and paste it where the CLI asks for it.',
      );
      return;
    }
    try {
      const { name } = await upstream.mcp.completeMcpLogin({ redirectedUrl: url.search }, upstream.options(bound.user));
      res.setHeader('set-cookie', clear);
      page(
        res,
        200,
        `Logged in to ${name}`,
        `Your Bedrock conversations can now use the MCP server ${escape(name)}. You can close this tab.`,
      );
    } catch (err) {
      res.setHeader('set-cookie', clear);
      page(res, 400, 'MCP login failed', escape(ConnectError.from(err).rawMessage));
    }
  }
}
