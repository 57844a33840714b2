/**
 * The new-conversation form's workspace picker in headless Chromium against web-bff and the
 * conversation service with host paths off and the test system's real tool-runner as the storage:
 * `default` first and made on first use, a workspace cloned from a `git daemon` on loopback with a
 * directory inside it, the workspace in the header, a failed clone and a refused host directory.
 * Needs root and git (docs/testing.md).
 */
import { execFileSync } from 'node:child_process';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { chromium, type Browser, type Page } from 'playwright-core';
import { startGitDaemon, startSystem, type GitDaemon, type System } from './support/system.ts';

const HERE = dirname(fileURLToPath(import.meta.url));
const UI_DIST = resolve(HERE, '../ui/dist');

let git: GitDaemon;
let REPO: string;
let s: System;
let browser: Browser;
let page: Page;

beforeAll(async () => {
  execFileSync(process.execPath, [resolve(HERE, '../ui/build.mjs')], { stdio: 'pipe' });
  git = await startGitDaemon({ 'acme/site.git': { 'index.html': '<h1>site</h1>\n' } });
  REPO = git.url('acme/site.git');
  s = await startSystem({ label: 'ui_ws', workspaceStorage: true, bff: { http: { uiDir: UI_DIST } } });
  browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args: ['--no-sandbox', '--disable-gpu', '--no-first-run'] });
  page = await browser.newPage({ viewport: { width: 1280, height: 820 } });
  page.setDefaultTimeout(20_000);
  await page.goto(`${s.bff.httpUrl}/?token=${s.tokens.alice}`);
}, 120_000);

afterAll(async () => {
  await browser?.close();
  await s?.close();
  await git?.close();
});

const options = () => page.locator('#new-workspace option').allTextContents();

async function start(): Promise<string> {
  const before = page.url();
  await page.getByRole('button', { name: 'Start' }).click();
  await page
    .waitForURL((u) => u.href !== before && /\/c\/[^/]+$/.test(u.pathname))
    .catch(async (err) => {
      throw new Error(`${String(err)}; form says: ${await page.locator('.new-conversation').textContent()}`);
    });
  return decodeURIComponent(new URL(page.url()).pathname.split('/').pop()!);
}

describe('the workspace picker', () => {
  it('starts in the default workspace, then in a new one cloned from git, at a directory inside it', async () => {
    await page.locator('#new-workspace').waitFor();
    expect(await options()).toEqual(['default', 'New workspace…']);
    await expect(page.locator('#new-workspace').inputValue()).resolves.toBe('default');

    await start();
    await expect(page.getByTestId('workspace-name').textContent()).resolves.toBe('default');

    await page.locator('#new-workspace').selectOption({ label: 'New workspace…' });
    await page.getByLabel('New workspace name').fill('site');
    await page.getByLabel('Clone from git (optional)').fill(REPO);
    await page.getByLabel('Directory in the workspace (optional)').fill('pages');
    const id = await start();
    await expect(page.getByTestId('workspace-name').textContent()).resolves.toBe('site');
    const header = page.locator('code[title="Working directory"]');
    await expect(header.textContent()).resolves.toMatch(new RegExp(`^${s.storage!.root}/ws-[0-9a-z]{26}/pages$`));
    // The new workspace is now a choice of its own, and the one chosen.
    expect(await options()).toEqual(['default', 'site', 'New workspace…']);
    await expect(page.locator('#new-workspace').inputValue()).resolves.toBe('site');
    const c = (await s.client(s.tokens.alice).getConversation({ conversationId: id })).conversation!;
    expect(c.workspaceName).toBe('site');
  });

  it('says why a workspace could not be made, and why a host directory is refused', async () => {
    await page.locator('#new-workspace').selectOption({ label: 'New workspace…' });
    await page.getByLabel('New workspace name').fill('broken');
    await page.getByLabel('Clone from git (optional)').fill(git.url('missing.git'));
    await page.getByRole('button', { name: 'Start' }).click();
    await expect(page.getByRole('alert').textContent()).resolves.toMatch(/workspace broken could not be made: git clone .* failed/);

    await page.locator('#new-workspace').selectOption({ label: 'default' });
    await page.getByLabel('Host directory (single-user installs)').fill('/tmp');
    await page.getByRole('button', { name: 'Start' }).click();
    await page
      .getByRole('alert')
      .filter({ hasText: /host paths are off on this deployment/ })
      .waitFor();
    await page.getByLabel('Host directory (single-user installs)').fill('');
  });
});
