/**
 * An MCP server turned off for one conversation, end to end through the public API of the
 * embedded product (offline model, real sandbox, server-everything): its tools are no longer
 * offered to the model there (still in another conversation), a call of one of them that the
 * model made before it was turned off is refused with a message saying so, and turned on
 * again it runs.
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
const dataDir = mkdtempSync(join(tmpdir(), 'bedrock-mcp-off-data-'));
const workspace = mkdtempSync(join(tmpdir(), 'bedrock-mcp-off-ws-'));

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

async function agentText(id: string): Promise<string> {
  const { messages } = await conversations.getConversation({ conversationId: id });
  const last = messages[messages.length - 1]!;
  return last.content.flatMap((b) => (b.block.case === 'text' ? [b.block.value.text] : [])).join('\n');
}

describe('an MCP server turned off for one conversation', () => {
  it('is not offered there, a pending call of it is refused, and on again it runs', async () => {
    const id = (await conversations.createConversation({ cwd: workspace })).conversation!.id;
    const other = (await conversations.createConversation({ cwd: workspace })).conversation!.id;
    const [first] = await turn(id, ['$mcp everything echo {"message": "on"}']);
    expect(first).toMatchObject({ isError: false });

    const res = await mcp.setMcpServerEnabled({ conversationId: id, name: 'everything', enabled: false });
    expect(res.server).toMatchObject({ name: 'everything', disabled: true });
    // Not offered: the model cannot call it (the offline model says so, and makes no call).
    const before = (await results(id)).length;
    await conversations.sendMessage({ conversationId: id, text: '$mcp everything echo {"message": "off"}' });
    await waitFor(id, [StateKind.IDLE]);
    expect((await results(id)).length).toBe(before);
    expect(await agentText(id)).toContain('is not offered in this conversation');
    // The other conversation still has it.
    const [elsewhere] = await turn(other, ['$mcp everything echo {"message": "elsewhere"}']);
    expect(elsewhere).toMatchObject({ isError: false });

    // A call the model made while the server was on, started after it was turned off: refused.
    await mcp.setMcpServerEnabled({ conversationId: id, name: 'everything', enabled: true });
    const start = (await results(id)).length;
    await conversations.sendMessage({
      conversationId: id,
      text: '$mcp everything trigger-long-running-operation {"duration": 4, "steps": 4}\n$mcp everything echo {"message": "late"}',
    });
    await waitFor(id, [StateKind.TOOL_EXECUTING]);
    await mcp.setMcpServerEnabled({ conversationId: id, name: 'everything', enabled: false });
    await waitFor(id, [StateKind.IDLE]);
    const [long, late] = (await results(id)).slice(start);
    expect(long).toMatchObject({ isError: false });
    expect(late!.isError).toBe(true);
    expect(late!.content).toContain('turned the MCP server "everything" off for this conversation');

    await mcp.setMcpServerEnabled({ conversationId: id, name: 'everything', enabled: true });
    const [again] = await turn(id, ['$mcp everything echo {"message": "again"}']);
    expect(again).toMatchObject({ isError: false });
    expect(again!.content).toContain('again');
  }, 240_000);
});
