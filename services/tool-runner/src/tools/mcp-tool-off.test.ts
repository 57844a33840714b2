/** A call of a tool whose server the user turned off for the conversation is refused before any server runs. */
import { describe, it, expect, jest } from '@jest/globals';
import { create } from '@bufbuild/protobuf';
import { McpServerSpecSchema, Mode } from '@bedrock/contracts';
import { runMcpTool } from './mcp-tool.ts';
import type { ExecuteContext } from './job-context.ts';

function setup(disabled: boolean) {
  const call = jest.fn(async () => ({ content: 'ran', isError: false, cancelled: false, display: undefined }));
  const ctx = { mcp: { call }, sandbox: { sandboxAvailable: true } } as unknown as ExecuteContext;
  const job = {
    toolName: 'mcp__fs__read_file',
    inputJson: '{}',
    cwd: '/tmp',
    mode: Mode.UNRESTRICTED,
    conversationId: 'c1',
    mcpServer: create(McpServerSpecSchema, { name: 'fs', command: 'node', disabled }),
  };
  return { call, ctx, job };
}

describe('a call of a server turned off for the conversation', () => {
  it('is refused with a message that says so, and the server is never called', async () => {
    const { call, ctx, job } = setup(true);
    const outcome = await runMcpTool(job, ctx);
    expect(outcome.isError).toBe(true);
    expect(outcome.content).toContain('turned the MCP server "fs" off for this conversation');
    expect(call).not.toHaveBeenCalled();
  });

  it('runs when the server is on', async () => {
    const { call, ctx, job } = setup(false);
    const outcome = await runMcpTool(job, ctx);
    expect(outcome.content).not.toContain('turned the MCP server');
    expect(call).toHaveBeenCalledTimes(1);
  });
});
