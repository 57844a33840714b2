/**
 * MCP end to end through the public API of the embedded product (offline model, real sandbox,
 * real third-party servers from npm): the operator's servers (BEDROCK_MCP_SERVERS) and a
 * user's own (McpService) offered to the model as mcp__ tools, a read-only tool running in
 * Restricted mode, a write refused there with the reason and run after the user approves
 * Unrestricted mode, an unannotated tool counted as a write, and a cancel that stops a call.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Code, ConnectError } from '@connectrpc/connect';
import { Mode, StateKind } from '@bedrock/contracts';
import { SERVERS, startMcpEmbedded, type McpEmbedded } from './support/mcp-embedded.ts';

let e: McpEmbedded;
let workspace: string;
const fixture = SERVERS.fixture;

beforeAll(async () => {
  e = await startMcpEmbedded({
    label: 'mcp',
    servers: (workspace) => ({
      everything: { command: 'node', args: [SERVERS.everything] },
      fs: { command: 'node', args: [SERVERS.filesystem, workspace] },
    }),
  });
  workspace = e.workspace;
}, 120_000);

afterAll(async () => {
  await e?.close();
});

describe('MCP through the public API', () => {
  let id = '';

  it('runs a read-only tool in Restricted mode and refuses a write, saying why', async () => {
    const created = await e.conversations.createConversation({ cwd: workspace });
    id = created.conversation!.id;
    expect(created.conversation?.mode).toBe(Mode.RESTRICTED);
    const [echo, read, write] = await e.turn(id, [
      '$mcp everything echo {"message": "hello over mcp"}',
      `$mcp fs read_text_file {"path": "${join(workspace, 'note.txt')}"}`,
      `$mcp fs write_file {"path": "${join(workspace, 'made-by-e.mcp.txt')}", "content": "written by an MCP tool"}`,
    ]);
    expect(echo).toMatchObject({ isError: false });
    expect(echo!.content).toContain('hello over mcp');
    expect(read).toEqual({ isError: false, content: 'a note in the workspace\n' });
    expect(write!.isError).toBe(true);
    expect(write!.content).toContain('not available in Restricted mode');
    expect(write!.content).toContain('request_mode_upgrade');
    expect(existsSync(join(workspace, 'made-by-e.mcp.txt'))).toBe(false);
  }, 180_000);

  it('runs the write after the user approves Unrestricted mode', async () => {
    await e.conversations.sendMessage({ conversationId: id, text: '/upgrade the MCP filesystem server needs to write a file' });
    await e.waitFor(id, [StateKind.AWAITING_MODE_APPROVAL]);
    await e.conversations.respondToModeUpgrade({ conversationId: id, approve: true });
    await e.waitFor(id, [StateKind.IDLE]);
    const [write] = await e.turn(id, [
      `$mcp fs write_file {"path": "${join(workspace, 'made-by-e.mcp.txt')}", "content": "written by an MCP tool"}`,
    ]);
    expect(write).toMatchObject({ isError: false });
    expect(readFileSync(join(workspace, 'made-by-e.mcp.txt'), 'utf8')).toBe('written by an MCP tool');
  }, 180_000);

  it('cancels a long MCP call quickly', async () => {
    const before = (await e.results(id)).length;
    await e.conversations.sendMessage({
      conversationId: id,
      text: '$mcp everything trigger-long-running-operation {"duration": 60, "steps": 60}',
    });
    await e.waitFor(id, [StateKind.TOOL_EXECUTING]);
    await sleep(1000);
    const started = Date.now();
    await e.conversations.cancel({ conversationId: id });
    await e.waitFor(id, [StateKind.IDLE], 15_000);
    expect(Date.now() - started).toBeLessThan(10_000);
    const [cancelled] = (await e.results(id)).slice(before);
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
    expect(await fail(e.mcp.addMcpServer({ name: 'Bad_Name', command: 'node' }))).toBe(Code.InvalidArgument);
    expect(await fail(e.mcp.addMcpServer({ name: 'mine', command: '' }))).toBe(Code.InvalidArgument);
    expect(await fail(e.mcp.addMcpServer({ name: 'fs', command: 'node' }))).toBe(Code.AlreadyExists);
    await e.mcp.addMcpServer({ name: 'mine', command: 'node', args: [fixture] });
    expect(await fail(e.mcp.addMcpServer({ name: 'mine', command: 'node' }))).toBe(Code.AlreadyExists);
    const { servers } = await e.mcp.listMcpServers({});
    expect(servers.map((s) => [s.name, s.source])).toEqual([
      ['everything', 'operator'],
      ['fs', 'operator'],
      ['mine', 'user'],
    ]);
    expect(await fail(e.mcp.removeMcpServer({ name: 'fs' }))).toBe(Code.FailedPrecondition);
    expect(await fail(e.mcp.removeMcpServer({ name: 'nope' }))).toBe(Code.NotFound);
  }, 60_000);

  it("offers the user's server in a new Restricted conversation; an unannotated tool counts as a write", async () => {
    const created = await e.conversations.createConversation({ cwd: workspace });
    const [unannotated] = await e.turn(created.conversation!.id, ['$mcp mine unannotated {}']);
    expect(unannotated!.isError).toBe(true);
    expect(unannotated!.content).toContain('does not declare it read-only');
    // In the Unrestricted conversation it runs.
    const [ran] = await e.turn(id, ['$mcp mine unannotated {}']);
    expect(ran).toEqual({ isError: false, content: 'hello from an unannotated tool' });
    await e.mcp.removeMcpServer({ name: 'mine' });
    expect((await e.mcp.listMcpServers({})).servers.map((s) => s.name)).toEqual(['everything', 'fs']);
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
    for (const name of names) await e.mcp.addMcpServer({ name, command: 'true' });
    expect(await fail(e.mcp.addMcpServer({ name: 's20', command: 'true' }))).toBe(Code.ResourceExhausted);
    await e.mcp.addMcpServer({ name: 'own', command: 'true', conversationId: id });
    expect((await e.mcp.listMcpServers({ conversationId: id })).servers.map((s) => s.name)).toContain('own');
    expect((await e.mcp.listMcpServers({})).servers.map((s) => s.name)).not.toContain('own');
    expect(await fail(e.mcp.addMcpServer({ name: 'x', command: 'true', conversationId: 'not-a-conversation' }))).toBe(Code.NotFound);
    for (const name of names) await e.mcp.removeMcpServer({ name });
    await e.mcp.removeMcpServer({ name: 'own', conversationId: id });
  }, 60_000);
});
