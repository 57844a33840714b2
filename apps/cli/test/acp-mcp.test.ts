/**
 * `bedrock acp` with the editor's MCP servers: a stdio server given at `session/new` becomes a
 * server of that session's conversation only, and the model's calls of its tools run (in the
 * sandbox, in Restricted mode for a read-only tool) through the embedded product.
 */
import { spawn } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { Readable, Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import * as acp from '@agentclientprotocol/sdk';
import { createClient } from '@connectrpc/connect';
import { createConnectTransport } from '@connectrpc/connect-node';
import { ConversationService, McpService } from '@bedrock/contracts';
import { startEmbedded, type RunningEmbedded } from '@bedrock/embedded';

const BIN = resolve('node_modules/.bin/bedrock');
const everything = resolve('node_modules/@modelcontextprotocol/server-everything/dist/index.js');

let bedrock: RunningEmbedded;
let work: string;
const dirs: string[] = [];

beforeAll(async () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'bedrock-acp-mcp-data-'));
  work = mkdtempSync(join(tmpdir(), 'bedrock-acp-mcp-work-'));
  chmodSync(work, 0o777);
  dirs.push(dataDir, work);
  bedrock = await startEmbedded({
    env: {
      ...process.env,
      BEDROCK_DATA_DIR: dataDir,
      BEDROCK_PORT: '0',
      BEDROCK_GRPC_PORT: '0',
      ANTHROPIC_API_KEY: '',
      DATABASE_URL: '',
      LOG_LEVEL: 'warn',
    },
  });
}, 60_000);
afterAll(async () => {
  await bedrock?.stop();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

describe('bedrock acp with the editor MCP servers', () => {
  it("makes a stdio server the session's own and runs its tools", async () => {
    const child = spawn(BIN, ['acp'], {
      env: { PATH: process.env.PATH, HOME: work, BEDROCK_URL: bedrock.httpUrl, BEDROCK_TOKEN: bedrock.token },
      cwd: work,
    });
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const connection = acp
      .client({ name: 'acp-mcp-test' })
      .onNotification(acp.methods.client.session.update, () => undefined)
      .connect(
        acp.ndJsonStream(
          Writable.toWeb(child.stdin) as WritableStream<Uint8Array>,
          Readable.toWeb(child.stdout) as ReadableStream<Uint8Array>,
        ),
      );
    try {
      const agent = connection.agent;
      await agent.request(acp.methods.agent.initialize, { protocolVersion: acp.PROTOCOL_VERSION, clientCapabilities: {} });
      const { sessionId } = await agent.request(acp.methods.agent.session.new, {
        cwd: work,
        mcpServers: [
          { name: 'Editor Tools', command: 'node', args: [everything], env: [{ name: 'FROM_EDITOR', value: 'yes' }] },
          { type: 'http', name: 'remote', url: 'https://example.invalid/mcp', headers: [] },
        ],
      });
      const transport = createConnectTransport({
        baseUrl: bedrock.httpUrl,
        httpVersion: '1.1',
        interceptors: [(next) => (req) => (req.header.set('authorization', `Bearer ${bedrock.token}`), next(req))],
      });
      const mcp = createClient(McpService, transport);
      const own = (await mcp.listMcpServers({ conversationId: sessionId })).servers;
      expect(own.map((s) => [s.name, s.conversationId, s.env])).toEqual([['editor-tools', sessionId, { FROM_EDITOR: 'yes' }]]);
      // Not the user's other conversations'.
      expect((await mcp.listMcpServers({})).servers).toEqual([]);
      expect(stderr).toContain('skipped: remote');

      const res = await agent.request(acp.methods.agent.session.prompt, {
        sessionId,
        prompt: [{ type: 'text', text: '$mcp editor-tools echo {"message": "from the editor server"}' }],
      });
      expect(res.stopReason).toBe('end_turn');
      const { messages } = await createClient(ConversationService, transport).getConversation({ conversationId: sessionId });
      const results = messages.flatMap((m) => m.content.flatMap((b) => (b.block.case === 'toolResult' ? [b.block.value] : [])));
      expect(results).toHaveLength(1);
      expect(results[0]!.isError).toBe(false);
      expect(results[0]!.content).toContain('from the editor server');
    } finally {
      child.stdin.end();
      await new Promise((done) => child.once('close', done));
    }
  }, 120_000);
});
