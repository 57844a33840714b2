/**
 * `bedrock mcp add|ls|rm` against the real web-bff and conversation service: a user's own
 * servers, listed beside the operator's, per user, with the usage and server errors.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { startSystem, type System } from '@bedrock/web-bff/test-support';
import { run } from '../src/run.ts';

let s: System;
beforeAll(async () => {
  s = await startSystem({ label: 'cli_mcp' });
}, 60_000);
afterAll(async () => {
  await s?.close();
});

async function bedrock(args: string[], user: 'alice' | 'bob' = 'alice') {
  let stdout = '';
  let stderr = '';
  const code = await run(
    args,
    { BEDROCK_URL: s.bff.httpUrl, BEDROCK_TOKEN: s.tokens[user], HOME: '/nonexistent', BEDROCK_RETRY_FOR: '0' },
    { out: (t) => void (stdout += t), err: (t) => void (stderr += t) },
  );
  return { code, stdout, stderr };
}

describe('bedrock mcp', () => {
  it('adds, lists and removes a server of the caller', async () => {
    expect(await bedrock(['mcp', 'ls'])).toMatchObject({ code: 0, stdout: expect.stringContaining('no MCP servers') });
    const added = await bedrock(['mcp', 'add', 'files', '--', 'npx', '-y', 'some-server', '--root', '.']);
    expect(added).toMatchObject({ code: 0, stdout: 'added MCP server files: its tools are mcp__files__TOOL\n' });
    const ls = await bedrock(['mcp', 'ls']);
    expect(ls.stdout).toBe('NAME   SOURCE  COMMAND\nfiles  user    npx -y some-server --root .\n');
    const json = JSON.parse((await bedrock(['mcp', 'ls', '--json'])).stdout) as { servers: { name: string; args: string[] }[] };
    expect(json.servers).toEqual([expect.objectContaining({ name: 'files', args: ['-y', 'some-server', '--root', '.'] })]);
    // Another user's servers are their own.
    expect((await bedrock(['mcp', 'ls'], 'bob')).stdout).toContain('no MCP servers');
    expect(await bedrock(['mcp', 'rm', 'files'])).toMatchObject({ code: 0, stdout: 'removed MCP server files\n' });
    expect((await bedrock(['mcp', 'ls'])).stdout).toContain('no MCP servers');
  }, 60_000);

  it('reports bad names, duplicates and unknown servers', async () => {
    const bad = await bedrock(['mcp', 'add', 'Bad_Name', '--', 'x']);
    expect(bad.code).toBe(3);
    expect(bad.stderr).toContain('not valid');
    await bedrock(['mcp', 'add', 'dup', '--', 'x']);
    const dup = await bedrock(['mcp', 'add', 'dup', '--', 'x']);
    expect(dup.code).toBe(3);
    expect(dup.stderr).toContain('already have');
    const missing = await bedrock(['mcp', 'rm', 'nope']);
    expect(missing.code).toBe(3);
    expect(missing.stderr).toContain('no MCP server named "nope"');
    expect((await bedrock(['mcp', 'add'])).code).toBe(2);
  }, 60_000);

  it('adds a remote server with --url, shows its login state, and says when logins are off', async () => {
    const added = await bedrock(['mcp', 'add', 'tracker', '--url', 'https://mcp.example.com/mcp']);
    expect(added).toMatchObject({ code: 0, stdout: expect.stringContaining('bedrock mcp login tracker') });
    await bedrock(['mcp', 'add', 'local', '--', 'node', 'server.js']);
    const ls = await bedrock(['mcp', 'ls']);
    expect(ls.stdout).toContain('NAME     SOURCE  LOGIN  COMMAND\n');
    expect(ls.stdout).toContain('tracker  user    -      https://mcp.example.com/mcp\n');
    const json = JSON.parse((await bedrock(['mcp', 'ls', '--json'])).stdout) as { servers: Record<string, unknown>[] };
    expect(json.servers).toContainEqual(
      expect.objectContaining({
        name: 'tracker',
        url: 'https://mcp.example.com/mcp',
        authStatus: 'none',
        loginPath: '/mcp/oauth/start?server=tracker',
      }),
    );
    const plain = await bedrock(['mcp', 'add', 'plain', '--url', 'http://example.com/mcp']);
    expect(plain.code).toBe(3);
    expect(plain.stderr).toContain('must be https');
    // This system has no BEDROCK_MCP_TOKEN_KEY: logins are off, and the CLI says why.
    const login = await bedrock(['mcp', 'logout', 'tracker']);
    expect(login.code).toBe(3);
    expect(login.stderr).toContain('BEDROCK_MCP_TOKEN_KEY');
    expect((await bedrock(['mcp', 'login'])).code).toBe(2);
  }, 60_000);
});
