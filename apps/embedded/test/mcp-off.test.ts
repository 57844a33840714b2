/**
 * An MCP server turned off for one conversation, end to end through the public API of the
 * embedded product (offline model, real sandbox, server-everything): its tools are no longer
 * offered to the model there (still in another conversation), a call of one of them that the
 * model made before it was turned off is refused with a message saying so, and turned on
 * again it runs.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { StateKind } from '@bedrock/contracts';
import { SERVERS, startMcpEmbedded, type McpEmbedded } from './support/mcp-embedded.ts';

let e: McpEmbedded;

beforeAll(async () => {
  e = await startMcpEmbedded({
    label: 'mcp-off',
    servers: () => ({ everything: { command: 'node', args: [SERVERS.everything] } }),
  });
}, 120_000);

afterAll(async () => {
  await e?.close();
});

describe('an MCP server turned off for one conversation', () => {
  it('is not offered there, a pending call of it is refused, and on again it runs', async () => {
    const id = (await e.conversations.createConversation({ cwd: e.workspace })).conversation!.id;
    const other = (await e.conversations.createConversation({ cwd: e.workspace })).conversation!.id;
    const [first] = await e.turn(id, ['$mcp everything echo {"message": "on"}']);
    expect(first).toMatchObject({ isError: false });

    const res = await e.mcp.setMcpServerEnabled({ conversationId: id, name: 'everything', enabled: false });
    expect(res.server).toMatchObject({ name: 'everything', disabled: true });
    // Not offered: the model cannot call it (the offline model says so, and makes no call).
    const before = (await e.results(id)).length;
    await e.conversations.sendMessage({ conversationId: id, text: '$mcp everything echo {"message": "off"}' });
    await e.waitFor(id, [StateKind.IDLE]);
    expect((await e.results(id)).length).toBe(before);
    expect(await e.lastText(id)).toContain('is not offered in this conversation');
    // The other conversation still has it.
    const [elsewhere] = await e.turn(other, ['$mcp everything echo {"message": "elsewhere"}']);
    expect(elsewhere).toMatchObject({ isError: false });

    // A call the model made while the server was on, started after it was turned off: refused.
    await e.mcp.setMcpServerEnabled({ conversationId: id, name: 'everything', enabled: true });
    const start = (await e.results(id)).length;
    await e.conversations.sendMessage({
      conversationId: id,
      text: '$mcp everything trigger-long-running-operation {"duration": 4, "steps": 4}\n$mcp everything echo {"message": "late"}',
    });
    await e.waitFor(id, [StateKind.TOOL_EXECUTING]);
    await e.mcp.setMcpServerEnabled({ conversationId: id, name: 'everything', enabled: false });
    await e.waitFor(id, [StateKind.IDLE]);
    const [long, late] = (await e.results(id)).slice(start);
    expect(long).toMatchObject({ isError: false });
    expect(late!.isError).toBe(true);
    expect(late!.content).toContain('turned the MCP server "everything" off for this conversation');

    await e.mcp.setMcpServerEnabled({ conversationId: id, name: 'everything', enabled: true });
    const [again] = await e.turn(id, ['$mcp everything echo {"message": "again"}']);
    expect(again).toMatchObject({ isError: false });
    expect(again!.content).toContain('again');
  }, 240_000);
});
