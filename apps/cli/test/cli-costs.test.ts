/**
 * Costs and limits in the CLI against the real web-bff and conversation service (the test plays
 * the gateway, and moves the service's clock): `bedrock show` says what a conversation's
 * responses cost at the registry's prices; `bedrock usage` shows spend against budgets;
 * `bedrock admin limits` shows and sets a user's limits (admins only); a message over a budget
 * is refused with the limit and its reset (exit 3).
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { StopReason } from '@bedrock/contracts';
import { startSystem, type System } from '@bedrock/web-bff/test-support';
import { run } from '../src/run.ts';

let s: System;
let now = new Date('2026-09-14T15:00:00Z');
beforeAll(async () => {
  s = await startSystem({
    label: 'cli_costs',
    clock: () => now,
    bff: { auth: { admins: ['alice'] } },
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
type TurnUsage = { inputTokens: bigint; outputTokens: bigint; cacheReadInputTokens?: bigint; cacheCreationInputTokens?: bigint };

async function turn(id: string, text: string, usage: TurnUsage) {
  return turnAs('alice', id, text, usage);
}

async function turnAs(user: 'alice' | 'bob', id: string, text: string, usage: TurnUsage) {
  const before = s.llmJobs.filter((j) => j.conversationId === id).length;
  expect((await bedrock(['send', id, text], user)).code).toBe(0);
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
  await s.waitFor('idle', async () => (await bedrock(['show', id], user)).stdout.includes('state: idle'));
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

  it('show says how much of the input was read from the prompt cache', async () => {
    const id = (await bedrock(['new', '--cwd', '/tmp'])).stdout.trim();
    await turn(id, 'hello', { inputTokens: 50n, outputTokens: 10n, cacheReadInputTokens: 920n, cacheCreationInputTokens: 30n });
    // 920 / (50 + 920 + 30) of the input came from the cache.
    expect((await bedrock(['show', id])).stdout).toMatch(/^cost: \$\d+\.\d+ · cache 92% read$/m);
  });
});

describe('spend and limits in the CLI', () => {
  it('bedrock usage and bedrock admin limits: spend against the budgets, set by an admin; over budget a message is refused until midnight UTC', async () => {
    const fresh = await bedrock(['usage'], 'bob');
    expect(fresh.code).toBe(0);
    expect(fresh.stdout).toBe(
      [
        'user: bob',
        'today: $0.00 (no budget) (default); resets 2026-09-15T00:00:00Z',
        'this month: $0.00 (no budget) (default); resets 2026-10-01T00:00:00Z',
        'busy conversations: 0 of no limit (default)',
        'messages per minute: no limit (default)',
        'conversations: 0 of no limit (default)',
        '',
      ].join('\n'),
    );

    // Only an admin sets limits; flags are checked before anything is sent.
    expect((await bedrock(['admin', 'limits', 'bob', '--daily', '0.01'], 'bob')).code).toBe(3);
    expect((await bedrock(['admin', 'limits', 'bob', '--daily', 'lots'])).code).toBe(2);
    expect((await bedrock(['admin', 'limits', 'bob', '--reset', '--busy', '1'])).code).toBe(2);
    expect((await bedrock(['usage', '--daily', '1'])).code).toBe(2);
    const set = await bedrock(['admin', 'limits', 'bob', '--daily', '0.01', '--per-minute', '30', '--conversations', '50']);
    expect(set.code).toBe(0);
    expect(set.stdout).toContain('today: $0.00 of $0.01 (0%); resets 2026-09-15T00:00:00Z\n');
    expect(set.stdout).toContain('messages per minute: 30\n');
    expect(set.stdout).toContain('conversations: 0 of 50\n');
    expect(set.stdout).toContain('busy conversations: 0 of no limit (default)\n');

    // 4000 × $3 per million = $0.012: over the day's $0.01.
    const id = (await bedrock(['new', '--cwd', '/tmp'], 'bob')).stdout.trim();
    await turnAs('bob', id, 'hello', { inputTokens: 4_000n, outputTokens: 0n });
    expect((await bedrock(['usage'], 'bob')).stdout).toContain('today: $0.01 of $0.01 (120%); resets');
    const json = JSON.parse((await bedrock(['admin', 'limits', 'bob', '--json'])).stdout);
    expect(json).toMatchObject({ userId: 'bob', spentTodayMicros: '12000', limits: { dailyBudgetMicros: '10000', messagesPerMinute: 30 } });
    expect(json.limitsSet).toEqual(['daily_budget_micros', 'messages_per_minute', 'max_conversations']);

    const over = await bedrock(['send', id, 'more'], 'bob');
    expect(over.code).toBe(3);
    expect(over.stderr).toContain('daily budget reached: $0.01 of $0.01 spent today; it resets at 2026-09-15T00:00:00.000Z');

    now = new Date('2026-09-15T00:00:01Z');
    expect((await bedrock(['usage'], 'bob')).stdout).toContain('today: $0.00 of $0.01 (0%)');
    expect((await bedrock(['send', id, 'more'], 'bob')).code).toBe(0);
    expect((await bedrock(['admin', 'limits', 'bob', '--reset'])).stdout).toContain('today: $0.00 (no budget) (default)');
  });

  it('bedrock usage says how much of the input was read from the prompt cache, today and this month', async () => {
    now = new Date('2026-10-20T12:00:00Z'); // a month of its own
    const id = (await bedrock(['new', '--cwd', '/tmp'], 'alice')).stdout.trim();
    // 100 uncached + 100 written + 800 read: 80% of the input read from the cache.
    await turnAs('alice', id, 'hello', { inputTokens: 100n, outputTokens: 5n, cacheCreationInputTokens: 100n, cacheReadInputTokens: 800n });
    expect((await bedrock(['usage'], 'alice')).stdout).toContain('prompt cache: 80% read today, 80% this month\n');
    now = new Date('2026-10-21T12:00:00Z');
    expect((await bedrock(['usage'], 'alice')).stdout).toContain('prompt cache: not used today, 80% this month\n');
  });
});
