/**
 * The web UI under a fast, long answer, in headless Chromium against the embedded product with a
 * scripted Messages API: a 2,000-line numbered list streamed as fast as the server can send it is
 * on screen within 1.5× the time its events take to reach a client watching from Node, without
 * freezing the page, its four-digit numbers inside the card; a cancelled answer keeps what
 * streamed. Figures: docs/web-ui.md, "What the agent's text looks like".
 */
import { createClient } from '@connectrpc/connect';
import { createConnectTransport } from '@connectrpc/connect-node';
import { ConversationService, MessageType } from '@bedrock/contracts';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { api, page, startUiSystem, stopUiSystem, system, workDir } from './support/ui-system.ts';

const LINES = 2000;

beforeAll(() => startUiSystem({ pageTimeoutMs: 30_000 }), 240_000);
afterAll(stopUiSystem);

function conversations() {
  const transport = createConnectTransport({
    baseUrl: system.httpUrl,
    httpVersion: '1.1',
    interceptors: [
      (next) => (req) => {
        req.header.set('authorization', `Bearer ${system.token}`);
        return next(req);
      },
    ],
  });
  return createClient(ConversationService, transport);
}

/** Watches the conversation from Node until the agent's answer is persisted; resolves with Date.now() then. */
async function answerArrives(conversationId: string, signal: AbortSignal): Promise<{ firstDelta: number; persisted: number }> {
  let firstDelta = 0;
  for await (const res of conversations().watchConversation({ conversationId }, { signal })) {
    const e = res.event?.kind;
    if (e?.case === 'tokenDelta' && !firstDelta) firstDelta = Date.now();
    if (e?.case === 'messagePersisted' && e.value.message?.type === MessageType.AGENT) return { firstDelta, persisted: Date.now() };
  }
  throw new Error('the watch ended before the answer');
}

describe('a long answer streamed fast', () => {
  it(`shows ${LINES} lines within 1.5× the time the events take to arrive, never freezing the page (long tasks printed)`, async () => {
    await page.getByLabel('Host directory (single-user installs)').fill(workDir);
    await page.getByRole('button', { name: 'Start' }).click();
    await page.waitForURL((u) => /\/c\/[^/]+$/.test(u.pathname));
    await page.getByTestId('state-line').filter({ hasText: /Ready/ }).waitFor();
    const conversationId = decodeURIComponent(new URL(page.url()).pathname.split('/').pop()!);

    const text = Array.from(
      { length: LINES },
      (_, i) => `${i + 1}. Line ${i + 1} of the answer, with a few words to make it wrap a little.`,
    ).join('\n');
    api.enqueue({ kind: 'message', content: [{ type: 'text', text }], chunkChars: 40 });

    // Long tasks from now on; the page says when the last line is on screen.
    // (The page's code is a string: this file is type-checked without the DOM's types.)
    await page.evaluate(`(() => {
      const lastLine = 'Line ${LINES} of the answer';
      window.longTasks = [];
      window.longAt = [];
      window.shownAt = 0;
      new PerformanceObserver((list) => {
        for (const entry of list.getEntries()) {
          window.longTasks.push(Math.round(entry.duration));
          window.longAt.push(Math.round(entry.startTime));
        }
      }).observe({ type: 'longtask' });
      // Cheap to look at every frame: the last Markdown block of the last item.
      const watch = () => {
        // The first block drawn while it streams is marked: the stored answer must keep that very element.
        const first = document.querySelector('li.msg-streaming .md');
        if (first && !first.dataset.mark) first.dataset.mark = 'first';
        const blocks = document.querySelector('.transcript-list')?.lastElementChild?.getElementsByClassName('md');
        const last = blocks?.[blocks.length - 1];
        if (last?.textContent?.includes(lastLine)) {
          window.shownAt = Date.now();
          window.shownPerf = Math.round(performance.now());
        } else requestAnimationFrame(watch);
      };
      requestAnimationFrame(watch);
    })()`);

    const abort = new AbortController();
    const arrival = answerArrives(conversationId, abort.signal);
    // Let the Node watch subscribe before the message goes.
    await new Promise((r) => setTimeout(r, 300));
    const sentAt = Date.now();
    await page.getByLabel('Message', { exact: true }).fill('Count to two thousand.');
    await page.keyboard.press('Enter');
    const { firstDelta, persisted } = await arrival;
    abort.abort();
    // Polled with evaluate (the protocol's own evaluation): waitForFunction's polling compiles its
    // predicate in the page, which the UI's CSP (no unsafe-eval) refuses whenever it must poll.
    const shownBy = Date.now() + 60_000;
    while (!(await page.evaluate('window.shownAt > 0'))) {
      if (Date.now() > shownBy) throw new Error('the last line was not shown within 60 s');
      await new Promise((r) => setTimeout(r, 50));
    }
    await page.getByTestId('state-line').filter({ hasText: /Ready/ }).waitFor();
    const { longTasks, longAt, shownAt, shownPerf } = (await page.evaluate(
      '({ longTasks: window.longTasks, longAt: window.longAt, shownAt: window.shownAt, shownPerf: window.shownPerf })',
    )) as { longTasks: number[]; longAt: number[]; shownAt: number; shownPerf: number };
    const apiTime = persisted - sentAt;
    const uiTime = shownAt - sentAt;
    console.log(
      `events over the API: ${apiTime} ms (first delta at ${firstDelta - sentAt} ms); on screen: ${uiTime} ms; long tasks: ${JSON.stringify(longTasks)} at ${JSON.stringify(longAt)}, shown at ${shownPerf}`,
    );

    // The stored answer is the streamed one, in place: the first block's element is still there.
    await expect(page.locator('li.msg-agent:not(.msg-streaming) .md[data-mark="first"]').count()).resolves.toBe(1);
    // Every line is there once, and four-digit numbers stay inside the card.
    await expect(page.locator('.transcript .msg-agent li').count()).resolves.toBe(LINES);
    const fit = (await page.evaluate(`(() => {
      const items = [...document.querySelectorAll('.transcript .msg-agent ol li')];
      const last = items[items.length - 1];
      const ol = last.parentElement;
      // The marker ("2000. ") sits in the list's left padding: measure it in the item's font.
      const probe = document.createElement('span');
      probe.textContent = items.length + '. ';
      probe.style.font = getComputedStyle(last).font;
      probe.style.position = 'absolute';
      document.body.append(probe);
      const marker = probe.getBoundingClientRect().width;
      probe.remove();
      const card = last.closest('.msg-agent').getBoundingClientRect();
      return { marker, padding: parseFloat(getComputedStyle(ol).paddingLeft), olLeft: ol.getBoundingClientRect().left, cardLeft: card.left };
    })()`)) as { marker: number; padding: number; olLeft: number; cardLeft: number };
    expect(fit.olLeft).toBeGreaterThanOrEqual(fit.cardLeft);
    expect(fit.padding).toBeGreaterThanOrEqual(fit.marker);

    // The measure of it all. The page keeps up with the stream (a ratio, measured side by side);
    // it never freezes (before: one task of 23 s). The goal of no task over 50 ms is printed above,
    // not asserted: on a shared 2-core machine the scheduler alone makes tasks of 50-100 ms.
    expect(uiTime).toBeLessThanOrEqual(apiTime * 1.5);
    expect(Math.max(0, ...longTasks)).toBeLessThan(500);
  }, 180_000);

  it('keeps what streamed when the turn is cancelled, marked cancelled, also after a reload', async () => {
    // A new conversation: the first one's 2,000 lines are not in the way.
    await page.goto(`${system.httpUrl}/`);
    await page.getByLabel('Host directory (single-user installs)').fill(workDir);
    await page.getByRole('button', { name: 'Start' }).click();
    await page.waitForURL((u) => /\/c\/[^/]+$/.test(u.pathname));
    await page.getByTestId('state-line').filter({ hasText: /Ready/ }).waitFor();
    const words = Array.from({ length: 400 }, (_, i) => `word${i}`).join(' ');
    api.enqueue({
      kind: 'message',
      content: [{ type: 'text', text: `The streamed part comes first. ${words}` }],
      chunkChars: 8,
      eventDelayMs: 30,
    });
    await page.getByLabel('Message', { exact: true }).fill('Say a lot.');
    await page.keyboard.press('Enter');
    const live = page.locator('li.msg-streaming');
    await live.getByText('The streamed part comes first.').waitFor();
    await page.keyboard.press('Escape');
    await page.getByTestId('state-line').filter({ hasText: /Ready/ }).waitFor();

    const answer = page.locator('li.msg-agent').last();
    await expect(answer.locator('.stop-marker').innerText()).resolves.toBe('Cancelled by user — the answer stopped here.');
    await expect(answer.getAttribute('data-stop')).resolves.toBe('cancelled');
    const shown = await answer.locator('.msg-body').innerText();
    expect(shown).toMatch(/^The streamed part comes first\./);
    // Cut where it was cancelled: not the whole answer.
    expect(shown).not.toContain('word399');

    // It is the conversation's, not the page's: a reload shows the same.
    await page.reload();
    const again = page.locator('li.msg-agent').last();
    await again.locator('.stop-marker', { hasText: 'Cancelled by user' }).waitFor();
    await expect(again.locator('.msg-body').innerText()).resolves.toBe(shown);
  }, 120_000);
});
