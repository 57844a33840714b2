import { describe, it, expect } from '@jest/globals';
import { offlineReply, parseOfflineCommand } from './offline-model.ts';
import type { MessagesRequestBody, ScriptBlock } from './script.ts';

const tools = [
  { name: 'bash' },
  { name: 'mcp__everything__echo', description: 'Echoes.\n[MCP server "everything", tool "echo": declared read-only]' },
  { name: 'mcp__fixture__net_probe_abc123', description: 'Probe.\n[MCP server "fixture", tool "net.probe": declared read-only]' },
];
const body = (text: string): MessagesRequestBody => ({
  model: 'bedrock-offline',
  max_tokens: 1000,
  tools,
  messages: [{ role: 'user', content: [{ type: 'text', text }] }],
});
const toolUses = (blocks: readonly ScriptBlock[]) =>
  blocks.filter((b): b is Extract<ScriptBlock, { type: 'tool_use' }> => b.type === 'tool_use');

describe('the offline model calls MCP tools', () => {
  it('parses `$mcp SERVER TOOL {json}` lines', () => {
    expect(parseOfflineCommand('$mcp everything echo {"message": "hi"}\n$mcp fs list_allowed_directories').command).toEqual({
      kind: 'mcp',
      calls: [
        { server: 'everything', tool: 'echo', input: { message: 'hi' } },
        { server: 'fs', tool: 'list_allowed_directories', input: {} },
      ],
    });
  });

  it('calls the offered tool by its name, or by the description of a renamed one', () => {
    const reply = offlineReply(body('$mcp everything echo {"message":"hi"}\n$mcp fixture net.probe {"port": 1}'));
    expect(toolUses(reply.content).map((c) => [c.name, c.input])).toEqual([
      ['mcp__everything__echo', { message: 'hi' }],
      ['mcp__fixture__net_probe_abc123', { port: 1 }],
    ]);
  });

  it('says so when the tool is not offered or the input is not an object', () => {
    const missing = offlineReply(body('$mcp nope echo {}'));
    expect(toolUses(missing.content)).toEqual([]);
    expect(JSON.stringify(missing.content)).toContain('not offered');
    const bad = offlineReply(body('$mcp everything echo [1]'));
    expect(toolUses(bad.content)).toEqual([]);
    expect(JSON.stringify(bad.content)).toContain('not a JSON object');
  });
});
