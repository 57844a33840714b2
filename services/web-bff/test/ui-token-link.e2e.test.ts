/**
 * A link `/c/<id>?token=…` in headless Chromium against the real web-bff and conversation
 * service: signed out, the link signs in (the printed-link flow); signed in, a link with someone
 * else's token does not silently replace the kept token — the page asks, "Keep my sign-in" (and
 * Esc) keeps it, and only "Use the link's token" replaces it. Either way the token leaves the
 * address bar.
 */
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { chromium, type Browser, type Page } from 'playwright-core';
import { startSystem, type System } from './support/system.ts';

const HERE = dirname(fileURLToPath(import.meta.url));
const UI_DIST = resolve(HERE, '../ui/dist');
const CHROMIUM = '/usr/bin/chromium';

let s: System;
let browser: Browser;
let page: Page;

beforeAll(async () => {
  if (!existsSync(CHROMIUM))
    execFileSync('bash', [resolve(HERE, '../../../scripts/ensure-chromium.sh')], { stdio: 'inherit', timeout: 600_000 });
  execFileSync(process.execPath, [resolve(HERE, '../ui/build.mjs')], { stdio: 'pipe' });
  s = await startSystem({ label: 'ui_token_link', playWorkers: false, bff: { http: { uiDir: UI_DIST } } });
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox', '--disable-gpu', '--no-first-run'] });
  page = await browser.newPage({ viewport: { width: 1280, height: 820 } });
  page.setDefaultTimeout(15_000);
}, 120_000);

afterAll(async () => {
  await browser?.close();
  await s?.close();
});

const kept = () => page.evaluate("localStorage.getItem('bedrock.token')");

describe('a link with a token', () => {
  it('signs in when no token is kept, and asks before replacing a kept one', async () => {
    // Signed out: the printed link signs in.
    await page.goto(`${s.bff.httpUrl}/?token=${s.tokens.alice}`);
    await page.getByRole('heading', { name: 'New conversation' }).waitFor();
    expect(await kept()).toBe(s.tokens.alice);
    expect(new URL(page.url()).searchParams.has('token')).toBe(false);

    // Someone else's conversation link, with their token: the page asks, and keeps alice's meanwhile.
    const bobs = (await s.client(s.tokens.bob).createConversation({ cwd: '/tmp' })).conversation!.id;
    const link = `${s.bff.httpUrl}/c/${bobs}?token=${s.tokens.bob}`;
    await page.goto(link);
    const dialog = page.getByRole('dialog', { name: "Sign in with the link's token?" });
    await dialog.waitFor();
    expect(new URL(page.url()).searchParams.has('token')).toBe(false);
    expect(await kept()).toBe(s.tokens.alice);
    // The safe answer is the default (focused).
    expect(await page.evaluate('document.activeElement?.textContent')).toBe('Keep my sign-in');
    await dialog.getByRole('button', { name: 'Keep my sign-in' }).click();
    await dialog.waitFor({ state: 'hidden' });
    expect(await kept()).toBe(s.tokens.alice);

    // Esc keeps it too.
    await page.goto(link);
    await dialog.waitFor();
    await page.keyboard.press('Escape');
    await dialog.waitFor({ state: 'hidden' });
    expect(await kept()).toBe(s.tokens.alice);
    await page.reload();
    await page.getByRole('heading', { name: 'New conversation' }).waitFor();
    expect(await kept()).toBe(s.tokens.alice);

    // The same token as the kept one: nothing to ask.
    await page.goto(`${s.bff.httpUrl}/?token=${s.tokens.alice}`);
    await page.getByRole('heading', { name: 'New conversation' }).waitFor();
    expect(await page.getByRole('dialog').count()).toBe(0);

    // Only agreeing replaces it.
    await page.goto(link);
    await dialog.getByRole('button', { name: "Use the link's token" }).click();
    // Polled with evaluate: waitForFunction's polling compiles its predicate in the page, which the UI's CSP refuses.
    const stored = `localStorage.getItem('bedrock.token') === ${JSON.stringify(s.tokens.bob)}`;
    const storedBy = Date.now() + 10_000;
    while (!(await page.evaluate(stored))) {
      if (Date.now() > storedBy) throw new Error("the link's token was not stored within 10 s");
      await new Promise((r) => setTimeout(r, 50));
    }
    expect(new URL(page.url()).pathname).toBe(`/c/${bobs}`);
  }, 60_000);
});
