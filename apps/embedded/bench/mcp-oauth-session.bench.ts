/**
 * A long session on an OAuth-protected remote MCP server (issue 26): the embedded product on the
 * local PostgreSQL, the test OAuth MCP server (packages/testkit/src/oauth-mcp-server.ts) with
 * 60 s access tokens, one login (the paste flow), then a model turn calling the server's tool
 * every BENCH_MCP_EVERY (default 15 s) for BENCH_MCP_SESSION (default 10 minutes). Prints the
 * calls, failures, logins and refreshes: a session needs exactly one login. Asserts nothing.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { createClient } from '@connectrpc/connect';
import { createConnectTransport } from '@connectrpc/connect-node';
import { ConversationService, McpService, StateKind } from '@bedrock/contracts';
import { createTestDatabase } from '@bedrock/testkit/database';
import { startOAuthMcpServer } from '@bedrock/testkit/oauth-mcp-server';
import { startEmbedded } from '../src/index.ts';

const SESSION_MS = Number(process.env.BENCH_MCP_SESSION_MS ?? 10 * 60_000);
const EVERY_MS = Number(process.env.BENCH_MCP_EVERY_MS ?? 15_000);

async function main(): Promise<void> {
  const db = await createTestDatabase('bench_mcp_oauth');
  const server = await startOAuthMcpServer({ accessTokenLifetimeMs: 60_000 });
  const dataDir = mkdtempSync(join(tmpdir(), 'bedrock-bench-mcp-'));
  const bedrock = await startEmbedded({
    env: {
      ...process.env,
      BEDROCK_DATA_DIR: dataDir,
      BEDROCK_PORT: '0',
      BEDROCK_GRPC_PORT: '0',
      ANTHROPIC_API_KEY: '',
      DATABASE_URL: db.url,
      LOG_LEVEL: 'error',
      BEDROCK_MCP_SERVERS: JSON.stringify({ remote: { url: server.url, trusted: true } }),
    },
  });
  try {
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
    const conversations = createClient(ConversationService, transport);
    const mcp = createClient(McpService, transport);
    const { authorizationUrl } = await mcp.startMcpLogin({ name: 'remote' });
    const landed = (await fetch(authorizationUrl, { redirect: 'manual' })).headers.get('location')!;
    await mcp.completeMcpLogin({ redirectedUrl: landed });
    const id = (await conversations.createConversation({ cwd: dataDir })).conversation!.id;
    const started = Date.now();
    let calls = 0;
    let failures = 0;
    const failed: string[] = [];
    while (Date.now() - started < SESSION_MS) {
      const next = Date.now() + EVERY_MS;
      await conversations.sendMessage({ conversationId: id, text: `$mcp remote echo {"text": "call ${calls}"}` });
      for (;;) {
        const kind = (await conversations.getConversation({ conversationId: id })).conversation?.state?.kind;
        if (kind === StateKind.IDLE) break;
        await sleep(100);
      }
      const { messages } = await conversations.getConversation({ conversationId: id });
      const last = messages.flatMap((m) => m.content.flatMap((b) => (b.block.case === 'toolResult' ? [b.block.value] : []))).at(-1);
      calls++;
      if (!last || last.isError || last.content !== `echo: call ${calls - 1}`) {
        failures++;
        failed.push(last?.content.slice(0, 200) ?? '(no tool result)');
      }
      await sleep(Math.max(0, next - Date.now()));
    }
    const minutes = ((Date.now() - started) / 60_000).toFixed(1);
    console.log(
      `session ${minutes} min, 60 s access tokens: ${calls} calls, ${failures} failed, ${server.stats.logins} login(s), ${server.stats.refreshes} refreshes, ${server.stats.refused} requests refused by the resource server`,
    );
    for (const f of failed.slice(0, 5)) console.log(`  failed: ${f}`);
  } finally {
    await bedrock.stop();
    await server.close();
    await db.drop();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

await main();
