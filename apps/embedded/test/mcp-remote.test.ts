/**
 * Remote MCP servers (Streamable HTTP) with OAuth 2.1 per user, end to end through the public API of the
 * embedded product on real Postgres, against an OAuth-protected MCP server of our own
 * (packages/testkit/src/oauth-mcp-server.ts: an authorization server and a resource server on two
 * origins): the login flows, long sessions, revocation, tokens sealed at rest, readOnlyHint trusted only
 * when the operator says so, no other origin followed, logout.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { Code, ConnectError, createClient } from '@connectrpc/connect';
import { createConnectTransport } from '@connectrpc/connect-node';
import { ConversationService, McpService, StateKind } from '@bedrock/contracts';
import { createTestDatabase, type TestDatabase } from '@bedrock/testkit/database';
import { startOAuthMcpServer, type OAuthMcpServer } from '@bedrock/testkit/oauth-mcp-server';
import { startEmbedded, type RunningEmbedded } from '../src/index.ts';

let bedrock: RunningEmbedded;
let conversations: ReturnType<typeof createClient<typeof ConversationService>>;
let mcp: ReturnType<typeof createClient<typeof McpService>>;
let db: TestDatabase;
let pool: pg.Pool;
let session: OAuthMcpServer;
let open: OAuthMcpServer;
let evilResource: OAuthMcpServer;
let redirecting: OAuthMcpServer;
let elsewhere: Server;
let elsewhereHits = 0;
const dataDir = mkdtempSync(join(tmpdir(), 'bedrock-mcp-remote-'));
const workspace = mkdtempSync(join(tmpdir(), 'bedrock-mcp-remote-ws-'));

beforeAll(async () => {
  db = await createTestDatabase('mcp_remote');
  pool = new pg.Pool({ connectionString: db.url, max: 2 });
  elsewhere = createServer((_req, res) => {
    elsewhereHits++;
    res.end('{}');
  });
  await new Promise<void>((r) => elsewhere.listen(0, '127.0.0.1', r));
  const elsewhereUrl = `http://127.0.0.1:${(elsewhere.address() as AddressInfo).port}/mcp`;
  // Short-lived access tokens: a 20 s session spans several of them.
  session = await startOAuthMcpServer({ accessTokenLifetimeMs: 3000 });
  open = await startOAuthMcpServer({ open: true });
  evilResource = await startOAuthMcpServer({ resourceOverride: elsewhereUrl });
  redirecting = await startOAuthMcpServer({ open: true, redirectMcpTo: elsewhereUrl });
  bedrock = await startEmbedded({
    env: {
      ...process.env,
      BEDROCK_DATA_DIR: dataDir,
      BEDROCK_PORT: '0',
      BEDROCK_GRPC_PORT: '0',
      ANTHROPIC_API_KEY: '',
      DATABASE_URL: db.url,
      LOG_LEVEL: 'error',
      BEDROCK_MCP_SERVERS: JSON.stringify({
        sess: { url: session.url, trusted: true },
        redir: { url: redirecting.url, trusted: true },
      }),
    },
  });
  const transport = createConnectTransport({
    baseUrl: bedrock.httpUrl,
    httpVersion: '1.1',
    interceptors: [
      (next) => (req) => {
        req.header.set('authorization', `Bearer ${bedrock.token}`);
        return next(req);
      },
    ],
  });
  conversations = createClient(ConversationService, transport);
  mcp = createClient(McpService, transport);
}, 120_000);

afterAll(async () => {
  await bedrock?.stop();
  await pool?.end();
  await db?.drop();
  for (const s of [session, open, evilResource, redirecting]) await s?.close();
  elsewhere?.close();
  rmSync(dataDir, { recursive: true, force: true });
  rmSync(workspace, { recursive: true, force: true });
});

type Result = { content: string; isError: boolean };

async function results(id: string): Promise<Result[]> {
  const { messages } = await conversations.getConversation({ conversationId: id });
  return messages.flatMap((m) =>
    m.content.flatMap((b) => (b.block.case === 'toolResult' ? [{ content: b.block.value.content, isError: b.block.value.isError }] : [])),
  );
}

async function turn(id: string, line: string): Promise<Result> {
  const before = (await results(id)).length;
  await conversations.sendMessage({ conversationId: id, text: line });
  const deadline = Date.now() + 60_000;
  for (;;) {
    const kind = (await conversations.getConversation({ conversationId: id })).conversation?.state?.kind;
    if (kind === StateKind.IDLE) break;
    if (Date.now() > deadline) throw new Error('the turn did not end');
    await sleep(100);
  }
  const got = (await results(id)).slice(before);
  return got[0] ?? { content: '(no tool result: the model was not offered the tool)', isError: true };
}

/** The CLI's paste flow: open the authorization URL (the test AS approves at once), paste where it lands. */
async function loginByPaste(name: string): Promise<void> {
  const { authorizationUrl } = await mcp.startMcpLogin({ name });
  const res = await fetch(authorizationUrl, { redirect: 'manual' });
  expect(res.status).toBe(302);
  const landed = res.headers.get('location')!;
  expect(landed).toContain('/mcp/oauth/callback?');
  await mcp.completeMcpLogin({ redirectedUrl: landed });
}

const statusOf = async (name: string) => (await mcp.listMcpServers({})).servers.find((s) => s.name === name);

describe('remote MCP servers with OAuth', () => {
  let id = '';

  it('lists a remote server with its login state and says to log in before a call', async () => {
    id = (await conversations.createConversation({ cwd: workspace })).conversation!.id;
    const listed = await statusOf('sess');
    expect(listed).toMatchObject({ url: session.url, authStatus: 'none', loginPath: '/mcp/oauth/start?server=sess', trusted: true });
    // Not logged in: the server's tools cannot be listed, so the model is not offered them.
    const before = await turn(id, '$mcp sess echo {"text": "hi"}');
    expect(before.content).toContain('not offered');
  }, 60_000);

  it('logs in with the paste flow; the token is sealed in Postgres; a trusted read-only tool runs in Restricted', async () => {
    await loginByPaste('sess');
    expect((await statusOf('sess'))?.authStatus).toBe('logged_in');
    expect(session.stats.logins).toBe(1);
    const { rows } = await pool.query<{ sealed: Buffer }>("SELECT sealed FROM mcp_oauth_logins WHERE name = 'sess'");
    expect(rows).toHaveLength(1);
    for (const t of session.issued) {
      expect(rows[0]!.sealed.includes(Buffer.from(t))).toBe(false);
      expect(rows[0]!.sealed.toString('latin1')).not.toContain(t);
    }
    const r = await turn(id, '$mcp sess echo {"text": "hello remote"}');
    expect(r).toEqual({ isError: false, content: 'echo: hello remote' });
  }, 60_000);

  it('keeps a session going across many token lifetimes with zero re-logins', async () => {
    const end = Date.now() + 20_000;
    let calls = 0;
    while (Date.now() < end) {
      const r = await turn(id, `$mcp sess echo {"text": "call ${calls}"}`);
      expect(r).toEqual({ isError: false, content: `echo: call ${calls}` });
      calls++;
      await sleep(1500);
    }
    expect(calls).toBeGreaterThan(5);
    expect(session.stats.logins).toBe(1);
    expect(session.stats.refreshes).toBeGreaterThanOrEqual(5);
  }, 90_000);

  it('reports a revoked login clearly, in the call and in the listing', async () => {
    session.revokeAll();
    await sleep(3500); // the access token in hand expires; the refresh is refused
    const r = await turn(id, '$mcp sess echo {"text": "after revoke"}');
    // The listing failed, so the tool is not offered; the listing says why.
    expect(r.isError).toBe(true);
    expect((await statusOf('sess'))?.authStatus).toBe('login_required');
    // Logging in again brings it back.
    await loginByPaste('sess');
    expect((await statusOf('sess'))?.authStatus).toBe('logged_in');
    expect(await turn(id, '$mcp sess echo {"text": "back"}')).toEqual({ isError: false, content: 'echo: back' });
  }, 60_000);

  it('logs in through the web routes: start redirects with a bound cookie, the callback completes', async () => {
    const start = await fetch(`${bedrock.httpUrl}/mcp/oauth/start?server=sess`, {
      headers: { authorization: `Bearer ${bedrock.token}` },
      redirect: 'manual',
    });
    expect(start.status).toBe(302);
    const cookie = start.headers.get('set-cookie')!.split(';')[0]!;
    const atAs = await fetch(start.headers.get('location')!, { redirect: 'manual' });
    const callback = atAs.headers.get('location')!;
    // Another browser (no cookie) cannot complete it: the page asks for the CLI's paste.
    const stranger = await fetch(callback);
    expect(await stranger.text()).toContain('Finish the login in the CLI');
    const done = await fetch(callback, { headers: { cookie } });
    expect(done.status).toBe(200);
    expect(await done.text()).toContain('Logged in to sess');
    // Without a bearer token, start refuses.
    expect((await fetch(`${bedrock.httpUrl}/mcp/oauth/start?server=sess`, { redirect: 'manual' })).status).toBe(401);
  }, 60_000);

  it("does not believe an untrusted remote server's readOnlyHint in Restricted mode", async () => {
    await mcp.addMcpServer({ name: 'open', url: open.url });
    expect((await statusOf('open'))?.authStatus).toBe('none');
    const r = await turn(id, '$mcp open echo {"text": "x"}');
    expect(r.isError).toBe(true);
    expect(r.content).toContain('neither sandboxed read-only nor trusted');
    expect(open.stats.calls).toBe(0);
  }, 60_000);

  it('never follows a server to another origin', async () => {
    // Its resource metadata names another resource: the login is refused before any redirect.
    await mcp.addMcpServer({ name: 'evil', url: evilResource.url });
    const err = await mcp.startMcpLogin({ name: 'evil' }).catch((e: unknown) => ConnectError.from(e));
    expect(err).toBeInstanceOf(ConnectError);
    expect((err as ConnectError).code).toBe(Code.Unavailable);
    // Its MCP endpoint redirects elsewhere: not followed.
    const r = await turn(id, '$mcp redir echo {"text": "x"}');
    expect(r.isError).toBe(true);
    expect(elsewhereHits).toBe(0);
  }, 60_000);

  it('rejects a bad URL and logs out, revoking at the authorization server', async () => {
    const bad = await mcp.addMcpServer({ name: 'plain', url: 'http://example.com/mcp' }).catch((e: unknown) => ConnectError.from(e));
    expect((bad as ConnectError).code).toBe(Code.InvalidArgument);
    expect((bad as ConnectError).rawMessage).toContain('https');
    const revocations = session.stats.revocations;
    expect((await mcp.logoutMcpServer({ name: 'sess' })).revoked).toBe(true);
    expect(session.stats.revocations).toBeGreaterThan(revocations);
    expect((await statusOf('sess'))?.authStatus).toBe('none');
  }, 60_000);
});
