/**
 * `bedrock settings ID --mcp-off NAME / --mcp-on NAME` against the real web-bff and conversation
 * service: a server turned off for one conversation only, listed as off there (McpService
 * SetMcpServerEnabled / ListMcpServers), on in the others, with the usage and server errors.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createClient } from '@connectrpc/connect';
import { createConnectTransport } from '@connectrpc/connect-node';
import { McpService } from '@bedrock/contracts';
import { startSystem, type System } from '@bedrock/web-bff/test-support';
import { run } from '../src/run.ts';

let s: System;
beforeAll(async () => {
  s = await startSystem({ label: 'cli_mcp_off' });
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

function mcpApi(user: 'alice' | 'bob') {
  const transport = createConnectTransport({
    baseUrl: s.bff.httpUrl,
    httpVersion: '1.1',
    interceptors: [
      (next) => (req) => {
        req.header.set('authorization', `Bearer ${s.tokens[user]}`);
        return next(req);
      },
    ],
  });
  return createClient(McpService, transport);
}

describe('bedrock settings --mcp-off / --mcp-on', () => {
  it('turns a server off for one conversation only, and on again', async () => {
    expect(await bedrock(['mcp', 'add', 'files', '--', 'node', 'server.js'])).toMatchObject({ stderr: '', code: 0 });
    await bedrock(['mcp', 'add', 'docs', '--', 'node', 'docs.js']);
    const one = (await bedrock(['new', '--cwd', '/tmp'])).stdout.trim();
    const other = (await bedrock(['new', '--cwd', '/tmp'])).stdout.trim();
    expect(one).not.toBe('');

    const off = await bedrock(['settings', one, '--mcp-off', 'files']);
    expect(off.stderr).toBe('');
    expect(off.code).toBe(0);
    expect(off.stdout).toContain('MCP servers: docs, files (off)\n');
    expect(off.stdout).toContain('thinking:');
    const api = mcpApi('alice');
    const listed = (await api.listMcpServers({ conversationId: one })).servers.map((x) => [x.name, x.disabled]);
    expect(listed).toEqual([
      ['docs', false],
      ['files', true],
    ]);
    // Another conversation, and the user-wide listing, are untouched.
    expect((await api.listMcpServers({ conversationId: other })).servers.map((x) => x.disabled)).toEqual([false, false]);
    expect((await api.listMcpServers({})).servers.map((x) => x.disabled)).toEqual([false, false]);
    // Idempotent.
    expect((await bedrock(['settings', one, '--mcp-off', 'files'])).code).toBe(0);

    const on = await bedrock(['settings', one, '--mcp-on', 'files', '--mcp-off', 'docs']);
    expect(on.code).toBe(0);
    expect(on.stdout).toContain('MCP servers: docs (off), files\n');
    const json = await bedrock(['settings', one, '--mcp-on', 'docs', '--json']);
    expect(json.code).toBe(0);
    expect(JSON.parse(json.stdout)).toMatchObject({ id: one });
    expect((await api.listMcpServers({ conversationId: one })).servers.every((x) => !x.disabled)).toBe(true);
    await bedrock(['mcp', 'rm', 'files']);
    await bedrock(['mcp', 'rm', 'docs']);
  }, 60_000);

  it('reports unknown servers, other users, a missing conversation id and misuse', async () => {
    const id = (await bedrock(['new', '--cwd', '/tmp'])).stdout.trim();
    const unknown = await bedrock(['settings', id, '--mcp-off', 'nope']);
    expect(unknown.code).toBe(3);
    expect(unknown.stderr).toContain('no MCP server named "nope"');
    await bedrock(['mcp', 'add', 'mine', '--', 'x']);
    // Bob cannot touch Alice's conversation.
    const code = await mcpApi('bob')
      .setMcpServerEnabled({ conversationId: id, name: 'mine', enabled: false })
      .then(
        () => 'ok',
        (e: { code?: number }) => e.code,
      );
    expect(code).toBe(5); // NOT_FOUND
    const noConversation = await mcpApi('alice')
      .setMcpServerEnabled({ conversationId: '', name: 'mine', enabled: false })
      .then(
        () => 'ok',
        (e: { code?: number }) => e.code,
      );
    expect(noConversation).toBe(3); // INVALID_ARGUMENT
    expect((await bedrock(['settings', id, '--mcp-on', 'mine', '--mcp-off', 'mine'])).code).toBe(2);
    expect((await bedrock(['ls', '--mcp-off', 'mine'])).code).toBe(2);
    await bedrock(['mcp', 'rm', 'mine']);
  }, 60_000);
});
