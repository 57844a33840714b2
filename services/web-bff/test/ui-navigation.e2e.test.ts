/**
 * The web UI as a person sees it, desktop and phone, light and dark (part 2 of 2, after ui-screens.e2e.test.ts): forks
 * and the way back, Esc, the not-found page, titles (from the first message, renamed in place, kept after a reload,
 * changed live), the title search, and a sub-agent's transcript opened from its parent; all under the strict CSP.
 */
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, jest } from '@jest/globals';
import { fromBinary, toBinary } from '@bufbuild/protobuf';
import { ForkConversationRequestSchema, ListConversationsRequestSchema } from '@bedrock/contracts';
import { offlineModelResponder } from '@bedrock/offline-model';
import { api, cspViolations, SHOTS, startUiSystem, stopUiSystem } from './support/ui-system.ts';
import {
  call,
  DESKTOP,
  dropLeftovers,
  header,
  listItem,
  open,
  openId,
  overflow,
  pages,
  PHONE,
  say,
  start,
  state,
} from './support/ui-person.ts';

beforeAll(startUiSystem, 240_000);
afterAll(stopUiSystem);

// A real browser against a real system on a shared 2-core machine: a scenario that fails is
// run again (up to twice), with its error logged first so a flake stays visible.
jest.retryTimes(2, { logErrorsBeforeRetry: true });

/**
 * What a person sees, on a desktop (1280×800) and a phone (390×844), light and dark: forks, the
 * keys, the not-found page, titles, search and sub-agents.
 * Each test opens its own browser context (viewport and colour scheme) signed in from the link.
 */
describe('the web UI as a person sees it, on a desktop and a phone', () => {
  afterAll(async () => {
    for (const p of pages) await p.context().close();
  });

  it('forks from a message: the fork has the history up to it, says where it came from, and takes messages; a refused place shows why (desktop)', async () => {
    await dropLeftovers();
    const p = await open(DESKTOP, 'light');
    await start(p);
    const source = openId(p);
    api.enqueue(
      { kind: 'message', content: [{ type: 'text', text: 'First answer.' }] },
      {
        kind: 'message',
        content: [
          { type: 'text', text: 'Checking.' },
          { type: 'tool_use', name: 'bash', input: { command: 'echo checked; sleep 2' } },
        ],
      },
      { kind: 'message', content: [{ type: 'text', text: 'Second answer.' }] },
    );
    await say(p, 'First question about forks.');
    await p.getByText('First answer.').waitFor();
    await state(p, /Ready/);
    await say(p, 'Second question.');
    // A turn at work: the answer waiting for its tool offers no fork (a history cannot end there).
    const checking = p.locator('li.msg-agent', { hasText: 'Checking.' });
    await checking.locator('article.tool[data-status="running"]').waitFor();
    await expect(checking.getByRole('button', { name: 'Fork from here' }).count()).resolves.toBe(0);
    await p.getByText('Second answer.').waitFor();
    await state(p, /Ready/);
    const sourceTitle = await p.locator('h1.conv-title').innerText();

    // Every message at rest offers it, reachable by keyboard (Tab to it shows it).
    await expect(p.locator('li.msg').getByRole('button', { name: 'Fork from here' }).count()).resolves.toBe(5);
    const firstAnswer = p.locator('li.msg-agent', { hasText: 'First answer.' });
    const forkButton = firstAnswer.getByRole('button', { name: 'Fork from here' });
    await forkButton.focus();
    await p.waitForFunction((el) => el?.ownerDocument.defaultView?.getComputedStyle(el).opacity === '1', await forkButton.elementHandle());

    // A place the service refuses (here, the tool call without its result: the request is
    // changed on its way) is answered beside the message, in the service's words.
    const callSeq = BigInt((await checking.getAttribute('data-sequence'))!) - 1n;
    await p.route('**/bedrock.v1.ConversationService/ForkConversation', async (route) => {
      const req = fromBinary(ForkConversationRequestSchema, new Uint8Array(route.request().postDataBuffer()!));
      await route.continue({ postData: Buffer.from(toBinary(ForkConversationRequestSchema, { ...req, atMessage: callSeq })) });
    });
    await checking.getByRole('button', { name: 'Fork from here' }).click();
    const refusal = checking.locator('.fork-error[role="alert"]');
    await refusal.waitFor();
    await expect(refusal.innerText()).resolves.toMatch(
      new RegExp(
        `message ${callSeq} asks for tools whose results would be left out, .*: fork at message \\d+ \\(before the call\\) or at message \\d+ \\(after its results\\)`,
      ),
    );
    expect(openId(p)).toBe(source);
    await p.screenshot({ path: join(SHOTS, 'fork-refused.png') });
    await p.unroute('**/bedrock.v1.ConversationService/ForkConversation');

    await firstAnswer.hover();
    await firstAnswer.getByRole('button', { name: 'Fork from here' }).click();
    await p.waitForURL((u) => u.pathname.startsWith('/c/') && openId(p) !== source);
    const fork = openId(p);
    await state(p, /Ready/);
    await expect(p.locator('h1.conv-title').innerText()).resolves.toBe(`Fork of ${sourceTitle}`);
    const link = p.getByTestId('fork-source-link');
    await link.filter({ hasText: sourceTitle }).waitFor();
    await expect(p.locator('.conv-meta').innerText()).resolves.toContain(`Forked from ${sourceTitle}`);
    await expect(p.locator('.msg-user').allInnerTexts()).resolves.toEqual([expect.stringContaining('First question about forks.')]);
    await expect(p.locator('.msg-agent').allInnerTexts()).resolves.toEqual([expect.stringContaining('First answer.')]);
    await expect(p.getByText('Second question.').count()).resolves.toBe(0);
    await expect(p.getByTestId('mode-line').innerText()).resolves.toMatch(/Restricted|Sandbox unavailable/);
    // Listed like any other.
    await p.locator(`.conversation-list a[data-id="${fork}"]`).waitFor();

    api.enqueue({ kind: 'message', content: [{ type: 'text', text: 'Answer in the fork.' }] });
    await say(p, 'A different second question.');
    await p.getByText('Answer in the fork.').waitFor();
    await state(p, /Ready/);
    const history = JSON.stringify(api.requests.at(-1)!.body!.messages);
    expect(history).toContain('First question about forks.');
    expect(history).toContain('First answer.');
    expect(history).toContain('A different second question.');
    expect(history).not.toContain('Second question.');
    await p.screenshot({ path: join(SHOTS, 'fork-opened.png') });

    // The way back: the source is as it was.
    await link.click();
    await p.waitForURL((u) => u.pathname === `/c/${source}`);
    await p.getByText('Second answer.').waitFor();
    await expect(p.getByText('A different second question.').count()).resolves.toBe(0);
  });

  it('cancels the running turn with Esc (phone, dark)', async () => {
    const p = await open(PHONE, 'dark');
    await start(p);
    api.enqueue({ kind: 'message', content: [{ type: 'tool_use', name: 'bash', input: { command: 'echo started; sleep 30' } }] });
    await say(p, 'Wait for a while.');
    await p.locator('article.tool[data-status="running"]').waitFor();
    // The tool's first output has streamed to the page.
    await p.locator('article.tool[data-status="running"] .tool-live', { hasText: 'started' }).waitFor();
    await p.screenshot({ path: join(SHOTS, 'phone-running-dark.png') });
    const pressed = Date.now();
    await p.keyboard.press('Escape');
    await state(p, /Ready/);
    expect(Date.now() - pressed).toBeLessThan(10_000);
    // What streamed stays, shown as output (not as an error) above the marker; also after a reload.
    const result = p.locator('article.tool[data-status="cancelled"] .tool-result', { hasText: 'Cancelled by user' });
    await result.waitFor();
    await expect(result.innerText()).resolves.toMatch(/started\s+Cancelled by user/);
    await expect(result.locator('.output-error').count()).resolves.toBe(0);
    await p.screenshot({ path: join(SHOTS, 'phone-esc-cancelled-dark.png') });
    await p.reload();
    await expect(
      p.locator('article.tool[data-status="cancelled"] .tool-result', { hasText: 'Cancelled by user' }).innerText(),
    ).resolves.toMatch(/started\s+Cancelled by user/);
  });

  for (const [viewport, scheme, name] of [
    [DESKTOP, 'light', 'desktop'],
    [PHONE, 'dark', 'phone'],
  ] as const) {
    it(`says once that an unknown conversation does not exist (${name}, ${scheme})`, async () => {
      const p = await open(viewport, scheme, '/c/c-00000000-no-such-conversation');
      await p.getByRole('heading', { name: 'Conversation not found' }).waitFor();
      await expect(p.getByTestId('not-found').innerText()).resolves.toContain('c-00000000-no-such-conversation');
      // Nothing else claims a state for it.
      for (const text of ['Connecting…', 'No messages yet', 'Conversation unavailable', 'Restricted', 'Loading the conversation…'])
        await expect(p.getByText(text).count()).resolves.toBe(0);
      await expect(p.getByLabel('Message', { exact: true }).count()).resolves.toBe(0);
      await expect(p.getByTestId('state-line').count()).resolves.toBe(0);
      await expect(p.title()).resolves.toBe('Not found · Bedrock');
      await p.screenshot({ path: join(SHOTS, `not-found-${name}-${scheme}.png`) });
    });
  }

  it('titles a conversation from its first message and renames it in place: Esc cancels, the refusal shows, the name stays after a reload (desktop)', async () => {
    const p = await open(DESKTOP, 'light');
    await start(p);
    const id = openId(p);
    // Before the first message it is a new conversation, in the header and in the list.
    await expect(header(p).innerText()).resolves.toBe('New conversation');
    await expect(listItem(p, id).innerText()).resolves.toBe('New conversation');
    await expect(p.locator('main').innerText()).resolves.not.toContain(id);
    await p.screenshot({ path: join(SHOTS, 'title-new-light.png') });

    api.enqueue({ kind: 'message', content: [{ type: 'text', text: 'Here is the plan.' }] });
    await say(p, 'Plan the **release** of version 2\nwith the changelog first');
    // The service's title (first line, Markdown removed) reaches the header and the list live (title_changed).
    await header(p)
      .filter({ hasText: /^Plan the release of version 2$/ })
      .waitFor();
    await listItem(p, id)
      .filter({ hasText: /^Plan the release of version 2$/ })
      .waitFor();
    await expect(p.title()).resolves.toBe('Plan the release of version 2 · Bedrock');
    await state(p, /Ready/);

    // A click on the title opens the field; Esc leaves it as it was (and cancels nothing).
    await header(p).click();
    const field = p.getByLabel('Conversation title');
    await expect(field.inputValue()).resolves.toBe('Plan the release of version 2');
    await expect(p.evaluate<string | undefined>('document.activeElement?.id')).resolves.toBe('conv-title-input');
    await field.fill('Not this one');
    await p.keyboard.press('Escape');
    await expect(field.count()).resolves.toBe(0);
    await expect(header(p).innerText()).resolves.toBe('Plan the release of version 2');
    await expect(p.getByTestId('state-line').innerText()).resolves.toMatch(/Ready/);

    // The ✎ button (here with Enter) opens it too; the service's refusal shows under the field, which stays open.
    const rename = p.getByRole('button', { name: 'Rename conversation' });
    await expect(p.evaluate<string | undefined>("document.activeElement?.getAttribute('aria-label')")).resolves.toBe('Rename conversation');
    await rename.focus();
    await p.keyboard.press('Enter');
    await field.fill('   ');
    await p.keyboard.press('Enter');
    const refusal = p.locator('form.rename-form').getByRole('alert');
    await expect(refusal.innerText()).resolves.toBe('title is empty: give 1 to 200 characters');
    await expect(field.getAttribute('aria-invalid')).resolves.toBe('true');
    await p.screenshot({ path: join(SHOTS, 'title-rename-refused-light.png') });
    await field.fill('a'.repeat(201));
    await p.keyboard.press('Enter');
    await refusal.filter({ hasText: 'title is 201 characters; the limit is 200: shorten it' }).waitFor();
    // Enter saves: the header and the list follow, focus goes back to the button.
    await field.fill('Release checklist for v2');
    await p.keyboard.press('Enter');
    await header(p)
      .filter({ hasText: /^Release checklist for v2$/ })
      .waitFor();
    await listItem(p, id)
      .filter({ hasText: /^Release checklist for v2$/ })
      .waitFor();
    await expect(p.evaluate<string | undefined>("document.activeElement?.getAttribute('aria-label')")).resolves.toBe('Rename conversation');
    await expect(p.title()).resolves.toBe('Release checklist for v2 · Bedrock');

    // Kept by the service: the same after a reload, and the next message does not replace it.
    await p.reload();
    await header(p)
      .filter({ hasText: /^Release checklist for v2$/ })
      .waitFor();
    await listItem(p, id)
      .filter({ hasText: /^Release checklist for v2$/ })
      .waitFor();
    await p.screenshot({ path: join(SHOTS, 'title-renamed-light.png') });
    await p.emulateMedia({ colorScheme: 'dark' });
    await header(p).click();
    await p.screenshot({ path: join(SHOTS, 'title-rename-dark.png') });
    await p.keyboard.press('Escape');

    // A rename elsewhere (another tab, the CLI) reaches the open page live.
    await call(p, 'RenameConversation', { conversationId: id, title: 'Renamed from the command line' });
    await header(p)
      .filter({ hasText: /^Renamed from the command line$/ })
      .waitFor();
    await listItem(p, id)
      .filter({ hasText: /^Renamed from the command line$/ })
      .waitFor();
  });

  it('searches titles on the server as you type (once typing pauses), says when nothing matches, and reaches the results by keyboard', async () => {
    const p = await open(DESKTOP, 'light');
    const titled: Record<string, string> = {};
    for (const title of ['Zebra migration plan', 'Quokka database audit', 'Second quokka check']) {
      await start(p);
      await say(p, title);
      await header(p).filter({ hasText: title }).waitFor();
      await state(p, /Ready/);
      titled[title] = openId(p);
    }
    const queries: string[] = [];
    p.on('request', (r) => {
      if (r.url().endsWith('/ListConversations')) queries.push(fromBinary(ListConversationsRequestSchema, r.postDataBuffer()!).query);
    });
    const box = p.getByRole('searchbox', { name: 'Search conversations by title' });
    await box.click();
    await p.keyboard.type('QUOKKA', { delay: 40 });
    const items = p.locator('.conversation-list li');
    await p.locator('.list-status', { hasText: '2 conversations match “QUOKKA”' }).waitFor();
    await expect(items.locator('.conv-slug').allInnerTexts()).resolves.toEqual(['Second quokka check', 'Quokka database audit']);
    // One request for the whole word: typing did not ask for each letter.
    expect(queries.filter((q) => q !== '')).toEqual(['QUOKKA']);
    await p.screenshot({ path: join(SHOTS, 'search-desktop-light.png') });

    await box.fill('no such title anywhere');
    await p.locator('.list-status', { hasText: 'No conversation has “no such title anywhere” in its title.' }).waitFor();
    await expect(items.count()).resolves.toBe(0);
    await p.screenshot({ path: join(SHOTS, 'search-empty-light.png') });

    // Keyboard: ↓ from the box to the first result, Enter opens it; Esc in the box empties it.
    await box.fill('zebra');
    await p.locator('.list-status', { hasText: '1 conversation matches “zebra”' }).waitFor();
    await box.focus();
    await p.keyboard.press('ArrowDown');
    await p.keyboard.press('Enter');
    await p.waitForURL((u) => u.pathname === `/c/${titled['Zebra migration plan']}`);
    await header(p)
      .filter({ hasText: /^Zebra migration plan$/ })
      .waitFor();
    await box.focus();
    await p.keyboard.press('Escape');
    await expect(box.inputValue()).resolves.toBe('');
    await p.locator(`.conversation-list a[data-id="${titled['Quokka database audit']}"]`).waitFor();
  });

  it("opens a sub-agent's transcript from its parent (card, result and header menu), named by its title, with the way back (desktop and phone)", async () => {
    const p = await open(DESKTOP, 'light');
    await start(p);
    const parentId = openId(p);
    // The offline model spawns one sub-agent per task of `/agents`, each running its `$ ` line.
    api.setFallback(offlineModelResponder());
    try {
      await say(p, '/agents $ echo alpha-from-sub | $ echo beta-from-sub');
      await p.locator('li.subagent').nth(1).waitFor();
      await state(p, /Ready/);
      await p.locator('li.subagent .badge-ok').nth(1).waitFor();
    } finally {
      api.setFallback(() => ({ kind: 'message', content: [{ type: 'text', text: 'Nothing scripted.' }] }));
    }
    const titles = ['$ echo alpha-from-sub', '$ echo beta-from-sub'];
    // The cards, the spawn_agents result and the header name them by title; no sub-agent id is shown.
    await expect(p.locator('li.subagent .subagent-title').allInnerTexts()).resolves.toEqual(expect.arrayContaining(titles));
    const result = p.locator('article.tool[data-tool="spawn_agents"] .tool-result');
    await result.locator('a.subagent-link').nth(1).waitFor();
    await expect(result.locator('a.subagent-link').allInnerTexts()).resolves.toEqual(titles);
    const menu = p.getByTestId('sub-agents');
    await menu.locator('summary', { hasText: '2 sub-agents' }).waitFor();
    await expect(p.locator('main').innerText()).resolves.not.toContain(`${parentId}--`);
    const parentTitle = '/agents $ echo alpha-from-sub | $ echo beta-from-sub';
    await expect(header(p).innerText()).resolves.toBe(parentTitle);
    await p.screenshot({ path: join(SHOTS, 'subagents-parent-light.png') });

    // The card opens the sub-agent's own transcript: its task, its tool run, its state, no message box.
    await p
      .locator('li.subagent', { hasText: 'alpha-from-sub' })
      .getByRole('link', { name: /Open its transcript/ })
      .click();
    await header(p)
      .filter({ hasText: /^\$ echo alpha-from-sub$/ })
      .waitFor();
    expect(openId(p)).toMatch(new RegExp(`^${parentId}--`));
    await p.locator('article.tool[data-tool="bash"] .tool-result', { hasText: 'alpha-from-sub' }).waitFor();
    await expect(p.locator('.msg-user').first().innerText()).resolves.toContain('$ echo alpha-from-sub');
    await expect(p.getByLabel('Message', { exact: true }).count()).resolves.toBe(0);
    const back = p.getByTestId('parent-link');
    await back.filter({ hasText: parentTitle }).waitFor();
    await expect(p.locator('.conv-meta').innerText()).resolves.toMatch(/^Sub-agent of \/agents \$ echo alpha-from-sub/);
    await expect(p.locator('main').innerText()).resolves.not.toContain(openId(p));
    await expect(p.title()).resolves.toBe('$ echo alpha-from-sub · Bedrock');
    await p.screenshot({ path: join(SHOTS, 'subagent-transcript-light.png') });
    await p.emulateMedia({ colorScheme: 'dark' });
    await p.screenshot({ path: join(SHOTS, 'subagent-transcript-dark.png') });
    await p.emulateMedia({ colorScheme: 'light' });

    // The link goes back; after a reload (the progress cards were live only) the header menu still lists them.
    await back.click();
    await p.waitForURL((u) => u.pathname === `/c/${parentId}`);
    await header(p).filter({ hasText: parentTitle }).waitFor();
    await p.reload();
    await menu.locator('summary').click();
    await expect(menu.getByRole('link').allInnerTexts()).resolves.toEqual(titles);
    await expect(menu.locator('.subagent-state').allInnerTexts()).resolves.toEqual(['completed', 'completed']);
    await p.screenshot({ path: join(SHOTS, 'subagents-menu-light.png') });
    await menu.getByRole('link', { name: titles[1] }).click();
    await header(p)
      .filter({ hasText: /^\$ echo beta-from-sub$/ })
      .waitFor();
    await p.locator('article.tool[data-tool="bash"] .tool-result', { hasText: 'beta-from-sub' }).waitFor();

    // On a phone (dark): the parent's menu and the sub-agent's transcript fit the screen.
    const phone = await open(PHONE, 'dark', `/c/${parentId}`);
    await header(phone).filter({ hasText: parentTitle }).waitFor();
    const phoneMenu = phone.getByTestId('sub-agents');
    await phoneMenu.locator('summary').click();
    await phone.screenshot({ path: join(SHOTS, 'subagents-menu-phone-dark.png') });
    await phoneMenu.getByRole('link', { name: titles[0] }).click();
    await header(phone)
      .filter({ hasText: /^\$ echo alpha-from-sub$/ })
      .waitFor();
    await phone.getByTestId('parent-link').filter({ hasText: parentTitle }).waitFor();
    await expect(overflow(phone)).resolves.toEqual([]);
    await phone.screenshot({ path: join(SHOTS, 'subagent-transcript-phone-dark.png') });
    await phone.getByTestId('parent-link').click();
    await header(phone).filter({ hasText: parentTitle }).waitFor();
  });

  it('ran these under the strict Content-Security-Policy, without a violation', () => {
    expect(cspViolations).toEqual([]);
  });
});
