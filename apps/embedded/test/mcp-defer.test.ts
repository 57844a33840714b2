/**
 * Deferred MCP tools end to end through the public API of the embedded product (offline model behind
 * the strict fake Messages API, real sandbox, server-everything), with BEDROCK_MCP_DEFER_TOOLS=0: every
 * MCP tool is sent defer_loading behind the tool search tool, the model finds it by a search and calls
 * it; with the server then turned off, the stale search is sent as a note and the requests stay valid.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { StateKind } from '@bedrock/contracts';
import { SERVERS, startMcpEmbedded, type McpEmbedded } from './support/mcp-embedded.ts';

let e: McpEmbedded;

beforeAll(async () => {
  e = await startMcpEmbedded({
    label: 'mcp-defer',
    servers: () => ({ everything: { command: 'node', args: [SERVERS.everything] } }),
    env: { BEDROCK_MCP_DEFER_TOOLS: '0' },
  });
}, 120_000);

afterAll(async () => {
  await e?.close();
});

async function serverBlocks(id: string): Promise<string[]> {
  const { messages } = await e.conversations.getConversation({ conversationId: id });
  return messages.flatMap((m) => m.content.flatMap((b) => (b.block.case === 'serverTool' ? [b.block.value.blockJson] : [])));
}

describe('deferred MCP tools', () => {
  it('are found by the tool search tool, then called; a stale search stays valid once the server is off', async () => {
    const id = (await e.conversations.createConversation({ cwd: e.workspace })).conversation!.id;
    const [echo] = await e.turn(id, ['$mcp everything echo {"message": "found by search"}']);
    expect(echo).toMatchObject({ isError: false });
    expect(echo!.content).toContain('found by search');
    // The search ran: its call and result are in the history (the offline model searches only
    // for a tool the request defines deferred behind a search tool).
    const blocks = await serverBlocks(id);
    expect(blocks.some((b) => b.includes('"tool_search_tool_bm25"'))).toBe(true);
    expect(blocks.some((b) => b.includes('"tool_reference"') && b.includes('mcp__everything__echo'))).toBe(true);
    // The next turn sends the search blocks back: the fake checks their references.
    const [again] = await e.turn(id, ['$mcp everything echo {"message": "second"}']);
    expect(again).toMatchObject({ isError: false });

    // Off: no MCP tools, so no search tool; the earlier searches go as notes and the request is valid.
    await e.mcp.setMcpServerEnabled({ conversationId: id, name: 'everything', enabled: false });
    await e.conversations.sendMessage({ conversationId: id, text: '$mcp everything echo {"message": "off"}' });
    await e.waitFor(id, [StateKind.IDLE]);
    expect(await e.lastText(id)).toContain('is not offered in this conversation');
  }, 240_000);
});
