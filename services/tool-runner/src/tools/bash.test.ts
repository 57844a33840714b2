import { describe, it, expect, beforeAll, afterAll } from '@jest/globals';
import { existsSync } from 'node:fs';
import { Mode } from '@bedrock/contracts';
import { executeTool } from './execute-tool.ts';
import type { ToolOutcome } from './tool-types.ts';
import type { SandboxSettings } from '../sandbox/sandbox-settings.ts';
import { executeContext, tempDir, testSandboxSettings } from '../../test/support.ts';
import { closeSandboxSettings } from '../sandbox/sandbox-settings.ts';

let sandbox: SandboxSettings;
const dir = tempDir();

beforeAll(async () => {
  sandbox = await testSandboxSettings();
});
afterAll(async () => {
  dir.remove();
  await closeSandboxSettings(sandbox);
});

function bash(
  input: Record<string, unknown>,
  mode = Mode.UNRESTRICTED,
  capture?: { headBytes: number; tailBytes: number },
): Promise<ToolOutcome> {
  const ctx = executeContext(sandbox);
  return executeTool({ toolName: 'bash', inputJson: JSON.stringify(input), cwd: dir.path, mode }, capture ? { ...ctx, capture } : ctx);
}

describe('bash', () => {
  it('runs in the working directory, cd does not persist, stdin is closed', async () => {
    const first = await bash({ command: 'pwd; cd /; pwd; cat; echo "stdin:$?"' });
    expect(first.content).toBe(`${dir.path}\n/\nstdin:0\n`);
    const second = await bash({ command: 'pwd' });
    expect(second.content).toBe(`${dir.path}\n`);
  });

  it('combines stdout and stderr in order', async () => {
    const r = await bash({ command: 'echo out1; echo err1 >&2; echo out2' });
    expect(r.content).toBe('out1\nerr1\nout2\n');
  });

  it('reports a non-zero exit as an error with the exit code', async () => {
    const r = await bash({ command: 'echo failing; exit 3' });
    expect(r).toMatchObject({ isError: true, exitCode: 3 });
    expect(r.content).toBe('failing\n[Exit code 3.]');
  });

  it('says so when there is no output', async () => {
    expect((await bash({ command: 'true' })).content).toBe('(no output)');
  });

  it('reads 10 MB of output without deadlocking and keeps head and tail', async () => {
    const r = await bash({ command: 'head -c 10000000 /dev/zero | tr "\\0" "a"; echo; echo THE-END' });
    expect(r.isError).toBe(false);
    expect(r.content.length).toBeLessThan(110_000);
    expect(r.content.startsWith('aaaa')).toBe(true);
    expect(r.content).toMatch(/\[\.\.\. \d+ bytes of output omitted \.\.\.\]/);
    expect(r.content.endsWith('THE-END\n')).toBe(true);
    expect(r.display).toMatchObject({ totalBytes: 10_000_009, truncated: true });
  });

  it('turns binary output into text without NUL bytes', async () => {
    const r = await bash({ command: 'printf "a\\000b\\377c"' });
    expect(r.content).toBe('a\uFFFDb\uFFFDc');
  });

  it('cuts multi-byte characters on a character boundary at both ends', async () => {
    // 3-byte characters; head of 10 bytes and tail of 10 bytes fall inside characters.
    const r = await bash({ command: 'for i in $(seq 1 100); do printf "€"; done' }, Mode.UNRESTRICTED, { headBytes: 10, tailBytes: 10 });
    expect(r.content).toBe('€€€\n\n[... 282 bytes of output omitted ...]\n\n€€€');
  });

  it('times out, killing a backgrounded grandchild too', async () => {
    const marker = tempDir('bedrock-grandchild-');
    const started = Date.now();
    const r = await bash({ command: `(sleep 2; touch ${marker.path}/survived) & sleep 30`, timeout_seconds: 1 });
    expect(r.isError).toBe(true);
    expect(r.content).toContain('Timed out after 1s');
    expect(Date.now() - started).toBeLessThan(5000);
    await new Promise((resolve) => setTimeout(resolve, 2500));
    expect(existsSync(`${marker.path}/survived`)).toBe(false);
    marker.remove();
  }, 15_000);

  it('does not wait for a background process that outlives the command, and kills it', async () => {
    // Bounds are loose (a loaded machine), but below the 3 s the background process sleeps.
    const marker = tempDir('bedrock-bg-');
    const started = Date.now();
    const r = await bash({ command: `(sleep 3; touch ${marker.path}/survived) & echo started` });
    expect(r).toMatchObject({ isError: false, content: 'started\n' });
    expect(Date.now() - started).toBeLessThan(2500);
    await new Promise((resolve) => setTimeout(resolve, 3500));
    expect(existsSync(`${marker.path}/survived`)).toBe(false);
    marker.remove();
  });

  it('kills a process that left the group with setsid when the command exits', async () => {
    const marker = tempDir('bedrock-setsid-');
    const started = Date.now();
    const r = await bash({ command: `setsid bash -c 'sleep 3; touch ${marker.path}/survived' & echo started` });
    expect(r).toMatchObject({ isError: false, content: 'started\n' });
    expect(Date.now() - started).toBeLessThan(2500);
    await new Promise((resolve) => setTimeout(resolve, 3500));
    expect(existsSync(`${marker.path}/survived`)).toBe(false);
    marker.remove();
  });

  it('reports invalid input as an error result, never a crash', async () => {
    expect((await bash({})).content).toBe('Invalid input for bash: input.command is required.');
    expect((await bash({ command: 'ls', timeout_seconds: 0 })).content).toContain('input.timeout_seconds must be at least 1');
    expect((await bash({ command: 'ls', extra: 1 })).content).toContain('input.extra is not a known field');
    const notJson = await executeTool(
      { toolName: 'bash', inputJson: '{"command":', cwd: dir.path, mode: Mode.UNRESTRICTED },
      executeContext(sandbox),
    );
    expect(notJson.isError).toBe(true);
    expect(notJson.content).toContain('not valid JSON');
  });

  it('reports a missing working directory', async () => {
    const r = await executeTool(
      { toolName: 'bash', inputJson: '{"command":"ls"}', cwd: '/nonexistent/dir', mode: Mode.UNRESTRICTED },
      executeContext(sandbox),
    );
    expect(r).toMatchObject({ isError: true, content: 'The working directory /nonexistent/dir does not exist.' });
  });

  it('does not pass the runner secrets to commands', async () => {
    const ctx = executeContext({
      ...sandbox,
      baseEnv: { PATH: process.env.PATH, REDIS_URL: 'redis://secret', ANTHROPIC_API_KEY: 'k', KEEP_ME: 'yes' },
    });
    const r = await executeTool({ toolName: 'bash', inputJson: '{"command":"env"}', cwd: dir.path, mode: Mode.UNRESTRICTED }, ctx);
    expect(r.content).toContain('KEEP_ME=yes');
    expect(r.content).not.toContain('secret');
    expect(r.content).not.toContain('ANTHROPIC_API_KEY');
  });
});

describe('tool dispatch', () => {
  it('think has no side effects', async () => {
    const r = await executeTool(
      { toolName: 'think', inputJson: '{"thoughts":"plan"}', cwd: dir.path, mode: Mode.RESTRICTED },
      executeContext(sandbox),
    );
    expect(r).toMatchObject({ isError: false, content: 'Your thoughts have been recorded.' });
  });

  it("refuses tools that are not the runner's and unknown tools", async () => {
    const ctx = executeContext(sandbox);
    expect(
      (await executeTool({ toolName: 'spawn_agents', inputJson: '{}', cwd: dir.path, mode: Mode.UNRESTRICTED }, ctx)).content,
    ).toContain('not run by the tool-runner');
    expect((await executeTool({ toolName: 'rm_rf', inputJson: '{}', cwd: dir.path, mode: Mode.UNRESTRICTED }, ctx)).content).toBe(
      'Unknown tool "rm_rf".',
    );
  });

  it('never runs Restricted work without a sandbox', async () => {
    const ctx = executeContext({ ...sandbox, sandboxAvailable: false });
    const r = await executeTool({ toolName: 'bash', inputJson: '{"command":"echo ran"}', cwd: dir.path, mode: Mode.RESTRICTED }, ctx);
    expect(r.isError).toBe(true);
    expect(r.content).toContain('cannot run Restricted-mode tools');
  });

  it('treats an unspecified mode as Restricted', async () => {
    const r = await executeTool(
      { toolName: 'bash', inputJson: `{"command":"touch ${dir.path}/x"}`, cwd: dir.path, mode: Mode.UNSPECIFIED },
      executeContext(sandbox),
    );
    expect(r.content).toContain('Permission denied');
  });
});
