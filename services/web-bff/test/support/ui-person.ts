/**
 * What the "as a person sees it" suites (ui-screens, ui-navigation .e2e.test.ts) share: desktop and phone sizes, a page per
 * browser context signed in from the link (`pages`, closed by the suite), starting a conversation and sending in it, the
 * layout and queue probes, and calls to web-bff's public API as another client (the CLI) would make them.
 */
import { expect } from '@jest/globals';
import type { Page } from 'playwright-core';
import { api, browser, cspViolations, system, workDir } from './ui-system.ts';

export type Scheme = 'light' | 'dark';
export const DESKTOP = { width: 1280, height: 800 };
export const PHONE = { width: 390, height: 844 };

export const pages: Page[] = [];

export async function open(viewport: { width: number; height: number }, colorScheme: Scheme, path = '/'): Promise<Page> {
  const context = await browser.newContext({ viewport, colorScheme });
  await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: system.httpUrl });
  const p = await context.newPage();
  p.setDefaultTimeout(15_000);
  p.on('console', (message) => {
    if (/Content Security Policy|Refused to/i.test(message.text())) cspViolations.push(message.text());
  });
  pages.push(p);
  await p.goto(`${system.httpUrl}${path}${path.includes('?') ? '&' : '?'}token=${system.token}`);
  return p;
}

const phoneLayout = (p: Page) => p.evaluate<boolean>('window.innerWidth <= 760');

/** Starts a conversation from the form (on a phone, from the drawer, which closes after). */
export async function start(p: Page): Promise<void> {
  const before = p.url();
  if (await phoneLayout(p)) {
    await p.getByRole('button', { name: 'Conversations' }).click();
    await p.locator('nav.sidebar.open').waitFor();
  }
  await p.getByLabel('Host directory (single-user installs)').fill(workDir);
  await p.getByRole('button', { name: 'Start' }).click();
  await p.waitForURL((u) => u.href !== before && /\/c\/[^/]+$/.test(u.pathname));
  await p.getByTestId('state-line').filter({ hasText: /Ready/ }).waitFor();
  await expect(p.locator('nav.sidebar.open').count()).resolves.toBe(0);
}

export async function say(p: Page, text: string): Promise<void> {
  await p.getByLabel('Message', { exact: true }).fill(text);
  await p.keyboard.press('Enter');
}

export const state = (p: Page, re: RegExp) => p.getByTestId('state-line').filter({ hasText: re }).waitFor();

/** Widths that stick out of the page or of the conversation's own parts (none may scroll sideways). */
export const overflow = (p: Page) =>
  p.evaluate<string[]>(`['html', '.conv-header', '.transcript', '.composer', '.topbar']
    .map((sel) => [sel, document.querySelector(sel)])
    .filter(([, el]) => el && el.scrollWidth > el.clientWidth + 1)
    .map(([sel, el]) => sel + ': ' + el.scrollWidth + ' > ' + el.clientWidth)`);

export const MARKDOWN = [
  '## Plan',
  '',
  'Run `npm test` first, then:',
  '',
  '- read the **parser**',
  '- fix the `tokenize` call',
  '',
  '```ts',
  'export function add(a: number, b: number): number {',
  '  return a + b; // a comment that is long enough to need scrolling sideways on a phone screen, which the block does itself',
  '}',
  '```',
  '',
  'Done.',
].join('\n');

/**
 * Uses up responses an earlier attempt of a scenario scripted but never asked for (it failed
 * half-way), so a retry starts from its own script rather than from the leftovers.
 */
export async function dropLeftovers(): Promise<void> {
  for (let n = api.pending(); n > 0; n--) {
    await fetch(`${api.url}/v1/messages`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': 'test', 'anthropic-version': '2023-06-01' },
      body: JSON.stringify({ model: 'claude-sonnet-4-6', max_tokens: 16, messages: [{ role: 'user', content: 'drop' }] }),
    }).then((res) => res.arrayBuffer());
  }
  expect(api.pending()).toBe(0);
}

/** What the waiting list says, one line per message (its mode, then its text). */
export const waiting = (p: Page) => p.getByTestId('queue').locator('li').allInnerTexts();

/** The open conversation's id (from the address). */
export const openId = (p: Page) => decodeURIComponent(new URL(p.url()).pathname.replace(/^\/c\//, ''));
export const header = (p: Page) => p.locator('h1.conv-title');
export const listItem = (p: Page, id: string) => p.locator(`.conversation-list a[data-id="${id}"] .conv-slug`);

/** What another client (the CLI, another tab) would do: a call to web-bff's public API with the same token. */
export async function call(p: Page, method: string, body: Record<string, unknown>): Promise<Record<string, unknown>> {
  const res = await p.request.post(`${system.httpUrl}/bedrock.v1.ConversationService/${method}`, {
    headers: { authorization: `Bearer ${system.token}`, 'content-type': 'application/json' },
    data: body,
  });
  expect(res.status()).toBe(200);
  return (await res.json()) as Record<string, unknown>;
}
