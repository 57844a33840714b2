/**
 * `bedrock diff` and `bedrock rewind` against the real web-bff and conversation service and a
 * real tool-runner serving workspaces on a loop-mounted btrfs image (docs/cli.md,
 * "Checkpoints"). The test plays the model and the tool work (a file written as the
 * workspace's owner), so the turn's checkpoint is real. Needs root and btrfs-progs.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { StateKind, StopReason } from '@bedrock/contracts';
import { startSystem, type System } from '@bedrock/web-bff/test-support';
import { run } from '../src/run.ts';

const usable = (() => {
  try {
    execFileSync('btrfs', ['--version'], { stdio: 'ignore' });
    return process.getuid?.() === 0;
  } catch {
    return false;
  }
})();
if (!usable) console.warn('cli-checkpoints.test.ts: skipped: needs root and btrfs-progs');
const describeBtrfs = usable ? describe : describe.skip;

let s: System;
beforeAll(async () => {
  if (usable) s = await startSystem({ label: 'cli_ckpt', workspaceStorage: true, workspaceImage: true });
}, 120_000);
afterAll(async () => {
  await s?.close();
}, 60_000);

async function bedrock(args: string[]) {
  let stdout = '';
  let stderr = '';
  const code = await run(
    args,
    { BEDROCK_URL: s.bff.httpUrl, BEDROCK_TOKEN: s.tokens.alice, HOME: '/nonexistent', BEDROCK_RETRY_FOR: '0' },
    { out: (t) => void (stdout += t), err: (t) => void (stderr += t) },
  );
  return { code, stdout, stderr };
}

/** One turn whose one bash tool runs `script` in the workspace as its owner (the test plays the runner). */
async function turn(id: string, cwd: string, script: string): Promise<void> {
  const client = s.client(s.tokens.alice);
  const before = s.llmJobs.filter((j) => j.conversationId === id).length;
  await client.sendMessage({ conversationId: id, text: script });
  const first = await s.waitFor('the LLM request', () => s.llmJobs.filter((j) => j.conversationId === id)[before]);
  const toolUseId = `t${before}`;
  await s.send(id, `llm-result/${first.requestId}`, {
    case: 'llmResponse',
    value: {
      requestId: first.requestId,
      stopReason: StopReason.TOOL_USE,
      content: [{ block: { case: 'toolUse', value: { id: toolUseId, name: 'bash', inputJson: JSON.stringify({ command: script }) } } }],
    },
  });
  await s.waitFor('the tool job', () => s.toolJobs.find((j) => j.conversationId === id && j.toolUseId === toolUseId));
  const uid = execFileSync('stat', ['-c', '%u', cwd]).toString().trim();
  execFileSync('setpriv', [`--reuid=${uid}`, `--regid=${uid}`, '--clear-groups', 'sh', '-c', script], { cwd });
  await s.send(id, `tool-result/${id}/${toolUseId}`, { case: 'toolComplete', value: { toolUseId, content: 'done', exitCode: 0 } });
  const second = await s.waitFor('the next LLM request', () => s.llmJobs.filter((j) => j.conversationId === id)[before + 1]);
  await s.send(id, `llm-result/${second.requestId}`, {
    case: 'llmResponse',
    value: { requestId: second.requestId, stopReason: StopReason.END_TURN, content: [{ block: { case: 'text', value: { text: 'ok' } } }] },
  });
  await s.waitFor('idle', async () => (await client.getConversation({ conversationId: id })).conversation!.state?.kind === StateKind.IDLE);
}

describeBtrfs('bedrock diff and rewind', () => {
  it('shows what a turn changed and puts files and history back', async () => {
    const created = (await s.client(s.tokens.alice).createConversation({})).conversation!;
    const { id, cwd } = created;
    await turn(id, cwd, 'printf "one\\n" > notes.txt');
    const end1 = (await s.client(s.tokens.alice).getConversation({ conversationId: id })).messages.at(-1)!.sequence;
    await turn(id, cwd, 'printf "two\\n" >> notes.txt; printf x > extra.bin');

    const diff = await bedrock(['diff', id, '--at', String(end1)]);
    expect(diff).toMatchObject({ code: 0, stderr: '' });
    expect(diff.stdout).toContain('modified  notes.txt');
    expect(diff.stdout).toContain('+two');
    expect(diff.stdout).toContain('added     extra.bin');
    // Since the latest checkpoint (the second turn's): the same changes.
    expect((await bedrock(['diff', id])).stdout).toContain('+two');

    const files = await bedrock(['rewind', id, '--at', String(end1), '--files']);
    expect(files).toMatchObject({ code: 0, stderr: '' });
    expect(files.stdout).toBe(`rewound ${id} to message ${end1}: files as before message ${Number(end1) + 1}\n`);
    expect(readFileSync(join(cwd, 'notes.txt'), 'utf8')).toBe('one\n');
    expect(existsSync(join(cwd, 'extra.bin'))).toBe(false);

    const chat = await bedrock(['rewind', id, '--at', String(end1), '--chat', '--json']);
    expect(chat.code).toBe(0);
    expect(JSON.parse(chat.stdout)).toEqual({ messagesRemoved: 4 });
    expect((await s.client(s.tokens.alice).getConversation({ conversationId: id })).messages.at(-1)!.sequence).toBe(end1);

    // Inside a turn whose tool ran later: refused with the place that works.
    const inside = await bedrock(['rewind', id, '--at', '2', '--files']);
    expect(inside.code).not.toBe(0);
    expect(inside.stderr).toMatch(/rewind to message 0/);
  }, 120_000);

  it('refuses bad usage before calling the server', async () => {
    expect((await bedrock(['rewind', 'x'])).stderr).toMatch(/rewind needs --at SEQ/);
    expect((await bedrock(['rewind', 'x', '--at', '1', '--files', '--chat'])).stderr).toMatch(/choose one of --files and --chat/);
    expect((await bedrock(['ls', '--chat'])).stderr).toMatch(/--chat applies to rewind/);
    expect((await bedrock(['diff', 'x', '--at', 'two'])).stderr).toMatch(/--at two: give the sequence number/);
  });
});
