/**
 * MCP end to end through the public API of the embedded product (offline model, real sandbox,
 * real third-party servers from npm): the operator's servers (BEDROCK_MCP_SERVERS) and a
 * user's own (McpService) offered to the model as mcp__ tools, a read-only tool running in
 * Restricted mode, a write refused there with the reason and run after the user approves
 * Unrestricted mode, an unannotated tool counted as a write, and a cancel that stops a call.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { chownSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Code, ConnectError, createClient } from '@connectrpc/connect';
import { createConnectTransport } from '@connectrpc/connect-node';
import { ConversationService, McpService, Mode, StateKind } from '@bedrock/contracts';
import { startEmbedded, type RunningEmbedded } from '../src/index.ts';

const NOBODY = 65534;
const asRoot = process.getuid?.() === 0;
const repo = new URL('../../../', import.meta.url).pathname;
const everything = join(repo, 'node_modules/@modelcontextprotocol/server-everything/dist/index.js');
const filesystem = join(repo, 'node_modules/@modelcontextprotocol/server-filesystem/dist/index.js');
const fixture = join(repo, 'services/tool-runner/test/fixtures/mcp-fixture-server.mjs');

let bedrock: RunningEmbedded;
let conversations: ReturnType<typeof createClient<typeof ConversationService>>;
let mcp: ReturnType<typeof createClient<typeof McpService>>;
const dataDir = mkdtempSync(join(tmpdir(), 'bedrock-mcp-data-'));
const workspace = mkdtempSync(join(tmpdir(), 'bedrock-mcp-ws-'));

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
        fs: { command: 'node', args: [filesystem, workspace] },
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

describe('MCP through the public API', () => {
  let id = '';

  it('runs a read-only tool in Restricted mode and refuses a write, saying why', async () => {
    const created = await conversations.createConversation({ cwd: workspace });
    id = created.conversation!.id;
    expect(created.conversation?.mode).toBe(Mode.RESTRICTED);
    const [echo, read, write] = await turn(id, [
      '$mcp everything echo {"message": "hello over mcp"}',
      `$mcp fs read_text_file {"path": "${join(workspace, 'note.txt')}"}`,
      `$mcp fs write_file {"path": "${join(workspace, 'made-by-mcp.txt')}", "content": "written by an MCP tool"}`,
    ]);
    expect(echo).toMatchObject({ isError: false });
    expect(echo!.content).toContain('hello over mcp');
    expect(read).toEqual({ isError: false, content: 'a note in the workspace\n' });
    expect(write!.isError).toBe(true);
    expect(write!.content).toContain('not available in Restricted mode');
    expect(write!.content).toContain('request_mode_upgrade');
    expect(existsSync(join(workspace, 'made-by-mcp.txt'))).toBe(false);
  }, 180_000);

  it('runs the write after the user approves Unrestricted mode', async () => {
    await conversations.sendMessage({ conversationId: id, text: '/upgrade the MCP filesystem server needs to write a file' });
    await waitFor(id, [StateKind.AWAITING_MODE_APPROVAL]);
    await conversations.respondToModeUpgrade({ conversationId: id, approve: true });
    await waitFor(id, [StateKind.IDLE]);
    const [write] = await turn(id, [
      `$mcp fs write_file {"path": "${join(workspace, 'made-by-mcp.txt')}", "content": "written by an MCP tool"}`,
    ]);
    expect(write).toMatchObject({ isError: false });
    expect(readFileSync(join(workspace, 'made-by-mcp.txt'), 'utf8')).toBe('written by an MCP tool');
  }, 180_000);

  it('cancels a long MCP call quickly', async () => {
    const before = (await results(id)).length;
    await conversations.sendMessage({
      conversationId: id,
      text: '$mcp everything trigger-long-running-operation {"duration": 60, "steps": 60}',
    });
    await waitFor(id, [StateKind.TOOL_EXECUTING]);
    await sleep(1000);
    const started = Date.now();
    await conversations.cancel({ conversationId: id });
    await waitFor(id, [StateKind.IDLE], 15_000);
    expect(Date.now() - started).toBeLessThan(10_000);
    const [cancelled] = (await results(id)).slice(before);
    expect(cancelled!.isError).toBe(true);
    expect(cancelled!.content).toMatch(/cancel/i);
  }, 180_000);

  it("manages a user's own servers, with Connect codes for bad requests", async () => {
    const fail = async (p: Promise<unknown>) =>
      ConnectError.from(
        await p.then(
          () => new Error('no error'),
          (e: unknown) => e,
        ),
      ).code;
    expect(await fail(mcp.addMcpServer({ name: 'Bad_Name', command: 'node' }))).toBe(Code.InvalidArgument);
    expect(await fail(mcp.addMcpServer({ name: 'mine', command: '' }))).toBe(Code.InvalidArgument);
    expect(await fail(mcp.addMcpServer({ name: 'fs', command: 'node' }))).toBe(Code.AlreadyExists);
    await mcp.addMcpServer({ name: 'mine', command: 'node', args: [fixture] });
    expect(await fail(mcp.addMcpServer({ name: 'mine', command: 'node' }))).toBe(Code.AlreadyExists);
    const { servers } = await mcp.listMcpServers({});
    expect(servers.map((s) => [s.name, s.source])).toEqual([
      ['everything', 'operator'],
      ['fs', 'operator'],
      ['mine', 'user'],
    ]);
    expect(await fail(mcp.removeMcpServer({ name: 'fs' }))).toBe(Code.FailedPrecondition);
    expect(await fail(mcp.removeMcpServer({ name: 'nope' }))).toBe(Code.NotFound);
  }, 60_000);

  it("offers the user's server in a new Restricted conversation; an unannotated tool counts as a write", async () => {
    const created = await conversations.createConversation({ cwd: workspace });
    const [unannotated] = await turn(created.conversation!.id, ['$mcp mine unannotated {}']);
    expect(unannotated!.isError).toBe(true);
    expect(unannotated!.content).toContain('does not declare it read-only');
    // In the Unrestricted conversation it runs.
    const [ran] = await turn(id, ['$mcp mine unannotated {}']);
    expect(ran).toEqual({ isError: false, content: 'hello from an unannotated tool' });
    await mcp.removeMcpServer({ name: 'mine' });
    expect((await mcp.listMcpServers({})).servers.map((s) => s.name)).toEqual(['everything', 'fs']);
  }, 180_000);

  it("limits a user's servers, counting a conversation's own apart", async () => {
    const fail = async (p: Promise<unknown>) =>
      ConnectError.from(
        await p.then(
          () => new Error('no error'),
          (e: unknown) => e,
        ),
      ).code;
    const names = Array.from({ length: 20 }, (_, i) => `s${i}`);
    for (const name of names) await mcp.addMcpServer({ name, command: 'true' });
    expect(await fail(mcp.addMcpServer({ name: 's20', command: 'true' }))).toBe(Code.ResourceExhausted);
    await mcp.addMcpServer({ name: 'own', command: 'true', conversationId: id });
    expect((await mcp.listMcpServers({ conversationId: id })).servers.map((s) => s.name)).toContain('own');
    expect((await mcp.listMcpServers({})).servers.map((s) => s.name)).not.toContain('own');
    expect(await fail(mcp.addMcpServer({ name: 'x', command: 'true', conversationId: 'not-a-conversation' }))).toBe(Code.NotFound);
    for (const name of names) await mcp.removeMcpServer({ name });
    await mcp.removeMcpServer({ name: 'own', conversationId: id });
  }, 60_000);
});
