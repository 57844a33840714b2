/**
 * Details of the web UI (issue 28), in headless Chromium against the embedded product with a
 * scripted Messages API: the favicon, the focus after Start, a send taking the view to the bottom,
 * where "↓ Latest" sits, the state line through a lost connection, tool output lines and Copy,
 * table alignment, Delete from the header, a neutral "Signed out", and on a 390 px phone the
 * header's status bar in one row.
 */
import { startTcpProxy } from './support/tcp-proxy.ts';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { api, browser, page, startUiSystem, stopUiSystem, system, workDir } from './support/ui-system.ts';

beforeAll(startUiSystem, 240_000);
afterAll(stopUiSystem);

async function start(): Promise<string> {
  const before = page.url();
  await page.getByLabel('Host directory (single-user installs)').fill(workDir);
  await page.getByRole('button', { name: 'Start' }).click();
  await page.waitForURL((u) => u.href !== before && /\/c\/[^/]+$/.test(u.pathname));
  await page.getByTestId('state-line').filter({ hasText: /Ready/ }).waitFor();
  return decodeURIComponent(new URL(page.url()).pathname.split('/').pop()!);
}

async function send(text: string): Promise<void> {
  await page.getByLabel('Message', { exact: true }).fill(text);
  await page.keyboard.press('Enter');
}

/** The transcript's distance from the bottom, in pixels. */
function fromBottom(): Promise<number> {
  return page.evaluate(
    `(() => { const t = document.querySelector('.transcript'); return t.scrollHeight - t.scrollTop - t.clientHeight; })()`,
  ) as Promise<number>;
}

type Box = { x: number; y: number; width: number; height: number };
const overlaps = (a: Box, b: Box) => a.x < b.x + b.width && b.x < a.x + a.width && a.y < b.y + b.height && b.y < a.y + a.height;

describe('web UI details', () => {
  it('has a favicon', async () => {
    await expect(page.locator('link[rel="icon"]').getAttribute('href')).resolves.toBe('/favicon.svg');
    const res = await page.request.get(`${system.httpUrl}/favicon.svg`);
    expect(res.status()).toBe(200);
    expect(res.headers()['content-type']).toBe('image/svg+xml');
    expect(await res.text()).toContain('<svg');
  });

  it('puts the focus in the message box after Start; the mode line says where tools write', async () => {
    await start();
    await expect(page.evaluate(`document.activeElement?.id`)).resolves.toBe('message-input');
    const mode = await page.getByTestId('mode-line').innerText();
    // Restricted is read-only and says where Unrestricted would write; otherwise the line names the
    // directory and the tool user, as the tool-runner reported them (not "full access").
    if (/^Restricted/.test(mode))
      expect(mode).toContain(`read-only, sandboxed; Unrestricted would write in ${workDir} as nobody (uid 65534)`);
    else expect(mode).toContain(`writes files in ${workDir} as nobody (uid 65534) and uses the network`);
  });

  it('counts output lines as a person does, keeps Copy off the output, and honours table alignment', async () => {
    api.enqueue(
      { kind: 'message', content: [{ type: 'tool_use', name: 'bash', input: { command: 'seq 1 5000' } }] },
      {
        kind: 'message',
        content: [{ type: 'text', text: 'Done.\n\n| left | centre | right |\n|:---|:---:|---:|\n| a | b | c |\n' }],
      },
    );
    await send('Count to 5000.');
    const fold = page.locator('article.tool details.fold');
    await fold.locator('summary', { hasText: 'Output (5000 lines)' }).waitFor();
    await fold.locator('summary').click();
    const pre = await fold.locator('pre.tool-output').boundingBox();
    const copy = await fold.getByRole('button', { name: 'Copy output' }).boundingBox();
    expect(overlaps(pre!, copy!)).toBe(false);

    const cells = page.locator('.md table tbody td');
    await cells.first().waitFor();
    const align = await page.evaluate(`[...document.querySelectorAll('.md table tbody td')].map((td) => getComputedStyle(td).textAlign)`);
    expect(align).toEqual(['left', 'center', 'right']);
  }, 60_000);

  it('goes back to the bottom when you send, however far you scrolled; "↓ Latest" sits below the transcript', async () => {
    // Enough to scroll: a long answer.
    api.enqueue({
      kind: 'message',
      content: [{ type: 'text', text: Array.from({ length: 120 }, (_, i) => `Line ${i + 1}.`).join('\n\n') }],
    });
    await send('Write a lot.');
    await page.getByText('Line 120.').waitFor();
    await page.getByTestId('state-line').filter({ hasText: /Ready/ }).waitFor();
    // A slow answer streams while the reader is up: the button offers the way down, below the transcript.
    api.enqueue({
      kind: 'message',
      content: [{ type: 'text', text: Array.from({ length: 60 }, (_, i) => `More ${i + 1}.`).join('\n\n') }],
      chunkChars: 6,
      eventDelayMs: 40,
    });
    await send('And more.');
    await page.locator('li.msg-streaming').waitFor();
    await page.evaluate(`document.querySelector('.transcript').scrollTop = 0`);
    const jump = page.getByRole('button', { name: '↓ Latest' });
    await jump.waitFor();
    const transcript = await page.locator('.transcript').boundingBox();
    const pill = await jump.boundingBox();
    expect(overlaps(transcript!, pill!)).toBe(false);
    expect(pill!.y).toBeGreaterThanOrEqual(transcript!.y + transcript!.height - 1);
    await page.getByTestId('state-line').filter({ hasText: /Ready/ }).waitFor();
    // Still scrolled up (it did not follow), then a send: back at the bottom, showing the message.
    expect(await fromBottom()).toBeGreaterThan(500);
    api.enqueue({ kind: 'message', content: [{ type: 'text', text: 'Noted.' }] });
    await send('My newest message.');
    await page.getByText('Noted.').waitFor();
    await page.waitForFunction(
      `(() => { const t = document.querySelector('.transcript'); return t.scrollHeight - t.scrollTop - t.clientHeight < 5; })()`,
    );
    await expect(page.locator('.msg-user', { hasText: 'My newest message.' }).isVisible()).resolves.toBe(true);
    await expect(jump.count()).resolves.toBe(0);
  }, 90_000);

  it('says the connection is lost in the state line too, not "Ready", until it is back', async () => {
    // Through a proxy this test can break: another page on the same conversation.
    const proxy = await startTcpProxy(Number(new URL(system.httpUrl).port));
    const other = await browser.newPage({ viewport: { width: 1280, height: 820 } });
    try {
      other.setDefaultTimeout(20_000);
      await other.goto(`${proxy.url}${new URL(page.url()).pathname}?token=${system.token}`);
      const state = other.getByTestId('state-line');
      await state.filter({ hasText: /Ready/ }).waitFor();
      proxy.refuse(true);
      proxy.reset();
      await other.getByText('Connection lost: reconnecting…').waitFor();
      await expect(state.innerText()).resolves.not.toMatch(/Ready/);
      await expect(state.getAttribute('data-tone')).resolves.toBe('attention');
      proxy.refuse(false);
      await state.filter({ hasText: /Ready/ }).waitFor({ timeout: 30_000 });
      await expect(other.getByText('Connection lost: reconnecting…').count()).resolves.toBe(0);
    } finally {
      await other.close();
      await proxy.close();
    }
  }, 60_000);

  it('keeps the header status bar to one row on a 390 px phone', async () => {
    await page.setViewportSize({ width: 390, height: 844 });
    try {
      // Every visible item crosses one horizontal line: the highest bottom is below the lowest top.
      const rows = (await page.evaluate(
        `[...document.querySelectorAll('.status-bar > *')].filter((el) => el.getClientRects().length > 0).map((el) => { const r = el.getBoundingClientRect(); return [r.top, r.bottom]; })`,
      )) as [number, number][];
      expect(rows.length).toBeGreaterThan(3);
      expect(Math.max(...rows.map(([top]) => top))).toBeLessThan(Math.min(...rows.map(([, bottom]) => bottom)));
      const share = (await page.evaluate(
        `document.querySelector('.transcript').getBoundingClientRect().height / window.innerHeight`,
      )) as number;
      expect(share).toBeGreaterThanOrEqual(0.7);
      // The page itself does not scroll sideways.
      await expect(page.evaluate('document.documentElement.scrollWidth <= window.innerWidth')).resolves.toBe(true);
    } finally {
      await page.setViewportSize({ width: 1280, height: 820 });
    }
  });

  it('deletes the conversation from its header after asking; Keep it is the default', async () => {
    const id = decodeURIComponent(new URL(page.url()).pathname.split('/').pop()!);
    await page.getByRole('button', { name: 'Delete this conversation' }).click();
    const dialog = page.getByRole('dialog', { name: 'Delete this conversation?' });
    await dialog.waitFor();
    await page.keyboard.press('Escape');
    await dialog.waitFor({ state: 'hidden' });
    expect(page.url()).toContain(id);
    await page.getByRole('button', { name: 'Delete this conversation' }).click();
    await dialog.getByRole('button', { name: 'Delete', exact: true }).click();
    await page.waitForURL((u) => u.pathname === '/');
    // The list loads again and no longer has it.
    await page.locator(`.conversation-list a[href="/c/${id}"]`).waitFor({ state: 'detached' });
    await page.goto(`${system.httpUrl}/c/${id}`);
    await page.getByTestId('not-found').waitFor();
  });

  it('says "Signed out" as information, not as an error', async () => {
    await page.evaluate("localStorage.setItem('bedrock.token', 'not-the-token')");
    await page.goto(`${system.httpUrl}/`);
    const note = page
      .locator('form.sign-in')
      .getByRole('status')
      .filter({ hasText: /^Signed out: / });
    await note.waitFor({ timeout: 30_000 });
    const [color, errorColor] = (await page.evaluate(`(() => {
      const note = document.querySelector('form.sign-in [role="status"]');
      const probe = document.createElement('p');
      probe.className = 'form-error';
      note.parentElement.append(probe);
      const both = [getComputedStyle(note).color, getComputedStyle(probe).color];
      probe.remove();
      return both;
    })()`)) as [string, string];
    expect(color).not.toBe(errorColor);
  }, 60_000);
});
