import { describe, it, expect } from '@jest/globals';
import { readConversationConfig } from '../config.ts';
import { mcpServerProblem, parseOperatorServers, toSpec } from './servers.ts';

describe('MCP server definitions', () => {
  it('parses BEDROCK_MCP_SERVERS', () => {
    const servers = parseOperatorServers(
      JSON.stringify({
        fs: { command: 'node', args: ['server.js', '/w'], env: { A: 'b' }, trusted: true, timeoutMs: 1000 },
        e: { command: 'x' },
      }),
    );
    expect(servers).toEqual([
      { name: 'fs', command: 'node', args: ['server.js', '/w'], env: { A: 'b' }, trusted: true, timeoutMs: 1000, source: 'operator' },
      { name: 'e', command: 'x', args: [], env: {}, trusted: false, timeoutMs: 0, source: 'operator' },
    ]);
    expect(toSpec(servers[1]!, 5000).timeoutMs).toBe(5000n);
    expect(toSpec(servers[0]!, 5000)).toMatchObject({ trusted: true, timeoutMs: 1000n });
  });

  it('refuses what it cannot run, naming the problem', () => {
    expect(() => parseOperatorServers('[]')).toThrow('JSON object');
    expect(() => parseOperatorServers('{"Bad_Name": {"command": "x"}}')).toThrow('not valid');
    expect(() => parseOperatorServers('{"a": {"command": "x", "cmd": 1}}')).toThrow('unknown field');
    expect(() => parseOperatorServers('{"a": {"command": "x", "args": [1]}}')).toThrow('list of strings');
    expect(() => readConversationConfig({ BEDROCK_MCP_SERVERS: '{"a": {}}' })).toThrow('BEDROCK_MCP_SERVERS');
  });

  it('a user server is never trusted', () => {
    const spec = toSpec({ name: 'u', command: 'x', args: [], env: {}, trusted: true, timeoutMs: 0, source: 'user' }, 1);
    expect(spec.trusted).toBe(false);
    expect(mcpServerProblem({ name: 'u', command: 'x', args: [], env: { 'BAD-NAME': 'v' }, timeoutMs: 0 })).toContain(
      'not a valid environment',
    );
  });
});
