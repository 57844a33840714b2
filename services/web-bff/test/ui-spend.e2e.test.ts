/**
 * The web UI's spend line in a real browser against the embedded product (the offline demo model
 * answers, priced here through BEDROCK_MODELS at $3/$15 per million tokens):
 * under the conversation list, today's and this month's spend against the budget
 * (BEDROCK_DAILY_BUDGET), from $0.00 to what a turn cost once the list loads again, and the share
 * of this month's input read from the prompt cache.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { page, startUiSystem, stopUiSystem, workDir } from './support/ui-system.ts';

beforeAll(
  () =>
    startUiSystem({
      pageTimeoutMs: 20_000,
      env: {
        BEDROCK_DAILY_BUDGET: '5',
        // Without an API key conversations use the offline demo model, free unless priced.
        ANTHROPIC_API_KEY: undefined,
        ANTHROPIC_BASE_URL: undefined,
        BEDROCK_DEFAULT_MODEL: undefined,
        BEDROCK_MODELS: JSON.stringify({ 'bedrock-offline': { prices: { input: 3, output: 15 } } }),
      },
    }),
  240_000,
);
afterAll(stopUiSystem);

describe('the spend line', () => {
  it('shows spend against the daily budget under the conversation list, and what a turn cost after it', async () => {
    const line = page.locator('nav.sidebar .spend-line');
    await line.filter({ hasText: 'Spent today $0.00 of $5.00 · this month $0.00' }).waitFor();

    await page.getByLabel('Host directory (single-user installs)').fill(workDir);
    await page.getByRole('button', { name: 'Start' }).click();
    await page.waitForURL((u) => /\/c\/[^/]+$/.test(u.pathname));
    await page.getByLabel('Message', { exact: true }).fill('hello');
    await page.keyboard.press('Enter');
    // The answer first: a new conversation reads "Ready" before the message has even been sent,
    // and a reload then could cut the send off.
    const answers = page.locator('li.msg-agent:not(.msg-streaming)');
    await answers.nth(0).waitFor();
    await page.getByTestId('state-line').filter({ hasText: /Ready/ }).waitFor();

    // The next load of the list (a reload here) shows the turn's cost: a fraction of a cent.
    await page.reload();
    const text = await line.filter({ hasText: /Spent today \$0\.0\d{3} of \$5\.00/ }).innerText();
    expect(text).not.toContain('$0.0000 of');
    // The first turn wrote the prompt cache and read none of it.
    expect(text).toMatch(/· this month \$0\.0\d{3} · cache 0% read this month$/);

    // The next turn reads the prefix the first one wrote: the share of this month's input read from the cache grows.
    await page.getByLabel('Message', { exact: true }).fill('and again');
    await page.keyboard.press('Enter');
    await answers.nth(1).waitFor();
    await page.getByTestId('state-line').filter({ hasText: /Ready/ }).waitFor();
    await page.reload();
    const after = await line.filter({ hasText: /cache [1-9]\d?% read this month$/ }).innerText();
    expect(after).toMatch(/^Spent today \$0\.0\d{3} of \$5\.00 · this month \$0\.0\d{3} · cache [1-9]\d?% read this month$/);
  }, 120_000);
});
