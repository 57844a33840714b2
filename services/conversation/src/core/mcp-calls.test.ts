/**
 * MCP calls in the state machine: a call named `mcp__<server>__<tool>` runs on a tool-runner in
 * the conversation's mode (the runner knows the server's tools and applies the Restricted rule);
 * a malformed mcp__ name is an unknown tool, answered at once.
 */
import { describe, it, expect } from '@jest/globals';
import { Conv, approve, call, parentCtx, response, toolComplete } from '../../test/core-support/matrix-fixtures.ts';

describe('MCP tool calls', () => {
  it('runs mcp__server__tool on a runner, in the mode of the conversation', () => {
    const c = new Conv(parentCtx()).toLlm();
    const effects = c.ok(response(c.requestId, { calls: [call('m1', 'mcp__everything__echo', { message: 'hi' })] }));
    expect(effects.filter((e) => e.type === 'execute_tool')).toEqual([
      expect.objectContaining({ toolUseId: 'm1', name: 'mcp__everything__echo', input: { message: 'hi' }, mode: 'restricted' }),
    ]);
    expect(c.state.phase.kind).toBe('tool_executing');
    // Its result goes back to the model like any tool's.
    const after = c.ok(toolComplete('m1', 'hi'));
    expect(after.some((e) => e.type === 'request_llm')).toBe(true);
  });

  it('answers a malformed mcp__ name as an unknown tool without running anything', () => {
    const c = new Conv(parentCtx()).toLlm();
    const effects = c.ok(response(c.requestId, { calls: [call('m1', 'mcp__Bad__x'), call('m2', 'mcp__nosep')] }));
    expect(effects.some((e) => e.type === 'execute_tool')).toBe(false);
  });

  it('runs it Unrestricted after an approved upgrade', () => {
    const c = new Conv(parentCtx()).toLlm();
    c.ok(response(c.requestId, { calls: [call('u1', 'request_mode_upgrade', { reason: 'write with MCP' })] }));
    c.ok(approve);
    const effects = c.ok(response(c.requestId, { calls: [call('m2', 'mcp__fs__write_file', { path: 'x' })] }));
    expect(effects.find((e) => e.type === 'execute_tool')).toMatchObject({ name: 'mcp__fs__write_file', mode: 'unrestricted' });
  });
});
