/**
 * Where Unrestricted tools write, in the web UI (issue 28, item 5), in headless Chromium against the
 * embedded product (host paths on, tools as the directory's owner: `nobody` for a root-owned one)
 * with a scripted Messages API: the mode line names the directory and the tool user; one the tool
 * user cannot write is warned of in the mode line and the approval dialog, and the write after an
 * approval fails as warned; a directory the tool user owns gets no warning.
 */
import { chmodSync, chownSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { Page } from 'playwright-core';
import { api, browser, page, SHOTS, startUiSystem, stopUiSystem, system } from './support/ui-system.ts';

const asRoot = process.getuid?.() === 0;

/** A root-owned project (tools run as nobody there: unwritable) and one nobody owns. */
let rootDir: string;
let ownDir: string;

beforeAll(async () => {
  rootDir = mkdtempSync(join(tmpdir(), 'bedrock-ui-wa-root-'));
  chmodSync(rootDir, 0o755);
  ownDir = mkdtempSync(join(tmpdir(), 'bedrock-ui-wa-own-'));
  if (asRoot) chownSync(ownDir, 65534, 65534);
  await startUiSystem({ pageTimeoutMs: 20_000 });
}, 240_000);

afterAll(async () => {
  await stopUiSystem();
  for (const dir of [rootDir, ownDir]) if (dir) rmSync(dir, { recursive: true, force: true });
});

async function start(p: Page, dir: string): Promise<void> {
  await p.goto(`${system.httpUrl}/`);
  const before = p.url();
  await p.getByLabel('Host directory (single-user installs)').fill(dir);
  await p.getByRole('button', { name: 'Start' }).click();
  await p.waitForURL((u) => u.href !== before && /\/c\/[^/]+$/.test(u.pathname));
  await p.getByTestId('state-line').filter({ hasText: /Ready/ }).waitFor();
}

describe('where Unrestricted tools write (web UI)', () => {
  it('warns in the mode line and the approval dialog when the tool user cannot write the directory', async () => {
    if (!asRoot) throw new Error('this test runs as root: it makes a root-owned project whose tools run as nobody');
    await start(page, rootDir);
    const mode = page.getByTestId('mode-line');
    // The runner's word: where, as whom, and that nobody cannot write there.
    await mode.filter({ hasText: `Unrestricted would write in ${rootDir} as nobody (uid 65534)` }).waitFor();
    const badge = page.getByTestId('write-warning');
    await expect(badge.innerText()).resolves.toBe('⚠ nobody (uid 65534) cannot write here');
    await expect(badge.getAttribute('title')).resolves.toMatch(
      new RegExp(`nobody \\(uid 65534\\) cannot write ${rootDir}: it is owned by root \\(uid 0\\), mode 0755`),
    );

    const reason = 'I need to write notes.txt.';
    api.enqueue(
      { kind: 'message', content: [{ type: 'tool_use', name: 'request_mode_upgrade', input: { reason } }] },
      { kind: 'message', content: [{ type: 'tool_use', name: 'bash', input: { command: 'echo hi > notes.txt' } }] },
      { kind: 'message', content: [{ type: 'text', text: 'That failed.' }] },
    );
    await page.getByLabel('Message', { exact: true }).fill('Please write notes.txt.');
    await page.keyboard.press('Enter');
    const dialog = page.getByRole('dialog', { name: 'Allow Unrestricted mode?' });
    await dialog.waitFor();
    // Before approving: where it would write, as whom, and that it cannot.
    await expect(dialog.innerText()).resolves.toContain(`write files in ${rootDir} as nobody (uid 65534)`);
    const warning = dialog.getByTestId('upgrade-write-warning');
    await expect(warning.innerText()).resolves.toMatch(
      /nobody \(uid 65534\) cannot write .*owned by root \(uid 0\), mode 0755.*Permission denied/s,
    );
    await page.screenshot({ path: join(SHOTS, 'write-access-warning.png') });
    await dialog.getByRole('button', { name: 'Approve' }).click();
    // As warned: the write fails.
    await page.locator('article.tool[data-tool="bash"] .tool-result', { hasText: 'Permission denied' }).waitFor();
    await page.getByText('That failed.').waitFor();
    await mode.filter({ hasText: `writes files in ${rootDir} as nobody (uid 65534)` }).waitFor();
    await expect(page.getByTestId('write-warning').isVisible()).resolves.toBe(true);
  }, 90_000);

  it('shows the place and no warning where the tool user can write; the phone keeps the warning', async () => {
    await start(page, ownDir);
    await page
      .getByTestId('mode-line')
      .filter({ hasText: `Unrestricted would write in ${ownDir} as nobody (uid 65534)` })
      .waitFor();
    await expect(page.getByTestId('write-warning').count()).resolves.toBe(0);

    // On a phone the mode detail is hidden; the warning is not.
    await start(page, rootDir);
    const phone = await browser.newPage({ viewport: { width: 390, height: 844 } });
    try {
      await phone.goto(`${page.url()}?token=${system.token}`);
      await phone.getByTestId('write-warning').waitFor();
      await expect(phone.getByTestId('write-warning').isVisible()).resolves.toBe(true);
      await phone.screenshot({ path: join(SHOTS, 'write-access-warning-phone.png') });
    } finally {
      await phone.close();
    }
  }, 90_000);
});
