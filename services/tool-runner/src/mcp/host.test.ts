/**
 * The MCP host against real servers from npm (server-everything, server-filesystem) and a
 * small fixture, each run by the real sandbox helper: annotations and the mode rule, progress,
 * timeouts, cancel, images, structured content, resource links, errors, and what the
 * Restricted sandbox keeps a server from (files outside the workspace, the network).
 */
import { describe, it, expect, beforeAll, afterAll } from '@jest/globals';
import { chownSync, existsSync, mkdirSync, writeFileSync, readFileSync, chmodSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { join } from 'node:path';
import { create } from '@bufbuild/protobuf';
import { McpServerSpecSchema, Mode } from '@bedrock/contracts';
import type { McpServerSpec } from '@bedrock/contracts';
import { closeSandboxSettings } from '../sandbox/sandbox-settings.ts';
import type { SandboxSettings } from '../sandbox/sandbox-settings.ts';
import { executeContext, tempDir, testSandboxSettings, testWorkspace, TOOL_UID } from '../../test/support.ts';
import { executeTool } from '../tools/execute-tool.ts';
import { createMcpHost, MCP_HOST_DEFAULTS } from './host.ts';
import type { McpHost, McpPlace } from './host.ts';

const repo = new URL('../../../../', import.meta.url).pathname;
const nodeModules = join(repo, 'node_modules');
const fixtures = new URL('../../test/fixtures/', import.meta.url).pathname;
const everything = join(nodeModules, '@modelcontextprotocol/server-everything/dist/index.js');
const filesystem = join(nodeModules, '@modelcontextprotocol/server-filesystem/dist/index.js');
const asRoot = process.getuid?.() === 0;

const spec = (name: string, args: string[], extra: { timeoutMs?: bigint } = {}): McpServerSpec =>
  create(McpServerSpecSchema, { name, command: 'node', args, ...extra });

let sandbox: SandboxSettings;
let host: McpHost;
let listener: Server;
let port = 0;
const dir = tempDir();
const ws = testWorkspace();
let n = 0;
const place = (mode: 'restricted' | 'unrestricted', cwd = dir.path): McpPlace => ({ conversationId: `c${++n}`, mode, cwd });

beforeAll(async () => {
  // The view shows the system directories and, as an operator would install them, the servers.
  sandbox = await testSandboxSettings({ viewPaths: ['/usr', '/bin', '/lib', '/lib64', '/etc', nodeModules, fixtures] });
  host = createMcpHost({ sandbox, capture: { headBytes: 50_000, tailBytes: 50_000 }, ...MCP_HOST_DEFAULTS, cancelGraceMs: 1000 });
  listener = createServer((s) => s.destroy());
  await new Promise<void>((r) => listener.listen(0, '127.0.0.1', r));
  port = (listener.address() as { port: number }).port;
  if (asRoot) chownSync(ws.path, TOOL_UID, TOOL_UID);
  writeFileSync(join(ws.path, 'inside.txt'), 'inside the workspace\n');
  if (asRoot) chownSync(join(ws.path, 'inside.txt'), TOOL_UID, TOOL_UID);
  // Readable by the tool user: only the sandbox keeps a workspace's server from it.
  writeFileSync(join(dir.path, 'secret.txt'), 'outside\n', { mode: 0o644 });
}, 30_000);

afterAll(async () => {
  await host.close();
  listener.close();
  dir.remove();
  ws.remove();
  await closeSandboxSettings(sandbox);
});

const ac = () => new AbortController();

describe('server-everything', () => {
  const everyone = spec('everything', [everything]);

  it('lists the tools under mcp__ names, schemas verbatim, sorted', async () => {
    const listing = await host.list(place('unrestricted'), [everyone]);
    expect(listing.problems).toEqual({});
    const names = listing.tools.map((t) => t.name);
    expect(names).toContain('mcp__everything__echo');
    expect(names).toContain('mcp__everything__get-tiny-image');
    expect([...names].sort()).toEqual(names);
    const echo = listing.tools.find((t) => t.name === 'mcp__everything__echo')!;
    expect(JSON.parse(echo.inputSchemaJson)).toMatchObject({ type: 'object', properties: { message: { type: 'string' } } });
    expect(echo.description).toContain('declared read-only');
    for (const n of names) expect(n).toMatch(/^[a-zA-Z0-9_-]{1,64}$/);
  }, 60_000);

  it('runs a read-only tool in Restricted mode, in one process per conversation', async () => {
    const p = place('restricted');
    const r = await host.call(p, everyone, 'mcp__everything__echo', { message: 'hi there' }, ac().signal);
    expect(r).toMatchObject({ isError: false, cancelled: false });
    expect(r.content).toContain('hi there');
    const pid = host.pidOf(p.conversationId, 'everything');
    await host.call(p, everyone, 'mcp__everything__get-sum', { a: 2, b: 3 }, ac().signal);
    expect(host.pidOf(p.conversationId, 'everything')).toBe(pid);
  }, 60_000);

  it('refuses a tool that declares writes in Restricted mode, and says why; runs it Unrestricted', async () => {
    const refused = await host.call(place('restricted'), everyone, 'mcp__everything__toggle-simulated-logging', {}, ac().signal);
    expect(refused.isError).toBe(true);
    expect(refused.content).toContain('not available in Restricted mode');
    expect(refused.content).toContain('readOnlyHint: false');
    expect(refused.content).toContain('request_mode_upgrade');
    const ran = await host.call(place('unrestricted'), everyone, 'mcp__everything__toggle-simulated-logging', {}, ac().signal);
    expect(ran.isError).toBe(false);
  }, 60_000);

  it('maps images, structured content and resource links to text', async () => {
    const p = place('unrestricted');
    const image = await host.call(p, everyone, 'mcp__everything__get-tiny-image', {}, ac().signal);
    expect(image.content).toMatch(/\[image: image\/png, \d+ bytes; not shown/);
    const structured = await host.call(p, everyone, 'mcp__everything__get-structured-content', { location: 'New York' }, ac().signal);
    expect(structured.isError).toBe(false);
    expect(structured.content).toMatch(/temperature/);
    const links = await host.call(p, everyone, 'mcp__everything__get-resource-links', { count: 2 }, ac().signal);
    expect(links.content).toMatch(/\[resource link: .+ <[a-z]+:\/\/.+>/);
  }, 60_000);

  it('reports a protocol error (bad arguments) and an unknown tool', async () => {
    const p = place('unrestricted');
    const bad = await host.call(p, everyone, 'mcp__everything__get-sum', { a: 'x' }, ac().signal);
    expect(bad.isError).toBe(true);
    const unknown = await host.call(p, everyone, 'mcp__everything__nope', {}, ac().signal);
    expect(unknown).toMatchObject({ isError: true, display: { error: 'unknown_tool' } });
    expect(unknown.content).toContain('mcp__everything__echo');
  }, 60_000);

  it('streams progress, and progress keeps a call alive past its timeout', async () => {
    const p = place('unrestricted');
    const progress: string[] = [];
    const short = spec('everything', [everything], { timeoutMs: 1500n });
    const r = await host.call(p, short, 'mcp__everything__trigger-long-running-operation', { duration: 3, steps: 6 }, ac().signal, (t) =>
      progress.push(t),
    );
    expect(r.isError).toBe(false);
    expect(progress.length).toBeGreaterThanOrEqual(3);
    expect(progress[0]).toMatch(/^\[progress 1\/6/);
  }, 60_000);

  it('times out a call without progress', async () => {
    const short = spec('everything', [everything], { timeoutMs: 800n });
    const r = await host.call(
      place('unrestricted'),
      short,
      'mcp__everything__trigger-long-running-operation',
      { duration: 4, steps: 1 },
      ac().signal,
    );
    expect(r).toMatchObject({ isError: true, display: { error: 'timeout' } });
  }, 60_000);

  it('cancels a long call quickly', async () => {
    const controller = ac();
    const started = Date.now();
    setTimeout(() => controller.abort(), 500);
    const r = await host.call(
      place('unrestricted'),
      everyone,
      'mcp__everything__trigger-long-running-operation',
      { duration: 30, steps: 30 },
      controller.signal,
    );
    expect(r.cancelled).toBe(true);
    expect(Date.now() - started).toBeLessThan(5000);
  }, 60_000);
});

describe('the fixture server', () => {
  const fixture = spec('fixture', [join(fixtures, 'mcp-fixture-server.mjs')]);

  it('treats an unannotated tool as a write: refused in Restricted, runs Unrestricted', async () => {
    const refused = await host.call(place('restricted'), fixture, 'mcp__fixture__unannotated', {}, ac().signal);
    expect(refused.isError).toBe(true);
    expect(refused.content).toContain('does not declare it read-only');
    const ran = await host.call(place('unrestricted'), fixture, 'mcp__fixture__unannotated', {}, ac().signal);
    expect(ran).toMatchObject({ isError: false, content: 'hello from an unannotated tool' });
  }, 60_000);

  it('names a tool whose name the API does not allow with a stable hashed name', async () => {
    const listing = await host.list(place('unrestricted'), [fixture]);
    const probe = listing.tools.find((t) => t.name.startsWith('mcp__fixture__net_probe_'));
    expect(probe).toBeDefined();
  }, 60_000);

  it('keeps a Restricted server off the network even when its tool claims to be read-only', async () => {
    const listing = await host.list(place('restricted'), [fixture]);
    const name = listing.tools.find((t) => t.name.startsWith('mcp__fixture__net_probe_'))!.name;
    const restricted = await host.call(place('restricted'), fixture, name, { port }, ac().signal);
    expect(restricted.content).toMatch(/network error: E(ACCES|PERM)/);
    const unrestricted = await host.call(place('unrestricted'), fixture, name, { port }, ac().signal);
    expect(unrestricted.content).toBe('connected');
  }, 60_000);

  it('answers a cancel at once, kills a server that ignores it, and starts it again at the next call', async () => {
    const p = place('unrestricted');
    await host.list(p, [fixture]); // started, so the cancel comes during the call
    const pid = host.pidOf(p.conversationId, 'fixture');
    expect(pid).toBeDefined();
    const controller = ac();
    setTimeout(() => controller.abort(), 300);
    const started = Date.now();
    const r = await host.call(p, fixture, 'mcp__fixture__hang', {}, controller.signal);
    const answered = Date.now();
    expect(r.cancelled).toBe(true);
    // The cancelled call does not wait for the server (a generous bound: the figure is in bench mcp-cancel).
    expect(answered - started).toBeLessThan(1500);
    // Then the ping it does not answer (cancelGraceMs 1 s), then the kill.
    const deadline = Date.now() + 5000;
    while (host.pidOf(p.conversationId, 'fixture') !== undefined && Date.now() < deadline) await new Promise((res) => setTimeout(res, 50));
    expect(host.pidOf(p.conversationId, 'fixture')).toBeUndefined();
    expect(Date.now() - answered).toBeGreaterThanOrEqual(700);
    const again = await host.call(p, fixture, 'mcp__fixture__unannotated', {}, ac().signal);
    expect(again.isError).toBe(false);
    expect(host.pidOf(p.conversationId, 'fixture')).not.toBe(pid);
  }, 60_000);

  it('makes the next call after a cancel wait until the stuck server is killed, then run on a fresh one', async () => {
    const p = place('unrestricted');
    await host.list(p, [fixture]);
    const controller = ac();
    setTimeout(() => controller.abort(), 300);
    expect((await host.call(p, fixture, 'mcp__fixture__hang', {}, controller.signal)).cancelled).toBe(true);
    // At once: the session is still being checked, so this call waits for the kill and a new server.
    const next = await host.call(p, fixture, 'mcp__fixture__unannotated', {}, ac().signal);
    expect(next).toMatchObject({ isError: false, content: 'hello from an unannotated tool' });
  }, 60_000);

  it('reports a server that dies during a call, and restarts it', async () => {
    const p = place('unrestricted');
    const r = await host.call(p, fixture, 'mcp__fixture__crash', {}, ac().signal);
    expect(r).toMatchObject({ isError: true, display: { error: 'server_down' } });
    const again = await host.call(p, fixture, 'mcp__fixture__unannotated', {}, ac().signal);
    expect(again.isError).toBe(false);
  }, 60_000);

  it('reports a server that cannot start', async () => {
    const broken = spec('broken', ['/nonexistent/server.js']);
    const r = await host.call(place('unrestricted'), broken, 'mcp__broken__x', {}, ac().signal);
    expect(r).toMatchObject({ isError: true, display: { error: 'server_down' } });
  }, 60_000);
});

describe('server-filesystem in a workspace (the view)', () => {
  const wsPlace = (mode: 'restricted' | 'unrestricted'): McpPlace => ({
    conversationId: `fs${++n}`,
    mode,
    cwd: ws.path,
    user: { uid: TOOL_UID, gid: TOOL_UID },
    workspace: ws.path,
  });
  // Given the whole filesystem: only the sandbox keeps it in the workspace.
  const fs = spec('fs', [filesystem, '/']);

  it('reads inside the workspace in Restricted mode, sees nothing outside it, and may not write', async () => {
    const p = wsPlace('restricted');
    const inside = await host.call(p, fs, 'mcp__fs__read_text_file', { path: join(ws.path, 'inside.txt') }, ac().signal);
    expect(inside).toMatchObject({ isError: false, content: 'inside the workspace\n' });
    const outside = await host.call(p, fs, 'mcp__fs__read_text_file', { path: join(dir.path, 'secret.txt') }, ac().signal);
    expect(outside.isError).toBe(true);
    expect(outside.content).not.toContain('outside');
    // The same file through the same server outside a workspace (host-path, Restricted): readable.
    const hostPath = await host.call(
      place('restricted'),
      fs,
      'mcp__fs__read_text_file',
      { path: join(dir.path, 'secret.txt') },
      ac().signal,
    );
    expect(hostPath).toMatchObject({ isError: false, content: 'outside\n' });
    const write = await host.call(p, fs, 'mcp__fs__write_file', { path: join(ws.path, 'new.txt'), content: 'x' }, ac().signal);
    expect(write.content).toContain('not available in Restricted mode');
    expect(existsSync(join(ws.path, 'new.txt'))).toBe(false);
  }, 60_000);

  it('writes inside the workspace in Unrestricted mode, not outside', async () => {
    const p = wsPlace('unrestricted');
    const write = await host.call(p, fs, 'mcp__fs__write_file', { path: join(ws.path, 'new.txt'), content: 'written' }, ac().signal);
    expect(write.isError).toBe(false);
    expect(readFileSync(join(ws.path, 'new.txt'), 'utf8')).toBe('written');
    mkdirSync(join(dir.path, 'out'), { recursive: true });
    chmodSync(join(dir.path, 'out'), 0o777);
    const outside = await host.call(p, fs, 'mcp__fs__write_file', { path: join(dir.path, 'out', 'x.txt'), content: 'x' }, ac().signal);
    expect(outside.isError).toBe(true);
    expect(existsSync(join(dir.path, 'out', 'x.txt'))).toBe(false);
  }, 60_000);
});

describe('executeTool with an MCP job', () => {
  it('runs through the same entry point as the built-in tools, with the job server spec', async () => {
    const ctx = { ...executeContext(sandbox), mcp: host };
    const job = {
      toolName: 'mcp__everything__echo',
      inputJson: JSON.stringify({ message: 'via executeTool' }),
      cwd: dir.path,
      mode: Mode.RESTRICTED,
      conversationId: 'exec-1',
      mcpServer: spec('everything', [everything]),
    };
    const r = await executeTool(job, ctx);
    expect(r).toMatchObject({ isError: false });
    expect(r.content).toContain('via executeTool');
    const other = await executeTool({ ...job, toolName: 'mcp__other__echo' }, ctx);
    expect(other.content).toContain('Unknown tool');
  }, 60_000);
});

describe('the cap on servers', () => {
  it('stops the least recently used idle server to start another', async () => {
    const small = createMcpHost({ sandbox, capture: {}, ...MCP_HOST_DEFAULTS, maxServers: 1 });
    try {
      const fixtureSpec = spec('fixture', [join(fixtures, 'mcp-fixture-server.mjs')]);
      const [a, b] = [place('unrestricted'), place('unrestricted')];
      expect((await small.call(a, fixtureSpec, 'mcp__fixture__unannotated', {}, ac().signal)).isError).toBe(false);
      expect((await small.call(b, fixtureSpec, 'mcp__fixture__unannotated', {}, ac().signal)).isError).toBe(false);
      expect(small.size).toBe(1);
      expect(small.pidOf(a.conversationId, 'fixture')).toBeUndefined();
      expect(small.pidOf(b.conversationId, 'fixture')).toBeGreaterThan(0);
    } finally {
      await small.close();
    }
  }, 60_000);
});

describe("a server's environment", () => {
  it('reaches the server, never the root helper', async () => {
    const p = place('unrestricted');
    const withEnv = spec('everything', [everything], {});
    withEnv.env = { BEDROCK_MCP_TEST_VAR: 'set-for-the-server', LD_PRELOAD: '/nonexistent/preload.so' };
    const r = await host.call(p, withEnv, 'mcp__everything__get-env', {}, ac().signal);
    expect(r.content).toContain('set-for-the-server');
    const helperPid = host.pidOf(p.conversationId, 'everything')!;
    expect(helperPid).toBeGreaterThan(0);
    const helperEnv = readFileSync(`/proc/${helperPid}/environ`, 'utf8');
    expect(helperEnv).not.toContain('BEDROCK_MCP_TEST_VAR');
    expect(helperEnv).not.toContain('LD_PRELOAD');
  }, 60_000);
});
