import { describe, it, expect } from '@jest/globals';
import { API_TOOL_NAME, isMcpToolName, mcpRestrictedRefusal, mcpServerOf, mcpToolName } from './mcp.ts';

describe('MCP tool names', () => {
  it('is mcp__<server>__<tool> when the tool name is already valid', () => {
    expect(mcpToolName('everything', 'get-sum')).toBe('mcp__everything__get-sum');
    expect(mcpServerOf('mcp__everything__get-sum')).toBe('everything');
    expect(isMcpToolName('mcp__everything__get-sum')).toBe(true);
    expect(isMcpToolName('bash')).toBe(false);
  });

  it('replaces characters the API refuses and keeps distinct names distinct', () => {
    const a = mcpToolName('s', 'net.probe');
    const b = mcpToolName('s', 'net_probe');
    expect(a).toMatch(API_TOOL_NAME);
    expect(a.startsWith('mcp__s__net_probe_')).toBe(true);
    expect(a).not.toBe(b);
    expect(mcpToolName('s', 'net.probe')).toBe(a);
  });

  it('cuts long names to 64 characters with a hash', () => {
    const long = 'x'.repeat(100);
    const name = mcpToolName('server-name', long);
    expect(name.length).toBe(64);
    expect(name).toMatch(API_TOOL_NAME);
    expect(name).not.toBe(mcpToolName('server-name', `${long}y`));
    expect(mcpServerOf(name)).toBe('server-name');
  });

  it('finds no server in malformed names', () => {
    expect(mcpServerOf('mcp____x')).toBeUndefined();
    expect(mcpServerOf('mcp__Bad__x')).toBeUndefined();
    expect(mcpServerOf('mcp__nosep')).toBeUndefined();
  });
});

describe('the Restricted rule', () => {
  const sandboxed = { sandboxedRestricted: true, trusted: false };
  const unsandboxed = { sandboxedRestricted: false, trusted: false };
  it('runs everything in Unrestricted mode', () => {
    expect(mcpRestrictedRefusal({ name: 't' }, unsandboxed, 'unrestricted')).toBeUndefined();
  });
  it('runs a read-only tool of a sandboxed or trusted server in Restricted mode', () => {
    expect(mcpRestrictedRefusal({ name: 't', hints: { readOnlyHint: true } }, sandboxed, 'restricted')).toBeUndefined();
    expect(
      mcpRestrictedRefusal({ name: 't', hints: { readOnlyHint: true } }, { ...unsandboxed, trusted: true }, 'restricted'),
    ).toBeUndefined();
  });
  it('refuses an untrusted claim, a declared write and an unannotated tool, saying why', () => {
    expect(mcpRestrictedRefusal({ name: 't', hints: { readOnlyHint: true } }, unsandboxed, 'restricted')).toContain('not believed');
    expect(mcpRestrictedRefusal({ name: 't', hints: { readOnlyHint: false } }, sandboxed, 'restricted')).toContain('readOnlyHint: false');
    expect(mcpRestrictedRefusal({ name: 't' }, sandboxed, 'restricted')).toContain('counts as one that writes');
    expect(mcpRestrictedRefusal({ name: 't', hints: { destructiveHint: false } }, sandboxed, 'restricted')).toContain(
      'request_mode_upgrade',
    );
  });
});
