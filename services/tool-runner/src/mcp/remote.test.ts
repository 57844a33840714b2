/**
 * The host with remote servers (Streamable HTTP) against the test OAuth MCP server: the sealed token
 * sent, logins needed or invalid reported, readOnlyHint believed only when trusted, the origin confined.
 */
import { describe, it, expect, beforeAll, afterAll } from '@jest/globals';
import { randomBytes } from 'node:crypto';
import { create } from '@bufbuild/protobuf';
import { McpServerSpecSchema } from '@bedrock/contracts';
import { createSecretBox, mcpAccessTokenAad } from '@bedrock/platform/server';
import { startOAuthMcpServer, type OAuthMcpServer } from '@bedrock/testkit/oauth-mcp-server';
import { closeSandboxSettings } from '../sandbox/sandbox-settings.ts';
import type { SandboxSettings } from '../sandbox/sandbox-settings.ts';
import { tempDir, testSandboxSettings } from '../../test/support.ts';
import { createMcpHost, MCP_HOST_DEFAULTS, type McpHost } from './host.ts';
import { confinedFetch } from './session.ts';

const box = createSecretBox(randomBytes(32));
let sandbox: SandboxSettings;
let host: McpHost;
let server: OAuthMcpServer;
let open: OAuthMcpServer;
const dir = tempDir();
const place = (conversationId: string) => ({ conversationId, mode: 'unrestricted' as const, cwd: dir.path });

/** A token from the test authorization server by its own flow (register, authorize, token). */
async function tokenFor(s: OAuthMcpServer): Promise<string> {
  const redirect = 'http://127.0.0.1:1/cb';
  const reg = (await (
    await fetch(`${s.issuer}/register`, { method: 'POST', body: JSON.stringify({ redirect_uris: [redirect] }) })
  ).json()) as { client_id: string };
  const verifier = randomBytes(32).toString('base64url');
  const { createHash } = await import('node:crypto');
  const challenge = createHash('sha256').update(verifier).digest('base64url');
  const auth = await fetch(
    `${s.issuer}/authorize?response_type=code&client_id=${reg.client_id}&redirect_uri=${encodeURIComponent(redirect)}&code_challenge=${challenge}&code_challenge_method=S256`,
    { redirect: 'manual' },
  );
  const code = new URL(auth.headers.get('location')!).searchParams.get('code')!;
  const tok = (await (
    await fetch(`${s.issuer}/token`, {
      method: 'POST',
      body: new URLSearchParams({
        grant_type: 'authorization_code',
        code,
        code_verifier: verifier,
        client_id: reg.client_id,
        redirect_uri: redirect,
      }),
    })
  ).json()) as { access_token: string };
  return tok.access_token;
}

beforeAll(async () => {
  sandbox = await testSandboxSettings();
  host = createMcpHost({
    sandbox,
    capture: { headBytes: 50_000, tailBytes: 50_000 },
    ...MCP_HOST_DEFAULTS,
    openAccessToken: (sealed, conversationId, name) => box.open(Buffer.from(sealed, 'base64'), mcpAccessTokenAad(conversationId, name)),
  });
  server = await startOAuthMcpServer();
  open = await startOAuthMcpServer({ open: true });
}, 30_000);

afterAll(async () => {
  await host.close();
  await server.close();
  await open.close();
  dir.remove();
  await closeSandboxSettings(sandbox);
});

describe('remote MCP servers on the runner', () => {
  it('says to log in when the server answers 401 and no token was sent', async () => {
    const spec = create(McpServerSpecSchema, { name: 'remote', url: server.url });
    const out = await host.call(place('c1'), spec, 'mcp__remote__echo', { text: 'x' }, new AbortController().signal);
    expect(out.isError).toBe(true);
    expect(out.display.error).toBe('auth');
    expect(out.content).toBe('MCP server remote: it needs you to log in; run `bedrock mcp login remote` or log in from the web UI.');
  });

  it('refuses a call of a server whose login is no longer valid, saying what to do', async () => {
    const spec = create(McpServerSpecSchema, { name: 'remote', url: server.url, loginRequired: true });
    const out = await host.call(place('c2'), spec, 'mcp__remote__echo', { text: 'x' }, new AbortController().signal);
    expect(out.display.error).toBe('auth');
    expect(out.content).toContain('MCP server remote: your login is no longer valid (revoked or expired); run `bedrock mcp login remote`');
  });

  it('sends the opened token; a token sealed for another conversation does not open', async () => {
    const token = await tokenFor(server);
    const sealed = box.seal(token, mcpAccessTokenAad('c3', 'remote')).toString('base64');
    const spec = create(McpServerSpecSchema, { name: 'remote', url: server.url, sealedAccessToken: sealed });
    const out = await host.call(place('c3'), spec, 'mcp__remote__echo', { text: 'hi' }, new AbortController().signal);
    expect(out).toMatchObject({ isError: false, content: 'echo: hi' });
    const moved = await host.call(place('c4'), spec, 'mcp__remote__echo', { text: 'hi' }, new AbortController().signal);
    expect(moved.isError).toBe(true);
    expect(moved.content).toContain('cannot be opened');
  });

  it("believes a remote server's readOnlyHint in Restricted mode only when it is trusted", async () => {
    const restricted = { conversationId: 'c5', mode: 'restricted' as const, cwd: dir.path };
    const untrusted = create(McpServerSpecSchema, { name: 'open', url: open.url });
    const refused = await host.call(restricted, untrusted, 'mcp__open__echo', { text: 'x' }, new AbortController().signal);
    expect(refused.display.error).toBe('mode');
    expect(refused.content).toContain('neither sandboxed read-only nor trusted');
    const trusted = create(McpServerSpecSchema, { name: 'open', url: open.url, trusted: true });
    const ran = await host.call(
      { ...restricted, conversationId: 'c6' },
      trusted,
      'mcp__open__echo',
      { text: 'y' },
      new AbortController().signal,
    );
    expect(ran).toMatchObject({ isError: false, content: 'echo: y' });
    // Trusted or not, a write tool needs Unrestricted.
    const write = await host.call(
      { ...restricted, conversationId: 'c7' },
      trusted,
      'mcp__open__write',
      { text: 'z' },
      new AbortController().signal,
    );
    expect(write.display.error).toBe('mode');
  });

  it('confines every request to the configured origin and adds the token only there', async () => {
    const seen: { url: string; auth: string | null; redirect: RequestInit['redirect'] }[] = [];
    const base = (async (url: string | URL | Request, init?: RequestInit) => {
      seen.push({ url: String(url), auth: new Headers(init?.headers).get('authorization'), redirect: init?.redirect });
      return new Response('{}');
    }) as typeof fetch;
    const f = confinedFetch('https://mcp.example.com', () => 'tok', base);
    await f('https://mcp.example.com/mcp', { method: 'POST' });
    await expect(f('https://other.example.com/mcp')).rejects.toThrow('may only be reached at https://mcp.example.com');
    await expect(f('http://mcp.example.com/mcp')).rejects.toThrow('refused to connect');
    expect(seen).toEqual([{ url: 'https://mcp.example.com/mcp', auth: 'Bearer tok', redirect: 'manual' }]);
  });
});
