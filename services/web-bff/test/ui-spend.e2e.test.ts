/**
 * The web UI's spend line in a real browser against the embedded product (the offline demo model
 * answers, priced here through BEDROCK_MODELS at $3/$15 per million tokens):
 * under the conversation list, today's and this month's spend against the budget
 * (BEDROCK_DAILY_BUDGET), from $0.00 to what a turn cost once the list loads again, and the share
 * of this month's input read from the prompt cache.
 */
import { execFileSync } from 'node:child_process';
import { chownSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createTestDatabase } from '@bedrock/testkit/database';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { chromium, type Browser, type Page } from 'playwright-core';
import { startEmbedded, type RunningEmbedded } from '@bedrock/embedded';

const HERE = dirname(fileURLToPath(import.meta.url));
const UI_DIST = resolve(HERE, '../ui/dist');

let system: RunningEmbedded;
let browser: Browser;
let page: Page;
let dataDir: string;
let workDir: string;
let database: { url: string; drop(): Promise<void> } | undefined;

beforeAll(async () => {
  execFileSync(process.execPath, [resolve(HERE, '../ui/build.mjs')], { stdio: 'pipe' });
  dataDir = mkdtempSync(join(tmpdir(), 'bedrock-ui-spend-data-'));
  workDir = mkdtempSync(join(tmpdir(), 'bedrock-ui-spend-work-'));
  if (process.getuid?.() === 0) chownSync(workDir, 65534, 65534);
  database = await createTestDatabase('ui_spend').catch(() => undefined);
  system = await startEmbedded({
    env: {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      BEDROCK_DATA_DIR: dataDir,
      BEDROCK_PORT: '0',
      BEDROCK_GRPC_PORT: '0',
      BEDROCK_UI_DIR: UI_DIST,
      BEDROCK_DAILY_BUDGET: '5',
      // Without an API key conversations use the offline demo model, free unless priced.
      BEDROCK_MODELS: JSON.stringify({ 'bedrock-offline': { prices: { input: 3, output: 15 } } }),
      LOG_LEVEL: 'error',
      ...(database ? { DATABASE_URL: database.url } : {}),
    },
  });
  browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args: ['--no-sandbox', '--disable-gpu', '--no-first-run'] });
  page = await browser.newPage({ viewport: { width: 1280, height: 820 } });
  page.setDefaultTimeout(20_000);
  await page.goto(`${system.httpUrl}/?token=${system.token}`);
}, 240_000);

afterAll(async () => {
  await browser?.close();
  await system?.stop();
  await database?.drop();
  for (const dir of [dataDir, workDir]) if (dir) rmSync(dir, { recursive: true, force: true });
});

describe('the spend line', () => {
  it('shows spend against the daily budget under the conversation list, and what a turn cost after it', async () => {
    const line = page.locator('nav.sidebar .spend-line');
    await line.filter({ hasText: 'Spent today $0.00 of $5.00 · this month $0.00' }).waitFor();

    await page.getByLabel('Host directory (single-user installs)').fill(workDir);
    await page.getByRole('button', { name: 'Start' }).click();
    await page.waitForURL((u) => /\/c\/[^/]+$/.test(u.pathname));
    await page.getByLabel('Message', { exact: true }).fill('hello');
    await page.keyboard.press('Enter');
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
    await page.getByTestId('state-line').filter({ hasText: /Ready/ }).waitFor();
    await page.reload();
    const after = await line.filter({ hasText: /cache [1-9]\d?% read this month$/ }).innerText();
    expect(after).toMatch(/^Spent today \$0\.0\d{3} of \$5\.00 · this month \$0\.0\d{3} · cache [1-9]\d?% read this month$/);
  }, 120_000);
});
