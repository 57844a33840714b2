/**
 * `bedrock rm ID [--yes]` against the real web-bff and conversation service (the test plays the
 * gateway and the runner): refused while a tool runs with the server's reason, deleted with --yes
 * after a cancel (its ids printed, then gone from ls and show), never without --yes when nothing
 * can ask, and another user's conversation is not found.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { StopReason } from '@bedrock/contracts';
import { startSystem, type System } from '@bedrock/web-bff/test-support';
import { run } from '../src/run.ts';

let s: System;
beforeAll(async () => {
  s = await startSystem({ label: 'cli_rm' });
});
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

describe('bedrock rm', () => {
  it('refuses while the agent works, deletes with --yes once it rests, and never deletes unasked', async () => {
    const id = (await bedrock(['new', '--cwd', '/tmp'])).stdout.trim();
    expect((await bedrock(['send', id, 'List the files'])).code).toBe(0);
    const job = await s.waitFor('the LLM request', () => s.llmJobs.find((j) => j.conversationId === id));
    await s.send(id, `r/${job.requestId}`, {
      case: 'llmResponse',
      value: {
        requestId: job.requestId,
        stopReason: StopReason.TOOL_USE,
        content: [{ block: { case: 'toolUse', value: { id: 't1', name: 'bash', inputJson: JSON.stringify({ command: 'sleep 60' }) } } }],
      },
    });
    await s.waitFor('the tool job', () => s.toolJobs.find((j) => j.conversationId === id));

    const busy = await bedrock(['rm', id, '--yes']);
    expect(busy.code).toBe(3);
    expect(busy.stderr).toMatch(/busy.*cancel it first/);
    expect((await bedrock(['show', id])).code).toBe(0);

    // Not on a terminal (the test's stdin is not one): nothing asks, so nothing is deleted.
    const unasked = await bedrock(['rm', id]);
    expect(unasked.code).toBe(2);
    expect(unasked.stderr).toContain('pass --yes');

    expect((await bedrock(['rm', id, '--yes'], 'bob')).code).toBe(3);

    expect((await bedrock(['cancel', id])).code).toBe(0);
    await s.waitFor('the cancel done', async () => {
      const r = await bedrock(['rm', id, '--yes']);
      if (r.code !== 0) return undefined;
      expect(r.stdout).toBe(`${id}\n`);
      return true;
    });
    expect((await bedrock(['ls'])).stdout).not.toContain(id);
    const gone = await bedrock(['show', id]);
    expect(gone.code).toBe(3);
    expect(gone.stderr).toMatch(/not found/i);
    expect((await bedrock(['rm', id, '--oops'])).code).toBe(2);
  });
});
