/**
 * Costs (docs/conversation.md, "Costs and budgets"): every applied response's usage becomes a
 * cost at the model registry's prices, on the conversation (GetConversation) and on its owner's
 * spend of the day, in the applier's one statement: a response applied again, or a duplicate
 * of it, never counts twice; the day is the service clock's UTC day.
 */
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createModelRegistry } from '@bedrock/contracts/models';
import { StopReason } from '@bedrock/contracts';
import { text, toolUse, usage } from './support/blocks.ts';
import { startHarness, type Harness } from './support/harness.ts';

let h: Harness;
let now = new Date('2026-03-31T23:59:00Z');
// test-model at Sonnet 4.5's prices: 1000 in, 2000 out, 10000 cache write, 100000 cache read
// = 3000 + 30000 + 37500 + 30000 µ$; a web search 10000 µ$.
const PRICES = { input: 3, output: 15, cacheWrite: 3.75, cacheRead: 0.3, webSearch: 0.01, webFetch: 0 };
const ONE = usage(1_000, 2_000, 100_000, 10_000, { searches: 1 });
const ONE_COST = 110_500;

beforeAll(async () => {
  h = await startHarness({
    label: 'costs',
    clock: () => now,
    config: { models: { registry: JSON.stringify({ 'test-model': { contextWindow: 200_000, maxOutputTokens: 64_000, prices: PRICES } }) } },
  });
});
afterAll(async () => {
  await h?.close();
});

async function spend(user: string): Promise<Record<string, number>> {
  const { rows } = await h.pool.query<{ day: string; cost_micros: string }>(
    `SELECT to_char(day, 'YYYY-MM-DD') AS day, cost_micros FROM user_daily_spend WHERE user_id = $1 ORDER BY day`,
    [user],
  );
  return Object.fromEntries(rows.map((r) => [r.day, Number(r.cost_micros)]));
}

describe('costs', () => {
  it('records each response once on the conversation and on the day of its owner, even when the event is applied again', async () => {
    const id = await h.createConversation('carol');
    await h.client('carol').sendMessage({ conversationId: id, text: 'go' });
    const first = await h.llmJob(id);
    await h.respond(first, { stopReason: StopReason.TOOL_USE, usage: ONE, content: [toolUse('t1', 'bash', { command: 'ls' })] });
    await h.processed(`r/${first.requestId}`);
    expect(Number((await h.get(id, 'carol')).conversation!.costMicros)).toBe(ONE_COST);
    expect(await spend('carol')).toEqual({ '2026-03-31': ONE_COST });

    // The same response again, as a redelivery under another job id and straight through the applier.
    await h.respond(first, { stopReason: StopReason.TOOL_USE, usage: ONE, content: [toolUse('t1', 'bash', { command: 'ls' })] }, 'again');
    await h.processed('again');
    const replay = await h.service.applier.apply(id, {
      type: 'llm_response',
      requestId: first.requestId,
      stopReason: 'tool_use',
      content: [{ type: 'tool_use', id: 't1', name: 'bash', input: { command: 'ls' } }],
      usage: {
        inputTokens: 1_000,
        outputTokens: 2_000,
        cacheCreationInputTokens: 10_000,
        cacheReadInputTokens: 100_000,
        webSearchRequests: 1,
      },
    } as never);
    expect(replay.kind).not.toBe('applied');
    expect(Number((await h.get(id, 'carol')).conversation!.costMicros)).toBe(ONE_COST);
    expect(await spend('carol')).toEqual({ '2026-03-31': ONE_COST });

    // The next response is dated by the clock: past midnight UTC it is the next day's (and month's).
    await h.complete(await h.toolJob(id, 't1'), { content: 'ok' });
    const second = await h.llmJob(id, 1);
    now = new Date('2026-04-01T00:00:30Z');
    await h.respond(second, { usage: usage(1_000, 0), content: [text('done')] });
    await h.processed(`r/${second.requestId}`);
    expect(Number((await h.get(id, 'carol')).conversation!.costMicros)).toBe(ONE_COST + 3_000);
    expect(await spend('carol')).toEqual({ '2026-03-31': ONE_COST, '2026-04-01': 3_000 });
  });

  it('adds up the conversations of a user on their day; an event that applies no response costs nothing', async () => {
    const a = await h.createConversation('dave');
    const b = await h.createConversation('dave');
    for (const id of [a, b]) {
      await h.client('dave').sendMessage({ conversationId: id, text: 'hi' });
      const job = await h.llmJob(id);
      await h.respond(job, { usage: usage(2_000, 100), content: [text('hello')] });
      await h.processed(`r/${job.requestId}`);
    }
    // 2000×3 + 100×15 = 7500 each.
    expect(Number((await h.get(a, 'dave')).conversation!.costMicros)).toBe(7_500);
    expect(Object.values(await spend('dave'))).toEqual([15_000]);
    // A user message alone costs nothing: the conversation's figure stays.
    await h.client('dave').sendMessage({ conversationId: a, text: 'again' });
    expect(Number((await h.get(a, 'dave')).conversation!.costMicros)).toBe(7_500);
  });
});

describe('token totals', () => {
  it("GetUsage sums the tokens of the user's responses for the day and the month, each response once", async () => {
    now = new Date('2026-05-20T10:00:00Z');
    const a = await h.createConversation('erin');
    const b = await h.createConversation('erin');
    await h.client('erin').sendMessage({ conversationId: a, text: 'go' });
    const first = await h.llmJob(a);
    await h.respond(first, { usage: ONE, content: [text('one')] });
    await h.processed(`r/${first.requestId}`);
    // Delivered again: counted once.
    await h.respond(first, { usage: ONE, content: [text('one')] }, 'erin-again');
    await h.processed('erin-again');
    await h.client('erin').sendMessage({ conversationId: b, text: 'go' });
    const second = await h.llmJob(b);
    await h.respond(second, { usage: usage(500, 40), content: [text('two')] });
    await h.processed(`r/${second.requestId}`);

    const today = (await h.client('erin').getUsage({})).usage!;
    const expected = { inputTokens: 1_500n, outputTokens: 2_040n, cacheCreationInputTokens: 10_000n, cacheReadInputTokens: 100_000n };
    expect(today.tokensToday).toMatchObject(expected);
    expect(today.tokensThisMonth).toMatchObject(expected);

    // The next day: today starts from nothing, the month keeps both days.
    now = new Date('2026-05-21T08:00:00Z');
    await h.client('erin').sendMessage({ conversationId: b, text: 'again' });
    const third = await h.llmJob(b, 1);
    await h.respond(third, { usage: usage(100, 10), content: [text('three')] });
    await h.processed(`r/${third.requestId}`);
    const next = (await h.client('erin').getUsage({})).usage!;
    expect(next.tokensToday).toMatchObject({
      inputTokens: 100n,
      outputTokens: 10n,
      cacheCreationInputTokens: 0n,
      cacheReadInputTokens: 0n,
    });
    expect(next.tokensThisMonth).toMatchObject({ inputTokens: 1_600n, outputTokens: 2_050n, cacheReadInputTokens: 100_000n });
  });
});

describe('the prices in the docs', () => {
  it('docs/conversation.md lists every default model with its prices', () => {
    const doc = readFileSync(new URL('../../../docs/conversation.md', import.meta.url), 'utf8');
    const table = /<!-- prices:begin[^>]*-->\n([\s\S]*?)\n<!-- prices:end -->/.exec(doc)?.[1] ?? '';
    const rows = createModelRegistry()
      .list()
      .map((m) => {
        const p = m.prices;
        return `| \`${m.id}\` | ${p.input} | ${p.output} | ${p.cacheWrite} | ${p.cacheWrite1h} | ${p.cacheRead} | ${p.webSearch} | ${p.webFetch} |`;
      });
    expect(table.split('\n').slice(2)).toEqual(rows);
  });
});
