/**
 * The web UI's MCP servers in headless Chromium (playwright-core) against the embedded product (offline
 * model, real sandbox, real servers from npm): the panel lists, refuses, adds and removes servers, a
 * conversation's settings turn one off and on, and the transcript shows an MCP call like a built-in tool.
 * Here, not in services/web-bff/test: the UI needs the whole product behind it (a tool-runner hosting
 * the servers, the offline model calling them); web-bff's test system plays the workers.
 */
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { ConnectError } from '@connectrpc/connect';
import { chromium, type Browser, type Page } from 'playwright-core';
import { startOAuthMcpServer, type OAuthMcpServer } from '@bedrock/testkit/oauth-mcp-server';
import { SERVERS, startMcpEmbedded, type McpEmbedded } from './support/mcp-embedded.ts';

const UI_BUILD = new URL('../../../services/web-bff/ui/build.mjs', import.meta.url).pathname;

let e: McpEmbedded;
let browser: Browser;
let page: Page;
let oauth: OAuthMcpServer;

beforeAll(async () => {
  execFileSync(process.execPath, [UI_BUILD], { stdio: 'pipe' });
  e = await startMcpEmbedded({
    label: 'ui-mcp',
    servers: () => ({ everything: { command: 'node', args: [SERVERS.everything] } }),
  });
  browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args: ['--no-sandbox', '--disable-gpu', '--no-first-run'] });
  page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  page.setDefaultTimeout(30_000);
  await page.goto(`${e.bedrock.httpUrl}/?token=${e.bedrock.token}`);
}, 180_000);

afterAll(async () => {
  await oauth?.close();
  await browser?.close();
  await e?.close();
});

/** Polls `probe` (in Node: the page's CSP refuses waitForFunction's string predicates) until it holds. */
async function until(what: string, probe: () => Promise<boolean>, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await probe())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(100);
  }
}

const panel = () => page.getByTestId('mcp-servers');
const row = (name: string) => panel().locator(`tr[data-server="${name}"]`);

async function openPanel(): Promise<void> {
  await page.getByRole('button', { name: 'MCP servers' }).click();
  await panel().waitFor();
}

async function closePanel(): Promise<void> {
  await page.locator('.mcp-dialog').getByRole('button', { name: 'Close' }).click();
  await panel().waitFor({ state: 'detached' });
}

describe('MCP servers in the web UI', () => {
  it("lists the operator's server, refuses a bad one as the API words it, adds the user's own", async () => {
    await openPanel();
    await row('everything').waitFor();
    expect(await row('everything').locator('td').allTextContents()).toEqual([
      'everything',
      'operator',
      `node ${SERVERS.everything}`,
      '—',
      '',
    ]);

    // A bad name: the alert is the service's message, as the API gives it.
    const refusal = await e.mcp.addMcpServer({ name: 'Bad_Name', command: 'node' }).then(
      () => '',
      (err: unknown) => ConnectError.from(err).rawMessage,
    );
    expect(refusal).not.toBe('');
    await page.getByLabel('Name', { exact: true }).fill('Bad_Name');
    await page.getByLabel('Command or URL', { exact: true }).fill('node');
    await page.getByRole('button', { name: 'Add server' }).click();
    await expect(panel().getByRole('alert').textContent()).resolves.toBe(refusal);

    await page.getByLabel('Name', { exact: true }).fill('fs');
    await page.getByLabel('Arguments (one a line)').fill(`${SERVERS.filesystem}\n${e.workspace}`);
    await page.getByRole('button', { name: 'Add server' }).click();
    await row('fs').waitFor();
    expect(await row('fs').locator('td').allTextContents()).toEqual([
      'fs',
      'yours',
      `node ${SERVERS.filesystem} ${e.workspace}`,
      '—',
      'Remove',
    ]);
    // Only the user's own can be removed.
    await expect(row('everything').getByRole('button').count()).resolves.toBe(0);
    expect((await e.mcp.listMcpServers({})).servers.map((s) => [s.name, s.source, s.args])).toEqual([
      ['everything', 'operator', [SERVERS.everything]],
      ['fs', 'user', [SERVERS.filesystem, e.workspace]],
    ]);
    await closePanel();
  }, 120_000);

  it('shows an MCP call in the transcript with its server, arguments and result', async () => {
    const id = (await e.conversations.createConversation({ cwd: e.workspace })).conversation!.id;
    await page.goto(`${e.bedrock.httpUrl}/c/${id}`);
    const note = join(e.workspace, 'note.txt');
    await page.locator('#message-input').fill(`$mcp fs read_text_file {"path": "${note}"}`);
    await page.locator('#message-input').press('Enter');
    const card = page.locator('article.tool[data-tool="mcp__fs__read_text_file"]');
    await card.locator('.badge-ok').waitFor({ timeout: 90_000 });
    await expect(card.locator('.tool-name').textContent()).resolves.toBe('fs › read_text_file');
    await expect(card.locator('.tool-summary').textContent()).resolves.toBe(`path: ${JSON.stringify(note)}`);
    await expect(card.locator('.tool-input pre').textContent()).resolves.toBe(JSON.stringify({ path: note }, null, 2));
    await expect(card.locator('.tool-result .tool-output').textContent()).resolves.toBe('a note in the workspace\n');
  }, 180_000);

  it('turns a server off and on for the open conversation from its settings, and the panel says so', async () => {
    const id = decodeURIComponent(new URL(page.url()).pathname.split('/').pop()!);
    await page.locator('details.settings > summary').first().click();
    const toggles = page.getByTestId('mcp-toggles');
    await toggles.waitFor();
    expect(await toggles.locator('label').allTextContents()).toEqual(['everything (operator)', 'fs (yours)']);
    const disabled = async (name: string) =>
      (await e.mcp.listMcpServers({ conversationId: id })).servers.find((s) => s.name === name)?.disabled;

    await page.getByLabel('everything (operator)').uncheck();
    await until('everything off', async () => (await disabled('everything')) === true);
    expect(await disabled('fs')).toBe(false);
    await page.keyboard.press('Escape');

    await openPanel();
    await expect(row('everything').locator('td').nth(4).textContent()).resolves.toBe('off');
    await expect(row('fs').locator('td').nth(4).textContent()).resolves.toBe('on');
    await closePanel();

    await page.locator('details.settings > summary').first().click();
    await expect(page.getByLabel('everything (operator)').isChecked()).resolves.toBe(false);
    await page.getByLabel('everything (operator)').check();
    await until('everything on', async () => (await disabled('everything')) === false);
    await page.keyboard.press('Escape');
  }, 120_000);

  it("removes the user's server", async () => {
    await openPanel();
    await row('fs').getByRole('button', { name: 'Remove fs' }).click();
    await row('fs').waitFor({ state: 'detached' });
    expect((await e.mcp.listMcpServers({})).servers.map((s) => s.name)).toEqual(['everything']);
    await closePanel();
  }, 60_000);

  it('logs in to a remote server through the authorization server in a new tab, then logs out', async () => {
    // An OAuth-protected Streamable HTTP server of the test's own (authorization + resource server).
    oauth = await startOAuthMcpServer();
    await openPanel();
    await page.getByLabel('Name', { exact: true }).fill('tracker');
    await page.getByLabel('Command or URL', { exact: true }).fill(oauth.url);
    await page.getByRole('button', { name: 'Add server' }).click();
    await row('tracker').waitFor();
    expect(await row('tracker').locator('td').nth(2).textContent()).toBe(`${oauth.url} · not logged in`);

    // Log in: a new tab goes to the authorization server (which approves the test user) and back
    // to web-bff's callback, which exchanges the code for this browser's login.
    const [tab] = await Promise.all([
      page.context().waitForEvent('page'),
      row('tracker').getByRole('button', { name: 'Log in to tracker' }).click(),
    ]);
    await until('the callback page', async () => (await tab.title().catch(() => '')) === 'Logged in to tracker');
    await tab.close();
    expect(oauth.stats.logins).toBe(1);
    await page.bringToFront();
    await page.evaluate('window.dispatchEvent(new Event("focus"))');
    await until('logged in', async () => ((await row('tracker').locator('td').nth(2).textContent()) ?? '').endsWith('· logged in'));
    expect((await e.mcp.listMcpServers({})).servers.find((s) => s.name === 'tracker')?.authStatus).toBe('logged_in');

    await row('tracker').getByRole('button', { name: 'Log out of tracker' }).click();
    await until('logged out', async () => ((await row('tracker').locator('td').nth(2).textContent()) ?? '').endsWith('· not logged in'));
    expect(oauth.stats.revocations).toBeGreaterThan(0);
    await row('tracker').getByRole('button', { name: 'Remove tracker' }).click();
    await row('tracker').waitFor({ state: 'detached' });
    await closePanel();
  }, 120_000);
});
