/**
 * `bedrock fork ID [--at SEQ]` against the real web-bff and conversation service (the test plays
 * the gateway): prints the new conversation's id, `show` names its source, a place inside a
 * tool call is refused with the server's reason, a bad --at is a usage error, and another
 * user's conversation is not found.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { StopReason, type ContentBlockSchema } from '@bedrock/contracts';
import type { MessageInitShape } from '@bufbuild/protobuf';
import { startSystem, type System } from '@bedrock/web-bff/test-support';
import { run } from '../src/run.ts';

let s: System;
beforeAll(async () => {
  s = await startSystem({ label: 'cli_fork' });
});
afterAll(async () => {
  await s?.close();
});

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

async function bedrock(args: string[], user: 'alice' | 'bob' = 'alice'): Promise<Run> {
  let stdout = '';
  let stderr = '';
  const code = await run(
    args,
    { BEDROCK_URL: s.bff.httpUrl, BEDROCK_TOKEN: s.tokens[user], HOME: '/nonexistent', BEDROCK_RETRY_FOR: '0' },
    { out: (t) => void (stdout += t), err: (t) => void (stderr += t) },
  );
  return { code, stdout, stderr };
}

/** Answers the conversation's next LLM request with `content`. */
async function answer(
  id: string,
  index: number,
  stopReason: StopReason,
  content: MessageInitShape<typeof ContentBlockSchema>[],
): Promise<void> {
  const job = await s.waitFor(`LLM request ${index} of ${id}`, () => s.llmJobs.filter((j) => j.conversationId === id)[index]);
  await s.send(id, `r/${job.requestId}`, { case: 'llmResponse', value: { requestId: job.requestId, stopReason, content } });
}

describe('bedrock fork', () => {
  it('forks the whole history or up to --at, prints the id; show names the source; bad places and foreign ids are refused', async () => {
    const created = await bedrock(['new', '--cwd', '/tmp']);
    const id = created.stdout.trim();
    expect((await bedrock(['send', id, 'Count the files'])).code).toBe(0);
    // Message 2 asks for a tool whose result is message 3.
    await answer(id, 0, StopReason.TOOL_USE, [
      { block: { case: 'toolUse', value: { id: 't1', name: 'bash', inputJson: JSON.stringify({ command: 'ls | wc -l' }) } } },
    ]);
    const tool = await s.waitFor('the tool job', () => s.toolJobs.find((j) => j.conversationId === id));
    await s.send(id, `t/${id}/t1`, { case: 'toolComplete', value: { toolUseId: tool.toolUseId, content: '3' } });
    await answer(id, 1, StopReason.END_TURN, [{ block: { case: 'text', value: { text: 'Three files.' } } }]);
    await s.waitFor('the turn at rest', async () => (await bedrock(['show', id])).stdout.includes('Three files.'));

    const whole = await bedrock(['fork', id]);
    expect(whole).toMatchObject({ code: 0, stderr: '' });
    const wholeId = whole.stdout.trim();
    expect(wholeId).toMatch(/^[0-9a-f-]{36}$/);
    const shown = await bedrock(['show', wholeId]);
    expect(shown.stdout.split('\n')[0]).toBe('Fork of Count the files');
    expect(shown.stdout).toContain(`forked from ${id} at message 4 (bedrock show ${id})`);
    expect(shown.stdout).toContain('Three files.');

    const early = await bedrock(['fork', id, '--at', '1', '--json']);
    expect(early.code).toBe(0);
    const fork = JSON.parse(early.stdout).conversation;
    expect(fork).toMatchObject({ forkedFrom: { conversationId: id, messageSequence: '1' }, cwd: '/tmp', mode: 'MODE_RESTRICTED' });
    expect((await bedrock(['show', fork.id])).stdout).not.toContain('Three files.');
    expect((await bedrock(['ls'])).stdout).toContain(fork.id);

    const inside = await bedrock(['fork', id, '--at', '2']);
    expect(inside.code).toBe(3);
    expect(inside.stderr).toContain('fork at message 1 (before the call) or at message 3 (after its results)');
    expect(await bedrock(['fork', id, '--at', 'two'])).toMatchObject({ code: 2, stderr: expect.stringContaining('--at two') });
    expect(await bedrock(['show', id, '--at', '1'])).toMatchObject({ code: 2, stderr: expect.stringContaining('--at applies to fork') });
    expect(await bedrock(['fork'])).toMatchObject({ code: 2 });
    const foreign = await bedrock(['fork', id], 'bob');
    expect(foreign.code).not.toBe(0);
    expect(foreign.stderr).toContain(`conversation ${id} not found`);
  });
});
