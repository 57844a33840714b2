/**
 * The `bedrock` CLI as a user runs it (the workspace bin, a separate process) against the real
 * web-bff and conversation service; the test plays the gateway and the tool-runner.
 */
import { execFile, spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { StopReason } from '@bedrock/contracts';
import { run } from '../src/cli/run.ts';
import { startSystem, type System } from './support/system.ts';

const BIN = resolve('node_modules/.bin/bedrock');

let s: System;
let stopAgent = false;
let agent: Promise<void>;

beforeAll(async () => {
  s = await startSystem({ label: 'cli' });
  agent = playAgent();
});
afterAll(async () => {
  stopAgent = true;
  await agent;
  await s?.close();
});

/**
 * A scripted agent: "hello" → streams "Hel" + "lo!" and answers; "run ls" → calls bash, then
 * answers "listed"; "write" → asks for write access; "hang" → never answers (for cancel).
 */
async function playAgent(): Promise<void> {
  const handledLlm = new Set<string>();
  const handledTools = new Set<string>();
  while (!stopAgent) {
    for (const job of s.llmJobs) {
      if (handledLlm.has(job.requestId)) continue;
      handledLlm.add(job.requestId);
      const lastUser = job.messages.at(-1);
      const block = [...(lastUser?.content ?? [])].reverse().find((b) => b.block.case === 'text' || b.block.case === 'toolResult');
      const said = block?.block.case === 'text' ? block.block.value.text : block?.block.case === 'toolResult' ? '<tool result>' : '';
      const usage = { inputTokens: 50n, outputTokens: 5n };
      const reply = (content: { block: { case: 'text'; value: { text: string } } | { case: 'toolUse'; value: { id: string; name: string; inputJson: string } } }[], stopReason = StopReason.END_TURN) =>
        s.send(job.conversationId, `r/${job.requestId}`, { case: 'llmResponse', value: { requestId: job.requestId, stopReason, usage, content } });
      if (said === 'hang') continue;
      if (said === 'hello') {
        await s.delta(job.conversationId, job.requestId, 'Hel');
        await s.delta(job.conversationId, job.requestId, 'lo!');
        await reply([{ block: { case: 'text', value: { text: 'Hello!' } } }]);
      } else if (said === 'run ls') {
        await reply([{ block: { case: 'toolUse', value: { id: `tu_${job.requestId.slice(-8)}`, name: 'bash', inputJson: '{"command":"ls"}' } } }], StopReason.TOOL_USE);
      } else if (said === 'write') {
        await reply([{ block: { case: 'toolUse', value: { id: `up_${job.requestId.slice(-8)}`, name: 'request_mode_upgrade', inputJson: '{"reason":"to fix the bug"}' } } }], StopReason.TOOL_USE);
      } else {
        await reply([{ block: { case: 'text', value: { text: said === '<tool result>' ? 'listed' : `echo: ${said}` } } }]);
      }
    }
    for (const job of s.toolJobs) {
      if (handledTools.has(job.toolUseId)) continue;
      handledTools.add(job.toolUseId);
      await s.send(job.conversationId, `tool/${job.toolUseId}`, { case: 'toolComplete', value: { toolUseId: job.toolUseId, content: 'a.txt\nb.txt' } });
    }
    await new Promise((r) => setTimeout(r, 20));
  }
}

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs the CLI in this process (the same `run` the bin calls), capturing its output. */
async function bedrock(args: string[], env: Record<string, string | undefined> = {}): Promise<Run> {
  let stdout = '';
  let stderr = '';
  const code = await run(args, { BEDROCK_URL: s.bff.httpUrl, BEDROCK_TOKEN: s.tokens.alice, HOME: '/nonexistent', ...env }, {
    out: (t) => void (stdout += t),
    err: (t) => void (stderr += t),
  });
  return { code, stdout, stderr };
}

/** Runs the real `bedrock` bin of the workspace as a separate process. */
function bedrockBin(args: string[], env: Record<string, string | undefined> = {}): Promise<Run> {
  return new Promise((resolveRun) => {
    execFile(
      BIN,
      args,
      { env: { PATH: process.env.PATH, HOME: process.env.HOME, BEDROCK_URL: s.bff.httpUrl, BEDROCK_TOKEN: s.tokens.alice, ...env }, timeout: 30_000 },
      (err, stdout, stderr) => resolveRun({ code: err ? (typeof err.code === 'number' ? err.code : -1) : 0, stdout, stderr }),
    );
  });
}

describe('bedrock CLI', () => {
  it('new prints the id alone; ls lists it; show prints it', async () => {
    const created = await bedrockBin(['new', '--cwd', '/tmp', '--model', 'test-model']);
    expect(created.code).toBe(0);
    expect(created.stdout).toMatch(/^[0-9a-f-]{36}\n$/);
    const id = created.stdout.trim();
    const ls = await bedrock(['ls']);
    expect(ls.code).toBe(0);
    expect(ls.stdout).toContain(id);
    const lsJson = await bedrock(['ls', '--json']);
    const rows = lsJson.stdout.trim().split('\n').map((l) => JSON.parse(l));
    expect(rows.find((r: { id: string }) => r.id === id)).toMatchObject({ cwd: '/tmp', model: 'test-model' });
    const shown = await bedrock(['show', id]);
    expect(shown.stdout).toContain('state: idle');
  });

  it('send --wait streams the turn with tool activity and returns at rest; show --json has every message, call and result', async () => {
    const id = (await bedrock(['new', '--cwd', '/tmp'])).stdout.trim();
    const hello = await bedrockBin(['send', id, 'hello', '--wait']);
    expect(hello.code).toBe(0);
    expect(hello.stdout).toContain('Hello!');
    expect(hello.stderr).toMatch(/· idle/);
    const tool = await bedrock(['send', id, 'run ls', '--wait']);
    expect(tool.code).toBe(0);
    expect(tool.stdout).toContain('⏺ bash {"command":"ls"}');
    expect(tool.stdout).toMatch(/→ ok: a\.txt b\.txt/);
    expect(tool.stdout).toContain('listed');

    const shown = await bedrock(['show', id, '--json']);
    const doc = JSON.parse(shown.stdout);
    expect(doc.conversation.id).toBe(id);
    const blocks = doc.messages.flatMap((m: { content: object[] }) => m.content);
    expect(blocks).toEqual(
      expect.arrayContaining([
        { text: { text: 'hello' } },
        { toolUse: expect.objectContaining({ name: 'bash', inputJson: '{"command":"ls"}' }) },
        { toolResult: expect.objectContaining({ content: 'a.txt\nb.txt' }) },
        { text: { text: 'listed' } },
      ]),
    );
  }, 60_000);

  it('send --wait --json prints NDJSON events; watch --json streams them', async () => {
    const id = (await bedrock(['new', '--cwd', '/tmp'])).stdout.trim();
    const watcher = spawn(BIN, ['watch', id, '--json'], { env: { PATH: process.env.PATH, BEDROCK_URL: s.bff.httpUrl, BEDROCK_TOKEN: s.tokens.alice } });
    let watched = '';
    watcher.stdout.on('data', (d: Buffer) => (watched += d.toString()));
    await s.waitFor('watch snapshot', () => watched.includes('"snapshot"'), 20_000);
    const sent = await bedrock(['send', id, 'hello', '--wait', '--json']);
    expect(sent.code).toBe(0);
    const events = sent.stdout.trim().split('\n').map((l) => JSON.parse(l));
    expect(events.map((e: Record<string, unknown>) => Object.keys(e).find((k) => !['conversationId', 'sequence', 'deltaIndex'].includes(k)))).toEqual(
      expect.arrayContaining(['messagePersisted', 'stateChanged', 'tokenDelta']),
    );
    await s.waitFor('watched the turn', () => watched.includes('"Hello!"'), 20_000);
    watcher.kill('SIGINT');
    await new Promise((r) => watcher.once('exit', r));
    for (const line of watched.trim().split('\n')) expect(() => JSON.parse(line)).not.toThrow();
  }, 60_000);

  it('cancel stops a busy turn; approve and deny answer an upgrade request; downgrade and continue act', async () => {
    const id = (await bedrock(['new', '--cwd', '/tmp'])).stdout.trim();
    expect((await bedrock(['send', id, 'hang'])).code).toBe(0);
    const busy = await bedrock(['send', id, 'again']);
    expect(busy.code).toBe(3);
    expect(busy.stderr).toMatch(/FailedPrecondition: .*busy/i);
    const cancelled = await bedrock(['cancel', id]);
    expect(cancelled.code).toBe(0);
    expect(cancelled.stdout).toMatch(/cancelling|idle/);
    await s.waitFor('idle', async () => (await bedrock(['show', id])).stdout.includes('state: idle'), 20_000);

    const write = await bedrock(['send', id, 'write', '--wait']);
    expect(write.code).toBe(5);
    expect(write.stderr).toMatch(/write access/);
    const approved = await bedrock(['approve', id, '--json']);
    expect(approved.code).toBe(0);
    expect(JSON.parse(approved.stdout).conversation.mode).toBe('MODE_UNRESTRICTED');
    const downgraded = await bedrock(['downgrade', id, '--json']);
    expect(downgraded.code).toBe(0);
    expect(JSON.parse(downgraded.stdout).conversation.mode).toBe('MODE_RESTRICTED');
    await s.waitFor('idle', async () => (await bedrock(['show', id])).stdout.includes('state: idle'), 20_000);
    expect((await bedrock(['send', id, 'write', '--wait'])).code).toBe(5);
    const denied = await bedrock(['deny', id]);
    expect(denied.code).toBe(0);
    await s.waitFor('idle', async () => (await bedrock(['show', id])).stdout.includes('state: idle'), 20_000);
    const cont = await bedrock(['continue', id]);
    expect(cont.code).toBe(0);
  }, 90_000);

  it('distinguishes usage errors, rejections and server errors by exit code', async () => {
    expect((await bedrockBin(['send', 'only-an-id'])).code).toBe(2);
    expect((await bedrock(['frobnicate'])).code).toBe(2);
    expect((await bedrock(['ls', '--bogus'])).code).toBe(2);
    const missing = await bedrock(['show', 'no-such-conversation']);
    expect(missing.code).toBe(3);
    expect(missing.stderr).toMatch(/NotFound/);
    const wrongToken = await bedrock(['ls'], { BEDROCK_TOKEN: 'nope' });
    expect(wrongToken.code).toBe(3);
    expect(wrongToken.stderr).toMatch(/Unauthenticated/);
    const down = await bedrockBin(['ls'], { BEDROCK_URL: 'http://127.0.0.1:9' });
    expect(down.code).toBe(4);
  }, 60_000);

  it('chat streams turns, asks y/n on an upgrade request and quits on end of input', async () => {
    const child = spawn(BIN, ['chat', '--cwd', '/tmp'], { env: { PATH: process.env.PATH, BEDROCK_URL: s.bff.httpUrl, BEDROCK_TOKEN: s.tokens.alice } });
    let out = '';
    let err = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (err += d.toString()));
    const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
    await s.waitFor('prompt', () => err.includes('> '), 20_000);
    child.stdin.write('hello\n');
    await s.waitFor('streamed answer', () => out.includes('Hello!'), 20_000);
    child.stdin.write('write\n');
    await s.waitFor('upgrade question', () => /Allow the agent to write \(to fix the bug\)\? \[y\/N\]/.test(err), 20_000);
    child.stdin.write('y\n');
    // The turn goes on after the answer (the agent gets the upgrade's result) until it rests.
    await s.waitFor('turn after approval', () => /\[y\/N\] [\s\S]*mode: unrestricted[\s\S]*· idle/.test(err), 20_000);
    child.stdin.end();
    expect(await exited).toBe(0);
  }, 60_000);

  it("uses the embedded default's local token when BEDROCK_TOKEN is unset", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'bedrock-cli-'));
    writeFileSync(join(dir, 'token'), `${s.tokens.bob}\n`);
    const created = await bedrockBin(['new', '--cwd', '/tmp'], { BEDROCK_TOKEN: undefined, BEDROCK_DATA_DIR: dir });
    expect(created.code).toBe(0);
    // It is bob's: alice does not see it.
    expect((await bedrock(['show', created.stdout.trim()])).code).toBe(3);
    expect((await bedrock(['show', created.stdout.trim()], { BEDROCK_TOKEN: s.tokens.bob })).code).toBe(0);
  }, 60_000);
});
