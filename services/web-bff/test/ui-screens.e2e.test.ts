/**
 * The web UI as a person sees it on a 1280×800 desktop and a 390×844 phone, light and dark (part 1 of 2, the rest in
 * ui-navigation.e2e.test.ts): Markdown and highlighted code, the keys, the phone layout (the drawer, no sideways
 * scrolling at 360 px), the context figure at its peak, the queue, "Cancel and send now" and steering.
 */
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, jest } from '@jest/globals';
import { offlineModelResponder } from '@bedrock/offline-model';
import { api, cspViolations, SHOTS, startUiSystem, stopUiSystem } from './support/ui-system.ts';
import {
  call,
  DESKTOP,
  dropLeftovers,
  MARKDOWN,
  open,
  openId,
  overflow,
  pages,
  PHONE,
  say,
  start,
  state,
  waiting,
} from './support/ui-person.ts';

beforeAll(startUiSystem, 240_000);
afterAll(stopUiSystem);

// A real browser against a real system on a shared 2-core machine: a scenario that fails is
// run again (up to twice), with its error logged first so a flake stays visible.
jest.retryTimes(2, { logErrorsBeforeRetry: true });

/**
 * What a person sees, on a desktop (1280×800) and a phone (390×844), light and dark: Markdown,
 * highlighted code, the layout, the context figure and the queue.
 * Each test opens its own browser context (viewport and colour scheme) signed in from the link.
 */
describe('the web UI as a person sees it, on a desktop and a phone', () => {
  afterAll(async () => {
    for (const p of pages) await p.context().close();
  });

  it('renders Markdown and highlighted code with copy buttons (desktop, light and dark); the keys reach the form and the box', async () => {
    const p = await open(DESKTOP, 'light');
    await start(p);
    api.enqueue({ kind: 'message', content: [{ type: 'text', text: MARKDOWN }], eventDelayMs: 5, chunkChars: 9 });
    await say(p, 'Make a plan.');
    const answer = p.locator('li.msg-agent', { hasText: 'Done.' });
    await answer.waitFor();
    await expect(answer.locator('h2').innerText()).resolves.toBe('Plan');
    await expect(answer.locator('ul > li').allInnerTexts()).resolves.toEqual(['read the parser', 'fix the tokenize call']);
    await expect(answer.locator('strong').innerText()).resolves.toBe('parser');
    await expect(answer.locator(':not(pre) > code').allInnerTexts()).resolves.toEqual(['npm test', 'tokenize']);
    // Highlighted: token spans inside the code block, not raw text.
    const code = answer.locator('.code-block pre code');
    await expect(code.getAttribute('class')).resolves.toMatch(/hljs language-ts/);
    await expect(code.locator('span.hljs-keyword').first().innerText()).resolves.toBe('export');
    await expect(code.locator('span.hljs-comment').count()).resolves.toBe(1);
    await expect(answer.locator('.code-lang').innerText()).resolves.toBe('ts');
    // No Markdown syntax is left as typed.
    await expect(answer.innerText()).resolves.not.toMatch(/##|```|\*\*/);
    // The time it was written: relative, exact in the title.
    await expect(answer.locator('time.when').innerText()).resolves.toBe('just now');
    await expect(answer.locator('time.when').getAttribute('title')).resolves.toMatch(/\d/);
    await answer.getByRole('button', { name: 'Copy ts code' }).click();
    await answer.getByRole('button', { name: 'Copy ts code' }).filter({ hasText: 'Copied' }).waitFor();
    await expect(p.evaluate<string>('navigator.clipboard.readText()')).resolves.toMatch(/^export function add[\s\S]*\}$/);
    await p.screenshot({ path: join(SHOTS, 'desktop-markdown-light.png') });
    await p.emulateMedia({ colorScheme: 'dark' });
    // Dark follows the system setting: the page's background is dark.
    await expect(p.evaluate<string>('getComputedStyle(document.documentElement).backgroundColor')).resolves.toBe('rgb(15, 18, 22)');
    await p.screenshot({ path: join(SHOTS, 'desktop-markdown-dark.png') });

    // Keys: Ctrl+Shift+O goes to the new-conversation form (its workspace), / to the message box.
    await p.locator('body').click({ position: { x: 5, y: 790 } });
    await p.keyboard.press('Control+Shift+O');
    await expect(p.evaluate<string | undefined>('document.activeElement?.id')).resolves.toBe('new-workspace');
    // (A click on the title would open its rename field: click the transcript's margin instead.)
    await p.locator('section.transcript').click({ position: { x: 4, y: 4 } });
    await p.keyboard.press('/');
    await expect(p.evaluate<string | undefined>('document.activeElement?.id')).resolves.toBe('message-input');
  });

  for (const scheme of ['light', 'dark'] as const) {
    it(`gives the phone screen to the conversation: list and form in a drawer, no sideways scrolling (390×844, ${scheme})`, async () => {
      const p = await open(PHONE, scheme);
      // The drawer is closed: its form is out of reach until opened.
      await expect(p.locator('#new-cwd').isVisible()).resolves.toBe(false);
      await expect(p.getByRole('button', { name: 'Conversations' }).getAttribute('aria-expanded')).resolves.toBe('false');
      await p.getByRole('button', { name: 'Conversations' }).click();
      await p.locator('#new-cwd').waitFor();
      await p.screenshot({ path: join(SHOTS, `phone-drawer-${scheme}.png`) });
      await p.keyboard.press('Escape');
      await p.locator('nav.sidebar.open').waitFor({ state: 'detached' });
      await start(p);
      api.enqueue({ kind: 'message', content: [{ type: 'text', text: MARKDOWN }] });
      await say(p, 'Make a plan.');
      await p.locator('li.msg-agent h2', { hasText: 'Plan' }).waitFor();
      await state(p, /Ready/);
      const transcript = await p.locator('section.transcript').boundingBox();
      expect(transcript!.height / PHONE.height).toBeGreaterThanOrEqual(0.7);
      await expect(overflow(p)).resolves.toEqual([]);
      await p.screenshot({ path: join(SHOTS, `phone-conversation-${scheme}.png`) });
      await p.setViewportSize({ width: 360, height: 740 });
      await expect(overflow(p)).resolves.toEqual([]);
      const bar = await p.getByTestId('context-usage').boundingBox();
      expect(bar!.x).toBeGreaterThanOrEqual(0);
      expect(bar!.x + bar!.width).toBeLessThanOrEqual(360);
      await p.screenshot({ path: join(SHOTS, `phone-360-${scheme}.png`) });
    });
  }

  it("shows the context's peak at 90%+ after the automatic continuation, and it fits a 360 px screen", async () => {
    const p = await open({ width: 360, height: 740 }, 'light');
    await start(p);
    // The offline model reports N input tokens for `/usage N`: 950k of claude-sonnet-4-6's 1M window.
    api.setFallback(offlineModelResponder());
    try {
      await say(p, '/usage 950000');
      await state(p, /Context window full/);
    } finally {
      api.setFallback(() => ({ kind: 'message', content: [{ type: 'text', text: 'Nothing scripted.' }] }));
    }
    const usage = p.getByTestId('context-usage');
    await expect(usage.innerText()).resolves.toMatch(/95%/);
    await expect(usage.getByRole('meter').getAttribute('aria-valuenow')).resolves.toBe('95');
    await expect(overflow(p)).resolves.toEqual([]);
    const bar = await usage.boundingBox();
    expect(bar!.x + bar!.width).toBeLessThanOrEqual(360);
    await p.screenshot({ path: join(SHOTS, 'context-peak-phone.png') });
  });

  it("queues messages typed while the agent works in the conversation itself: they survive a reload, show the CLI's too, are removable, and go out after the turn", async () => {
    await dropLeftovers();
    const p = await open(DESKTOP, 'light');
    await start(p);
    const id = openId(p);
    api.enqueue(
      { kind: 'message', content: [{ type: 'tool_use', name: 'bash', input: { command: 'echo working; sleep 4' } }] },
      { kind: 'message', content: [{ type: 'text', text: 'Finished the work.' }] },
      { kind: 'message', content: [{ type: 'text', text: 'Got your follow-up.' }] },
      { kind: 'message', content: [{ type: 'text', text: 'And the one from the command line.' }] },
    );
    await say(p, 'Work for a while.');
    await state(p, /Running tool/);
    await expect(p.locator('#composer-hint').innerText()).resolves.toMatch(/working.*waits until it finishes.*Alt\+Enter steers/);
    await expect(p.getByRole('button', { name: 'Queue' }).count()).resolves.toBe(1);
    await say(p, 'Then say what you found.');
    await say(p, 'Forget this one.');
    const queue = p.getByTestId('queue');
    await queue.locator('li').nth(1).waitFor();
    await expect(waiting(p)).resolves.toEqual([
      expect.stringMatching(/^Queued\s+Then say what you found\./i),
      expect.stringMatching(/^Queued\s+Forget this one\./i),
    ]);
    await expect(queue.locator('.queue-head').innerText()).resolves.toBe('2 messages wait');
    await expect(p.getByLabel('Message', { exact: true }).inputValue()).resolves.toBe('');
    // Queued from another client (the CLI): the same list shows it.
    await call(p, 'SendMessage', { conversationId: id, text: 'Sent from the command line.', delivery: 'DELIVERY_MODE_QUEUE' });
    await queue.locator('li', { hasText: 'Sent from the command line.' }).waitFor();
    await p.screenshot({ path: join(SHOTS, 'queue.png') });

    // The list is the conversation's, not the page's: a reload shows it again, in order.
    await p.reload();
    await state(p, /Running tool/);
    await queue.locator('li').nth(2).waitFor();
    await expect(waiting(p)).resolves.toEqual([
      expect.stringContaining('Then say what you found.'),
      expect.stringContaining('Forget this one.'),
      expect.stringContaining('Sent from the command line.'),
    ]);
    await queue.getByRole('button', { name: 'Remove queued message 2' }).click();
    await expect(queue.locator('li', { hasText: 'Forget this one.' }).waitFor({ state: 'detached' })).resolves.toBeUndefined();
    await expect(queue.locator('li').count()).resolves.toBe(2);

    // After the turn each goes out as its own turn, in order; the removed one never.
    await p.getByText('And the one from the command line.').waitFor({ timeout: 30_000 });
    await state(p, /Ready/);
    await expect(p.locator('.msg-user').allInnerTexts()).resolves.toEqual([
      expect.stringContaining('Work for a while.'),
      expect.stringContaining('Then say what you found.'),
      expect.stringContaining('Sent from the command line.'),
    ]);
    await expect(queue.count()).resolves.toBe(0);
    await expect(p.getByText('Forget this one.').count()).resolves.toBe(0);
    // The first went out after the first turn ended: the model saw the first answer before it.
    const second = api.requests.at(-2)!.body!.messages;
    expect(JSON.stringify(second.at(-2))).toContain('Finished the work.');
    expect(JSON.stringify(second.at(-1))).toContain('Then say what you found.');
    await p.screenshot({ path: join(SHOTS, 'queue-sent.png') });
  });

  it('shows the waiting list with each mode on a phone, and "Cancel and send now" interrupts the turn with the typed message (390×844)', async () => {
    await dropLeftovers();
    const p = await open(PHONE, 'light');
    await start(p);
    api.enqueue(
      { kind: 'message', content: [{ type: 'tool_use', name: 'bash', input: { command: 'echo long; sleep 30' } }] },
      { kind: 'message', content: [{ type: 'text', text: 'Changed course.' }] },
      { kind: 'message', content: [{ type: 'text', text: 'Now the queued one.' }] },
    );
    await say(p, 'Start something long.');
    await state(p, /Running tool/);
    await say(p, 'Afterwards, tidy up.');
    await p.getByLabel('Message', { exact: true }).fill('Later, check the README too.');
    await p.keyboard.press('Alt+Enter');
    const queue = p.getByTestId('queue');
    await queue.locator('li').nth(1).waitFor();
    await expect(waiting(p)).resolves.toEqual([
      expect.stringMatching(/^Queued\s+Afterwards, tidy up\./i),
      expect.stringMatching(/^Steer\s+Later, check the README too\./i),
    ]);
    await expect(overflow(p)).resolves.toEqual([]);
    await p.screenshot({ path: join(SHOTS, 'phone-queue-modes.png') });
    // Any waiting message can be withdrawn, whatever its mode.
    await queue.getByRole('button', { name: 'Remove queued message 2' }).click();
    await queue.locator('li', { hasText: 'Later, check the README too.' }).waitFor({ state: 'detached' });
    await expect(queue.locator('li').count()).resolves.toBe(1);

    await p.getByLabel('Message', { exact: true }).fill('Stop and do this instead.');
    const clicked = Date.now();
    await p.getByRole('button', { name: 'Cancel and send now' }).click();
    await p.getByText('Changed course.').waitFor();
    expect(Date.now() - clicked).toBeLessThan(10_000);
    await expect(p.locator('article.tool[data-status="cancelled"]').count()).resolves.toBe(1);
    // The interrupting message went before the queued one, which follows after its turn.
    await p.getByText('Now the queued one.').waitFor();
    await state(p, /Ready/);
    await expect(p.locator('.msg-user').allInnerTexts()).resolves.toEqual([
      expect.stringContaining('Start something long.'),
      expect.stringContaining('Stop and do this instead.'),
      expect.stringContaining('Afterwards, tidy up.'),
    ]);
    // The model read the cancelled tool's result, then the interruption.
    const interrupted = api.requests.at(-2)!.body!.messages;
    expect(JSON.stringify(interrupted.at(-1))).toContain('Stop and do this instead.');
    expect(JSON.stringify(interrupted)).toContain('Cancelled by user');
    await p.screenshot({ path: join(SHOTS, 'phone-interrupted.png') });

    // With an empty box, "Cancel and send now" cancels and the first waiting message goes out at once.
    api.enqueue(
      { kind: 'message', content: [{ type: 'tool_use', name: 'bash', input: { command: 'echo long; sleep 30' } }] },
      { kind: 'message', content: [{ type: 'text', text: 'Doing the waiting one now.' }] },
    );
    await say(p, 'Start something long again.');
    await state(p, /Running tool/);
    await say(p, 'Do this when you stop.');
    await queue.locator('li').waitFor();
    const again = Date.now();
    await p.getByRole('button', { name: 'Cancel and send now' }).click();
    await p.getByText('Doing the waiting one now.').waitFor();
    expect(Date.now() - again).toBeLessThan(10_000);
    await expect(p.locator('article.tool[data-status="cancelled"]').count()).resolves.toBe(2);
  });

  it('steers the agent during a turn of several tools: the message joins after the tool results and the agent goes on (desktop)', async () => {
    await dropLeftovers();
    const p = await open(DESKTOP, 'light');
    await start(p);
    api.enqueue(
      {
        kind: 'message',
        content: [
          { type: 'text', text: 'Two steps.' },
          { type: 'tool_use', name: 'bash', input: { command: 'echo step-one; sleep 2' } },
          { type: 'tool_use', name: 'bash', input: { command: 'echo step-two' } },
        ],
      },
      { kind: 'message', content: [{ type: 'text', text: 'Read your note: looking at the README as well.' }] },
    );
    await say(p, 'Do two things.');
    await p.locator('article.tool[data-status="running"]').first().waitFor();
    await p.getByLabel('Message', { exact: true }).fill('Also look at the README.');
    await p.getByRole('button', { name: 'Steer' }).click();
    await p.getByTestId('queue').locator('li').waitFor();
    await expect(waiting(p)).resolves.toEqual([expect.stringMatching(/^Steer\s+Also look at the README\./i)]);
    await p.screenshot({ path: join(SHOTS, 'steer-waiting.png') });
    await p.getByText('Read your note: looking at the README as well.').waitFor();
    await state(p, /Ready/);
    await expect(p.getByTestId('queue').count()).resolves.toBe(0);
    // On screen: the answer with both tools done, then the steer, then the agent going on — one turn.
    const items = p.locator('ol.transcript-list > li.msg');
    await expect(
      items.evaluateAll((els) =>
        els.map((el) => [
          el.className.replace(/^msg /, ''),
          el.querySelectorAll('article.tool[data-status="ok"]').length,
          (el.querySelector('.msg-body')?.textContent ?? '').trim(),
        ]),
      ),
    ).resolves.toEqual([
      ['msg-user', 0, 'Do two things.'],
      ['msg-agent', 2, 'Two steps.'],
      ['msg-user', 0, 'Also look at the README.'],
      ['msg-agent', 0, 'Read your note: looking at the README as well.'],
    ]);
    // The model's next request: the last user turn is both tool results followed by the steer.
    const last = api.requests.at(-1)!.body!.messages.at(-1) as { role: string; content: { type: string; text?: string }[] };
    expect(last.role).toBe('user');
    expect(last.content.map((b) => b.type)).toEqual(['tool_result', 'tool_result', 'text']);
    expect(last.content[2]!.text).toBe('Also look at the README.');
    await p.screenshot({ path: join(SHOTS, 'steer-joined.png') });
  });

  it('ran these under the strict Content-Security-Policy, without a violation', () => {
    expect(cspViolations).toEqual([]);
  });
});
