/**
 * "Rewind to here" in a real browser (headless Chromium) against web-bff, the conversation service
 * and a real tool-runner on a loop-mounted btrfs image (real checkpoints): the diff listed, files
 * and chat rewound, refused while busy, a fork with files; on storage that cannot checkpoint the
 * panel says why and rewinds the chat alone. Needs root and btrfs-progs.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, expect, it } from '@jest/globals';
import { chromium, type Browser, type Page } from 'playwright-core';
import { StateKind, StopReason } from '@bedrock/contracts';
import { startSystem, type System } from './support/system.ts';
import { describeBtrfs as describeBtrfsIf, toolTurn } from './support/tool-turn.ts';

const HERE = dirname(fileURLToPath(import.meta.url));
const UI_DIST = resolve(HERE, '../ui/dist');

const describeBtrfs = describeBtrfsIf('ui-rewind.e2e.test.ts');

describeBtrfs('Rewind to here', () => {
  let s: System;
  let browser: Browser;
  let page: Page;

  beforeAll(async () => {
    execFileSync(process.execPath, [resolve(HERE, '../ui/build.mjs')], { stdio: 'pipe' });
    s = await startSystem({ label: 'ui_rewind', workspaceStorage: true, workspaceImage: true, bff: { http: { uiDir: UI_DIST } } });
    browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args: ['--no-sandbox', '--disable-gpu', '--no-first-run'] });
    page = await browser.newPage({ viewport: { width: 1280, height: 820 } });
    page.setDefaultTimeout(20_000);
    await page.goto(`${s.bff.httpUrl}/?token=${s.tokens.alice}`);
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await s?.close();
  }, 60_000);

  const alice = () => s.client(s.tokens.alice!);
  const message = (p: Page, sequence: bigint) => p.locator(`li.msg[data-sequence="${sequence}"]`);

  // The transcript loses the messages after the cut through the watch stream's `history_rewound`, without a reload.
  it('shows what the files rewind undoes, rewinds files and chat, and is refused while busy', async () => {
    const created = (await alice().createConversation({})).conversation!;
    const { id, cwd } = created;
    await toolTurn(s, s.tokens.alice!, id, cwd, 'printf "one\\n" > a.txt', 'first answer');
    const endOfTurn1 = (await alice().getConversation({ conversationId: id })).messages.at(-1)!.sequence;
    await toolTurn(s, s.tokens.alice!, id, cwd, 'printf "two\\n" > a.txt; printf b > b.txt', 'second answer');

    await page.goto(`${s.bff.httpUrl}/c/${id}`);
    await page.getByText('second answer').waitFor();
    const at = message(page, endOfTurn1);
    await at.getByRole('button', { name: 'Rewind to here' }).click();
    const panel = at.getByTestId('rewind-panel');
    // First: what rewinding the files would undo.
    const changes = panel.getByRole('list', { name: 'Changes a rewind of the files undoes' });
    await changes.waitFor();
    await expect(changes.locator('li[data-kind="modified"] code').textContent()).resolves.toBe('a.txt');
    await expect(changes.locator('li[data-kind="added"] code').textContent()).resolves.toBe('b.txt');
    await expect(changes.locator('li[data-kind="modified"] pre').textContent()).resolves.toMatch(/-one\n\+two/);

    await panel.getByRole('button', { name: 'Files and chat' }).click();
    await expect(panel.getByRole('status').textContent()).resolves.toMatch(
      new RegExp(
        `^Rewound\\. The files are back as they were at message ${endOfTurn1} .*\\d+ messages after this one removed from the chat\\.$`,
      ),
    );
    // The panel reads the diff again: nothing is left to undo.
    await panel.getByText('No file changed since this message: rewinding the files changes nothing.').waitFor();
    expect(readFileSync(join(cwd, 'a.txt'), 'utf8')).toBe('one\n');
    expect(existsSync(join(cwd, 'b.txt'))).toBe(false);
    // The second turn leaves the transcript without a reload (the watch stream's history_rewound).
    await page.getByText('second answer').waitFor({ state: 'detached' });
    await expect(page.getByText('first answer').count()).resolves.toBe(1);
    const shown = await page.locator('li.msg[data-sequence]').evaluateAll((els) => els.map((e) => Number(e.getAttribute('data-sequence'))));
    expect(Math.max(...shown)).toBe(Number(endOfTurn1));

    // Busy: the service's refusal, in its words.
    await alice().sendMessage({ conversationId: id, text: 'keep going' });
    await s.waitFor(
      'the LLM request',
      async () => (await alice().getConversation({ conversationId: id })).conversation!.state?.kind === StateKind.LLM_REQUESTING,
    );
    const first = message(page, 1n);
    await first.getByRole('button', { name: 'Rewind to here' }).click();
    const busyPanel = first.getByTestId('rewind-panel');
    await busyPanel.getByRole('button', { name: 'Chat only' }).click();
    await expect(busyPanel.locator('.rewind-error').textContent()).resolves.toMatch(/busy/);
    expect((await alice().getConversation({ conversationId: id })).messages.at(-1)!.sequence).toBe(endOfTurn1 + 1n);
    await alice().cancel({ conversationId: id });
  }, 180_000);

  it('forks with files: the fork opens with its own copy of the files as they were at that message', async () => {
    const created = (await alice().createConversation({})).conversation!;
    const { id, cwd } = created;
    await toolTurn(s, s.tokens.alice!, id, cwd, 'printf "one\\n" > a.txt', 'first answer');
    const endOfTurn1 = (await alice().getConversation({ conversationId: id })).messages.at(-1)!.sequence;
    await toolTurn(s, s.tokens.alice!, id, cwd, 'printf "two\\n" > a.txt; printf b > b.txt', 'second answer');

    await page.goto(`${s.bff.httpUrl}/c/${id}`);
    await page.getByText('second answer').waitFor();
    await message(page, endOfTurn1).getByRole('button', { name: 'Fork with files' }).click();
    // The fork opens: its history ends at the message, its files are those of then, in a workspace of its own.
    await page.waitForURL((url) => url.pathname.startsWith('/c/') && !url.pathname.endsWith(id));
    const forkId = decodeURIComponent(new URL(page.url()).pathname.slice(3));
    const fork = await alice().getConversation({ conversationId: forkId });
    expect(fork.conversation!.forkedFrom).toMatchObject({ conversationId: id, messageSequence: endOfTurn1 });
    expect(fork.conversation!.cwd).not.toBe(cwd);
    expect(readFileSync(join(fork.conversation!.cwd, 'a.txt'), 'utf8')).toBe('one\n');
    expect(existsSync(join(fork.conversation!.cwd, 'b.txt'))).toBe(false);
    // The source keeps its files.
    expect(readFileSync(join(cwd, 'a.txt'), 'utf8')).toBe('two\n');
    expect(existsSync(join(cwd, 'b.txt'))).toBe(true);
  }, 180_000);

  it('says why the files cannot be rewound where the storage cannot checkpoint, and rewinds the chat alone', async () => {
    const plain = await startSystem({ label: 'ui_rewind_plain', workspaceStorage: true, bff: { http: { uiDir: UI_DIST } } });
    const other = await browser.newPage({ viewport: { width: 1280, height: 820 } });
    other.setDefaultTimeout(20_000);
    try {
      const client = plain.client(plain.tokens.alice!);
      const { id } = (await client.createConversation({})).conversation!;
      for (const [question, answer] of [
        ['first question', 'first reply'],
        ['second question', 'second reply'],
      ]) {
        const before = plain.llmJobs.filter((j) => j.conversationId === id).length;
        await client.sendMessage({ conversationId: id, text: question });
        const job = await plain.waitFor('the LLM request', () => plain.llmJobs.filter((j) => j.conversationId === id)[before]);
        await plain.send(id, `llm-result/${job.requestId}`, {
          case: 'llmResponse',
          value: {
            requestId: job.requestId,
            stopReason: StopReason.END_TURN,
            content: [{ block: { case: 'text', value: { text: answer } } }],
          },
        });
        await plain.waitFor(
          'idle',
          async () => (await client.getConversation({ conversationId: id })).conversation!.state?.kind === StateKind.IDLE,
        );
      }
      await other.goto(`${plain.bff.httpUrl}/?token=${plain.tokens.alice}`);
      await other.goto(`${plain.bff.httpUrl}/c/${id}`);
      await other.getByText('second reply').waitFor();
      const at = message(other, 2n);
      await at.getByRole('button', { name: 'Rewind to here' }).click();
      const panel = at.getByTestId('rewind-panel');
      await expect(panel.locator('.rewind-no-files').textContent()).resolves.toMatch(
        /^The files cannot be rewound: .*checkpoints need the workspace root on btrfs/,
      );
      await expect(panel.getByRole('button', { name: 'Files only' }).isDisabled()).resolves.toBe(true);
      await expect(panel.getByRole('button', { name: 'Files and chat' }).isDisabled()).resolves.toBe(true);
      await panel.getByRole('button', { name: 'Chat only' }).click();
      await expect(panel.getByRole('status').textContent()).resolves.toBe('Rewound. 2 messages after this one removed from the chat.');
      await other.getByText('second reply').waitFor({ state: 'detached' });
      expect((await client.getConversation({ conversationId: id })).messages.map((m) => Number(m.sequence))).toEqual([1, 2]);
      // A turn that runs a tool: the files as at message 2 were then never captured, and fork with
      // files says why (the storage), not "never taken, or removed by retention", in the API and the UI.
      const { cwd } = (await client.getConversation({ conversationId: id })).conversation!;
      await toolTurn(plain, plain.tokens.alice!, id, cwd, 'true', 'third reply');
      await other.getByText('third reply').waitFor();
      await expect(client.forkConversation({ conversationId: id, atMessage: 2n, withFiles: true })).rejects.toThrow(
        /with its files: checkpoints need the workspace root on btrfs with quotas, and this server keeps workspaces in plain directories/,
      );
      await message(other, 2n).getByRole('button', { name: 'Fork with files' }).click();
      await other
        .getByText(/checkpoints need the workspace root on btrfs/)
        .first()
        .waitFor();
    } finally {
      await other.close();
      await plain.close();
    }
  }, 180_000);
});
