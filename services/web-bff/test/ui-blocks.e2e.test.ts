/**
 * The model's blocks in the web UI's transcript, with the page's API answered by the test (support/scripted-ui-api.ts):
 * thinking streamed and persisted, web searches and fetches with their results, citations, answers cut by the output
 * limit, paused and continued, or declined; Markdown streamed in place; the settings panel's refusal.
 */
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, jest } from '@jest/globals';
import type { Page } from 'playwright-core';
import { create } from '@bufbuild/protobuf';
import {
  ConversationSchema,
  MessageSchema,
  MessageType,
  ServerTool,
  StateKind,
  StopReason,
  ThinkingLevel,
  TokenDeltaKind,
} from '@bedrock/contracts';
import { browser, SHOTS, startUiSystem, stopUiSystem, system } from './support/ui-system.ts';
import { ScriptedApi, serverBlock, text, type EventInit, type MessageInit } from './support/scripted-ui-api.ts';

beforeAll(startUiSystem, 240_000);
afterAll(stopUiSystem);

// A real browser against a real system on a shared 2-core machine: a scenario that fails is
// run again (up to twice), with its error logged first so a flake stays visible.
jest.retryTimes(2, { logErrorsBeforeRetry: true });

describe("the model's blocks in the transcript (the page's API scripted by the test)", () => {
  let p: Page;
  let scripted: ScriptedApi;
  const idle = { kind: StateKind.IDLE };
  const base = { cwd: '/srv/app', model: 'claude-sonnet-4-6', userInitiated: true, sandboxAvailable: true };
  const conv = (
    id: string,
    more: {
      state?: { kind: StateKind; attempt?: number; maxAttempts?: number };
      thinking?: ThinkingLevel;
      serverTools?: ServerTool[];
    } = {},
  ) =>
    create(ConversationSchema, {
      id,
      slug: id,
      ...base,
      state: idle,
      thinking: ThinkingLevel.HIGH,
      serverTools: [ServerTool.WEB_SEARCH],
      ...more,
    });
  const msg = (
    id: string,
    type: MessageType,
    content: MessageInit['content'],
    more: {
      stopReason?: StopReason;
      stopExplanation?: string;
      usage?: { outputTokens?: bigint; thinkingTokens?: bigint; webSearchRequests?: bigint };
    } = {},
  ) => create(MessageSchema, { id, type, content, ...more });
  const search = (q: string) => serverBlock({ type: 'server_tool_use', id: 'srvtoolu_1', name: 'web_search', input: { query: q } });
  const A = { url: 'https://example.org/a', title: 'Source A' };
  const B = { url: 'https://example.org/b', title: 'Source B' };
  const cite = (s: { url: string; title: string }) => ({
    type: 'web_search_result_location',
    ...s,
    encrypted_index: 'eA==',
    cited_text: '…',
  });

  /** Shows conversation `id` with `events` as its watch's first answer (leaving the page first, so no earlier watch takes them). */
  async function open(id: string, events: EventInit[]): Promise<void> {
    await p.goto('about:blank');
    scripted.push(id, events);
    await p.goto(`${system.httpUrl}/c/${id}?token=scripted`);
  }

  beforeAll(async () => {
    // One conversation per test: a watch left waiting by a page that moved on must not take another test's events.
    scripted = new ScriptedApi([
      conv('blocks'),
      conv('live', { state: { kind: StateKind.LLM_REQUESTING, attempt: 1, maxAttempts: 3 } }),
      conv('settings'),
      conv('stream', { state: { kind: StateKind.LLM_REQUESTING, attempt: 1, maxAttempts: 3 } }),
    ]);
    p = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    p.setDefaultTimeout(15_000);
    await scripted.attach(p);
  });
  afterAll(async () => {
    scripted?.close();
    await p?.close();
  });

  it('shows every kind of block: thinking, web search and fetch, citations, a cut, a pause and a refusal', async () => {
    const explanation = 'The request asks for something harmful.';
    const declined = `The model declined to answer: ${explanation} Rephrase your request or send a new message.`;
    await open('blocks', [
      {
        sequence: 20n,
        kind: {
          case: 'snapshot',
          value: {
            conversation: conv('blocks'),
            messages: [
              msg('m1', MessageType.USER, [text('What is bedrock?')]),
              // Paused by the provider after its search: one answer with its continuation.
              msg(
                'm2',
                MessageType.AGENT,
                [
                  { block: { case: 'thinking', value: { thinking: 'I should search for this.', signature: 'c2ln' } } },
                  search('what is bedrock'),
                ],
                {
                  stopReason: StopReason.PAUSE_TURN,
                },
              ),
              msg(
                'm3',
                MessageType.AGENT,
                [
                  serverBlock({
                    type: 'web_search_tool_result',
                    tool_use_id: 'srvtoolu_1',
                    content: [
                      { type: 'web_search_result', ...A, encrypted_content: 'ZQ==' },
                      { type: 'web_search_result', url: 'javascript:alert(1)', title: 'Not a link', encrypted_content: 'ZQ==' },
                    ],
                  }),
                  text('Bedrock is solid rock', [cite(A)]),
                  text(' under soil and regolith.', [cite(A), cite(B)]),
                ],
                { stopReason: StopReason.END_TURN, usage: { outputTokens: 2000n, thinkingTokens: 1200n, webSearchRequests: 1n } },
              ),
              msg('m4', MessageType.USER, [text('Write a long essay.')]),
              msg(
                'm5',
                MessageType.AGENT,
                [
                  { block: { case: 'redactedThinking', value: { data: 'ZW5jcnlwdGVk' } } },
                  { block: { case: 'thinking', value: { thinking: '', signature: 'c2ln' } } },
                  text('Part one of a long essay.'),
                ],
                { stopReason: StopReason.MAX_TOKENS },
              ),
              msg('m6', MessageType.SYSTEM, [
                text('Your previous response was cut by the output limit. Continue exactly where it stopped.'),
              ]),
              msg('m7', MessageType.AGENT, [text('Part two.')], { stopReason: StopReason.END_TURN }),
              msg('m8', MessageType.USER, [text('Fetch a page.')]),
              msg(
                'm9',
                MessageType.AGENT,
                [
                  serverBlock({ type: 'server_tool_use', id: 'srvtoolu_2', name: 'web_fetch', input: { url: 'https://example.com/page' } }),
                  serverBlock({
                    type: 'web_fetch_tool_result',
                    tool_use_id: 'srvtoolu_2',
                    content: { type: 'web_fetch_tool_result_error', error_code: 'url_not_accessible' },
                  }),
                  text('The page could not be read.'),
                ],
                { stopReason: StopReason.END_TURN },
              ),
              msg('m10', MessageType.USER, [text('Do the harmful thing.')]),
              msg('m11', MessageType.AGENT, [], { stopReason: StopReason.REFUSAL, stopExplanation: explanation }),
              msg('m12', MessageType.ERROR, [text(declined)]),
            ],
          },
        },
      },
    ]);
    const agents = p.locator('li.msg-agent');
    await agents.first().waitFor();
    await expect(agents.count()).resolves.toBe(5);

    // The paused answer and its continuation are one: thinking, the search with its results, the cited text.
    const web = agents.nth(0);
    await expect(web.locator('details.thinking summary').innerText()).resolves.toBe('Thought (5 words)');
    await expect(web.locator('details.thinking').getAttribute('open')).resolves.toBeNull();
    await expect(web.locator('.server-tool-head').innerText()).resolves.toBe('Searched the web: what is bedrock');
    const results = web.locator('details.server-results');
    await expect(results.getAttribute('open')).resolves.toBeNull();
    await expect(results.locator('summary').innerText()).resolves.toBe('2 results');
    await expect(results.locator('a').evaluateAll((as) => as.map((a) => [a.textContent, a.getAttribute('href')]))).resolves.toEqual([
      ['Source A', A.url],
    ]);
    await expect(results.locator('li').nth(1).textContent()).resolves.toBe('Not a link');
    await expect(web.locator('.msg-body').innerText()).resolves.toBe('Bedrock is solid rock[1] under soil and regolith.[1][2]');
    await expect(
      web.locator('ol.sources a').evaluateAll((as) => as.map((a) => [a.textContent, a.getAttribute('href'), a.getAttribute('rel')])),
    ).resolves.toEqual([
      ['Source A', A.url, 'noopener noreferrer'],
      ['Source B', B.url, 'noopener noreferrer'],
    ]);
    await expect(web.locator('.msg-usage').innerText()).resolves.toBe('1.2k thinking tokens · 1 web search');
    await expect(web.locator('.stop-marker').isVisible()).resolves.toBe(false);
    await expect(p.locator('a[href^="javascript"]').count()).resolves.toBe(0);
    await results.locator('summary').click();
    await results.locator('a', { hasText: 'Source A' }).waitFor();

    // Cut by the output limit: the marker, the service's notice, the continuation.
    const cut = agents.nth(1);
    await expect(cut.locator('.thinking-note').allInnerTexts()).resolves.toEqual([
      '(thinking redacted by the provider)',
      '(thinking not shown)',
    ]);
    await expect(cut.locator('.stop-marker[data-stop="max-tokens"]').innerText()).resolves.toBe(
      'Cut by the output limit — continued below.',
    );
    await expect(p.locator('li[data-type="system"]').innerText()).resolves.toMatch(/^Your previous response was cut/);
    await expect(agents.nth(2).innerText()).resolves.toMatch(/Part two\./);

    // A fetch that failed says so.
    await expect(agents.nth(3).locator('.server-tool-head').innerText()).resolves.toBe('Fetched https://example.com/page');
    await expect(agents.nth(3).locator('.server-error').innerText()).resolves.toBe('Web fetch failed: the page could not be reached.');

    // The refusal: one marker, which says the error message; no separate notice repeating it.
    const refused = agents.nth(4);
    await expect(refused.locator('.stop-marker[data-stop="refusal"]').innerText()).resolves.toBe(declined);
    await expect(refused.locator('.stop-marker').getAttribute('role')).resolves.toBe('alert');
    await expect(p.locator('li.notice-error').count()).resolves.toBe(0);
    await expect(p.getByText(/declined to answer/).count()).resolves.toBe(1);
    await p.screenshot({ path: join(SHOTS, 'blocks.png'), fullPage: true });
    await refused.scrollIntoViewIfNeeded();
    await p.screenshot({ path: join(SHOTS, 'blocks-end.png') });
    await p.emulateMedia({ colorScheme: 'dark' });
    await p.screenshot({ path: join(SHOTS, 'blocks-end-dark.png') });
    await web.scrollIntoViewIfNeeded();
    await p.screenshot({ path: join(SHOTS, 'blocks-dark.png') });
    await p.emulateMedia({ colorScheme: 'light' });
  });

  it('streams thinking into a collapsed section apart from the answer text, and keeps it as the user left it', async () => {
    const delta = (deltaIndex: number, kind: TokenDeltaKind, blockIndex: number, t: string): EventInit => ({
      sequence: 5n,
      deltaIndex,
      kind: { case: 'tokenDelta', value: { requestId: 'req-1', blockIndex, text: t, kind } },
    });
    await open('live', [
      {
        sequence: 5n,
        kind: {
          case: 'snapshot',
          value: {
            conversation: conv('live', { state: { kind: StateKind.LLM_REQUESTING, attempt: 1, maxAttempts: 3 } }),
            messages: [msg('u1', MessageType.USER, [text('Think first.')])],
          },
        },
      },
      delta(1, TokenDeltaKind.THINKING, 0, 'First I consider '),
    ]);
    const live = p.locator('li.msg-streaming');
    const details = live.locator('details.thinking-live');
    await details.waitFor();
    await expect(details.getAttribute('open')).resolves.toBeNull();
    await expect(details.locator('summary').innerText()).resolves.toBe('Thinking…');
    await details.locator('summary').click();
    await expect(details.locator('.thinking-text').textContent()).resolves.toBe('First I consider ');
    // More thinking and the start of the answer (an older gateway's UNSPECIFIED kind is answer text).
    scripted.push('live', [
      delta(2, TokenDeltaKind.THINKING, 0, 'the question.'),
      delta(3, TokenDeltaKind.TEXT, 1, 'The answer '),
      delta(4, TokenDeltaKind.UNSPECIFIED, 1, 'is 42.'),
    ]);
    await live.locator('.msg-body', { hasText: 'The answer is 42.' }).waitFor();
    await expect(details.locator('.thinking-text').innerText()).resolves.toBe('First I consider the question.');
    await expect(details.getAttribute('open')).resolves.toBe('');
    await expect(live.locator('.msg-body').innerText()).resolves.toBe('The answer is 42.');
    await p.screenshot({ path: join(SHOTS, 'thinking-live.png') });
  });

  it('streams Markdown without re-rendering what is already written: finished blocks keep their DOM', async () => {
    const delta = (deltaIndex: number, t: string): EventInit => ({
      sequence: 3n,
      deltaIndex,
      kind: { case: 'tokenDelta', value: { requestId: 'req-s', blockIndex: 0, text: t, kind: TokenDeltaKind.TEXT } },
    });
    await open('stream', [
      {
        sequence: 3n,
        kind: {
          case: 'snapshot',
          value: {
            conversation: conv('stream', { state: { kind: StateKind.LLM_REQUESTING, attempt: 1, maxAttempts: 3 } }),
            messages: [msg('s1', MessageType.USER, [text('Explain.')])],
          },
        },
      },
      delta(1, '# Title\n\nThe first paragraph is complete.\n\nThe second one is '),
    ]);
    const live = p.locator('li.msg-streaming .msg-body');
    await live.locator('p', { hasText: 'The second one is' }).waitFor();
    // Mark the finished blocks' elements; later deltas must leave these very nodes in place.
    await p.evaluate(`document.querySelectorAll('li.msg-streaming .md').forEach((el, i) => { el.dataset.mark = String(i); })`);
    // What finished by one delta is one block (the heading and the first paragraph), then the tail.
    await expect(live.locator('.md').count()).resolves.toBe(2);
    scripted.push('stream', [delta(2, 'still growing.\n\n- one'), delta(3, '\n- two\n\n```bash\necho hi\n```\n')]);
    await live.locator('.code-block code span', { hasText: 'echo' }).waitFor();
    const blocks = await live
      .locator('.md')
      .evaluateAll((els) => els.map((el) => [el.getAttribute('data-mark') ?? '', el.textContent?.trim()]));
    expect(blocks[0]![0]).toBe('0');
    expect(blocks[0]![1]).toMatch(/^Title\s+The first paragraph is complete\.$/);
    await expect(live.locator('h1').innerText()).resolves.toBe('Title');
    await expect(live.locator('ul li').allInnerTexts()).resolves.toEqual(['one', 'two']);
    await expect(live.innerText()).resolves.toContain('The second one is still growing.');
    await p.screenshot({ path: join(SHOTS, 'streaming-markdown.png') });
  });

  it("changes thinking and web tools from the header, showing the service's refusal as it says it", async () => {
    await open('settings', [{ sequence: 1n, kind: { case: 'snapshot', value: { conversation: conv('settings'), messages: [] } } }]);
    const settings = p.getByTestId('settings');
    await expect(settings.locator('summary').innerText()).resolves.toBe('Thinking: high · Web search');
    const refusal = 'server_tools: web_fetch is not allowed by this deployment (BEDROCK_SERVER_TOOLS).';
    scripted.settingsCalls.length = 0;
    const current = { thinking: ThinkingLevel.HIGH, serverTools: [ServerTool.WEB_SEARCH] };
    scripted.settings = (req) => {
      if (req.serverTools?.tools.includes(ServerTool.WEB_FETCH)) return { code: 'invalid_argument', message: refusal };
      if (req.thinking) current.thinking = req.thinking;
      if (req.serverTools) current.serverTools = req.serverTools.tools;
      return { conversation: conv('settings', current) };
    };
    await settings.locator('summary').click();
    await settings.getByLabel('Web fetch').check();
    await settings.getByRole('button', { name: 'Save' }).click();
    await expect(settings.getByRole('alert').innerText()).resolves.toBe(refusal);
    await p.screenshot({ path: join(SHOTS, 'settings-error.png') });
    // Only what changed is sent: thinking alone leaves the tool list out (unchanged).
    await settings.getByLabel('Web fetch').uncheck();
    await settings.getByLabel('Thinking').selectOption({ label: 'Off' });
    await settings.getByRole('button', { name: 'Save' }).click();
    await settings.locator('summary', { hasText: 'Thinking: off · Web search' }).waitFor();
    expect(scripted.settingsCalls.map((r) => [r.conversationId, r.thinking, r.serverTools?.tools])).toEqual([
      ['settings', ThinkingLevel.UNSPECIFIED, [ServerTool.WEB_SEARCH, ServerTool.WEB_FETCH]],
      ['settings', ThinkingLevel.OFF, undefined],
    ]);
    // Turning the last web tool off sends an empty selection (set, not left out).
    await settings.locator('summary').click();
    await settings.getByLabel('Web search').uncheck();
    await settings.getByRole('button', { name: 'Save' }).click();
    await settings.locator('summary', { hasText: 'Thinking: off · no web tools' }).waitFor();
    expect(scripted.settingsCalls.at(-1)!.serverTools?.tools).toEqual([]);
  });
});
