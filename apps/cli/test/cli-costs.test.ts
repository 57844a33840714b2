/**
 * Costs in the CLI against the real web-bff and conversation service (the test plays the
 * gateway): `bedrock show` says what a conversation's responses cost at the registry's prices,
 * and --json carries the figure in micro-dollars.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { StopReason } from '@bedrock/contracts';
import { startSystem, type System } from '@bedrock/web-bff/test-support';
import { run } from '../src/run.ts';

let s: System;
beforeAll(async () => {
  s = await startSystem({
    label: 'cli_costs',
    conversation: {
      models: {
        registry: JSON.stringify({ 'test-model': { contextWindow: 200_000, maxOutputTokens: 64_000, prices: { input: 3, output: 15 } } }),
      },
    },
  });
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

/** Sends `text` and answers it with `usage`, waiting until the conversation rests. */
async function turn(id: string, text: string, usage: { inputTokens: bigint; outputTokens: bigint }) {
  const before = s.llmJobs.filter((j) => j.conversationId === id).length;
  expect((await bedrock(['send', id, text])).code).toBe(0);
  const job = await s.waitFor('the LLM request', () => s.llmJobs.filter((j) => j.conversationId === id)[before]);
  await s.send(id, `r/${job.requestId}`, {
    case: 'llmResponse',
    value: {
      requestId: job.requestId,
      stopReason: StopReason.END_TURN,
      usage,
      content: [{ block: { case: 'text', value: { text: 'ok' } } }],
    },
  });
  await s.waitFor('idle', async () => (await bedrock(['show', id])).stdout.includes('state: idle'));
}

describe('costs in the CLI', () => {
  it('show says what the conversation cost so far', async () => {
    const id = (await bedrock(['new', '--cwd', '/tmp'])).stdout.trim();
    expect((await bedrock(['show', id])).stdout).toContain('cost: $0.00\n');
    // 1000 × $3 + 200 × $15 per million = 6000 µ$.
    await turn(id, 'hello', { inputTokens: 1_000n, outputTokens: 200n });
    expect((await bedrock(['show', id])).stdout).toContain('cost: $0.0060\n');
    // + 100,000 × $3 + 10,000 × $15 per million = 450,000 µ$.
    await turn(id, 'more', { inputTokens: 100_000n, outputTokens: 10_000n });
    expect((await bedrock(['show', id])).stdout).toContain('cost: $0.45\n');
    const doc = JSON.parse((await bedrock(['show', id, '--json'])).stdout);
    expect(doc.conversation.costMicros).toBe('456000');
  });
});
