/**
 * Deferred MCP tools end to end through the public API of the embedded product (offline model
 * behind the strict fake Messages API, real sandbox, server-everything): with
 * BEDROCK_MCP_DEFER_TOOLS=0 every MCP tool is sent defer_loading behind the tool search tool;
 * the model finds the tool by a search (kept in the history and sent back, its reference
 * checked by the fake) and calls it; with the server then turned off, the stale search is sent
 * as a note and the requests stay valid.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { chownSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { createClient } from '@connectrpc/connect';
import { createConnectTransport } from '@connectrpc/connect-node';
import { ConversationService, McpService, StateKind } from '@bedrock/contracts';
import { startEmbedded, type RunningEmbedded } from '../src/index.ts';

const NOBODY = 65534;
const asRoot = process.getuid?.() === 0;
const repo = new URL('../../../', import.meta.url).pathname;
const everything = join(repo, 'node_modules/@modelcontextprotocol/server-everything/dist/index.js');

let bedrock: RunningEmbedded;
let conversations: ReturnType<typeof createClient<typeof ConversationService>>;
let mcp: ReturnType<typeof createClient<typeof McpService>>;
const dataDir = mkdtempSync(join(tmpdir(), 'bedrock-mcp-defer-data-'));
const workspace = mkdtempSync(join(tmpdir(), 'bedrock-mcp-defer-ws-'));

beforeAll(async () => {
  writeFileSync(join(workspace, 'note.txt'), 'a note in the workspace\n');
  if (asRoot) {
    // The workspace belongs to a user; tools (and MCP servers) run as that user.
    chownSync(workspace, NOBODY, NOBODY);
    chownSync(join(workspace, 'note.txt'), NOBODY, NOBODY);
  }
  bedrock = await startEmbedded({
    env: {
      ...process.env,
      BEDROCK_DATA_DIR: dataDir,
      BEDROCK_PORT: '0',
      BEDROCK_GRPC_PORT: '0',
      ANTHROPIC_API_KEY: '',
      DATABASE_URL: '',
      LOG_LEVEL: 'warn',
      BEDROCK_MCP_DEFER_TOOLS: '0',
      BEDROCK_MCP_SERVERS: JSON.stringify({
        everything: { command: 'node', args: [everything] },
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
  rmSync(dataDir, { recursive: true, force: true });
  rmSync(workspace, { recursive: true, force: true });
});

type Result = { content: string; isError: boolean };

async function waitFor(id: string, kinds: StateKind[], timeoutMs = 90_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const kind = (await conversations.getConversation({ conversationId: id })).conversation?.state?.kind;
    if (kind !== undefined && kinds.includes(kind)) return;
    if (Date.now() > deadline) throw new Error(`conversation ${id} stuck in ${kind === undefined ? '?' : StateKind[kind]}`);
    await sleep(100);
  }
}

async function results(id: string): Promise<Result[]> {
  const { messages } = await conversations.getConversation({ conversationId: id });
  return messages.flatMap((m) =>
    m.content.flatMap((b) => (b.block.case === 'toolResult' ? [{ content: b.block.value.content, isError: b.block.value.isError }] : [])),
  );
}

async function turn(id: string, lines: string[]): Promise<Result[]> {
  const before = (await results(id)).length;
  await conversations.sendMessage({ conversationId: id, text: lines.join('\n') });
  await waitFor(id, [StateKind.IDLE]);
  const got = (await results(id)).slice(before);
  expect(got).toHaveLength(lines.length);
  return got;
}

async function lastAgentText(id: string): Promise<string> {
  const { messages } = await conversations.getConversation({ conversationId: id });
  const last = messages[messages.length - 1]!;
  return last.content.flatMap((b) => (b.block.case === 'text' ? [b.block.value.text] : [])).join('\n');
}

async function serverBlocks(id: string): Promise<string[]> {
  const { messages } = await conversations.getConversation({ conversationId: id });
  return messages.flatMap((m) => m.content.flatMap((b) => (b.block.case === 'serverTool' ? [b.block.value.blockJson] : [])));
}

describe('deferred MCP tools', () => {
  it('are found by the tool search tool, then called; a stale search stays valid once the server is off', async () => {
    const id = (await conversations.createConversation({ cwd: workspace })).conversation!.id;
    const [echo] = await turn(id, ['$mcp everything echo {"message": "found by search"}']);
    expect(echo).toMatchObject({ isError: false });
    expect(echo!.content).toContain('found by search');
    // The search ran: its call and result are in the history (the offline model searches only
    // for a tool the request defines deferred behind a search tool).
    const blocks = await serverBlocks(id);
    expect(blocks.some((b) => b.includes('"tool_search_tool_bm25"'))).toBe(true);
    expect(blocks.some((b) => b.includes('"tool_reference"') && b.includes('mcp__everything__echo'))).toBe(true);
    // The next turn sends the search blocks back: the fake checks their references.
    const [again] = await turn(id, ['$mcp everything echo {"message": "second"}']);
    expect(again).toMatchObject({ isError: false });

    // Off: no MCP tools, so no search tool; the earlier searches go as notes and the request is valid.
    await mcp.setMcpServerEnabled({ conversationId: id, name: 'everything', enabled: false });
    await conversations.sendMessage({ conversationId: id, text: '$mcp everything echo {"message": "off"}' });
    await waitFor(id, [StateKind.IDLE]);
    expect(await lastAgentText(id)).toContain('is not offered in this conversation');
  }, 240_000);
});
