/**
 * The web UI in headless Chromium against a whole system (support/ui-system.ts): the tool run, cancel, a mode upgrade
 * and its diff, a retry notice, images, the context warning, errors, thinking, a refusal, settings, web search, sign-in.
 * More in ui-screens, ui-navigation and ui-blocks (.e2e.test.ts); screenshots go to test-results/screenshots.
 */
import { afterAll, beforeAll, describe, expect, it, jest } from '@jest/globals';
import { fromBinary } from '@bufbuild/protobuf';
import { SendMessageRequestSchema } from '@bedrock/contracts';
import {
  api,
  cspViolations,
  newConversation,
  page,
  send,
  shot,
  startUiSystem,
  stateLine,
  stopUiSystem,
  system,
  waitForStateLine,
} from './support/ui-system.ts';

/** A 1×1 PNG. */
const PIXEL_PNG = Buffer.from('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==', 'base64');

beforeAll(startUiSystem, 240_000);
afterAll(stopUiSystem);

// A real browser against a real system on a shared 2-core machine: a scenario that fails is
// run again (up to twice), with its error logged first so a flake stays visible.
jest.retryTimes(2, { logErrorsBeforeRetry: true });

describe('the web UI', () => {
  it('signs in from the printed link: the token leaves the address bar and is kept', async () => {
    await page.getByRole('heading', { name: 'New conversation' }).waitFor();
    expect(new URL(page.url()).searchParams.has('token')).toBe(false);
    expect(await page.evaluate("localStorage.getItem('bedrock.token')")).toBe(system.token);
  });

  it('sends a message and shows the tool run with its output', async () => {
    await newConversation();
    await expect(page.getByTestId('mode-line').innerText()).resolves.toMatch(/Restricted|Sandbox unavailable/);
    api.enqueue(
      {
        kind: 'message',
        content: [
          { type: 'text', text: 'Let me look at the directory.' },
          { type: 'tool_use', name: 'bash', input: { command: 'echo hello-from-bash; echo second line' } },
        ],
      },
      { kind: 'message', content: [{ type: 'text', text: 'The command printed two lines.' }] },
    );
    await send('What does echo print?');

    const card = page.locator('article.tool[data-tool="bash"]');
    await card.locator('.tool-summary', { hasText: '$ echo hello-from-bash; echo second line' }).waitFor();
    await card.locator('.tool-result pre', { hasText: 'hello-from-bash' }).waitFor();
    await expect(card.getAttribute('data-status')).resolves.toBe('ok');
    await page.getByText('The command printed two lines.').waitFor();
    await waitForStateLine(/Ready/);
    await expect(page.locator('.msg-user').innerText()).resolves.toContain('What does echo print?');
    // The list shows the conversation as the current one.
    await expect(page.locator('.conversation-list a[aria-current="page"]').count()).resolves.toBe(1);
    await shot('tool-run');
    await page.emulateMedia({ colorScheme: 'dark' });
    await shot('tool-run-dark');
    await page.emulateMedia({ colorScheme: 'light' });
  });

  it('a send whose answer is lost is retried with the same request id: the message is stored and shown once', async () => {
    await newConversation();
    api.enqueue({ kind: 'message', content: [{ type: 'text', text: 'Answered once.' }] });
    const bodies: Buffer[] = [];
    let lost = false;
    const route = '**/bedrock.v1.ConversationService/SendMessage';
    await page.route(route, async (r) => {
      bodies.push(r.request().postDataBuffer() ?? Buffer.alloc(0));
      if (lost) return r.continue();
      lost = true;
      // The request reaches the server (sent from here, as the browser sent it), which saves the
      // message; its answer is lost on the way back.
      const req = r.request();
      await fetch(req.url(), { method: 'POST', headers: await req.allHeaders(), body: req.postDataBuffer() ?? undefined });
      await r.abort('connectionreset');
    });
    try {
      await send('Only once, please.');
      // The box empties at once; once the retry is answered (with the first outcome) it stays
      // empty: a send that failed would put the message back into it.
      const input = page.getByLabel('Message', { exact: true });
      for (let i = 0; i < 300 && bodies.length < 2; i++) await new Promise((r) => setTimeout(r, 50));
      await page.locator('.alert').waitFor({ state: 'detached' });
      await expect(input.inputValue()).resolves.toBe('');
      await page.getByText('Answered once.').waitFor();
      await waitForStateLine(/Ready/);
    } finally {
      await page.unroute(route);
    }
    const ids = bodies.map((b) => fromBinary(SendMessageRequestSchema, b).requestId);
    expect(ids).toHaveLength(2);
    expect(ids[0]).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(ids[1]).toBe(ids[0]);
    await expect(page.locator('.msg-user', { hasText: 'Only once, please.' }).count()).resolves.toBe(1);
    // The retry succeeded: no error is left.
    await expect(page.locator('.alert').isVisible()).resolves.toBe(false);
    // The server's history agrees (a fresh load of the page).
    await page.reload();
    await page.getByText('Answered once.').waitFor();
    await expect(page.locator('.msg-user', { hasText: 'Only once, please.' }).count()).resolves.toBe(1);
  });

  it('cancels a running tool: back to idle with a synthetic "Cancelled by user" result', async () => {
    await newConversation();
    api.enqueue({ kind: 'message', content: [{ type: 'tool_use', name: 'bash', input: { command: 'echo started; sleep 30' } }] });
    await send('Wait for a while.');
    await waitForStateLine(/Running tool 1 of 1: bash/);
    await page.locator('article.tool[data-status="running"]').waitFor();
    // The live output (tool_output events) shows while the command still runs.
    await page.locator('article.tool .tool-live', { hasText: 'started' }).waitFor();
    await shot('cancel-running');
    const clicked = Date.now();
    await page.getByRole('button', { name: 'Cancel', exact: true }).click();
    await waitForStateLine(/Ready/);
    const card = page.locator('article.tool[data-tool="bash"]');
    await card.locator('.tool-result', { hasText: 'Cancelled by user' }).waitFor();
    await expect(card.getAttribute('data-status')).resolves.toBe('cancelled');
    expect(Date.now() - clicked).toBeLessThan(10_000);
    await expect(page.getByRole('button', { name: 'Cancel', exact: true }).isVisible()).resolves.toBe(false);
    await expect(page.getByRole('button', { name: 'Send' }).isEnabled()).resolves.toBe(true);
    await shot('cancelled');
  });

  it('asks for an upgrade in a dialog; approving switches the mode line to Unrestricted and the patch diff shows', async () => {
    await newConversation();
    const modeText = await page.getByTestId('mode-line').innerText();
    // Approving needs Restricted mode, which needs the kernel sandbox on this machine.
    if (!/Restricted/.test(modeText))
      throw new Error(`this machine has no working sandbox, so no Restricted mode to upgrade from (mode line: ${modeText})`);
    expect(modeText).toMatch(/Restricted.*read-only, sandboxed/s);
    const reason = 'I need to write the fix into notes.txt.';
    api.enqueue(
      { kind: 'message', content: [{ type: 'tool_use', name: 'request_mode_upgrade', input: { reason } }] },
      {
        kind: 'message',
        content: [
          {
            type: 'tool_use',
            name: 'patch',
            input: { path: 'notes.txt', patches: [{ operation: 'overwrite', new_text: 'first line\nsecond line\n' }] },
          },
        ],
      },
      { kind: 'message', content: [{ type: 'text', text: 'I wrote notes.txt.' }] },
    );
    await send('Please fix it.');
    const dialog = page.getByRole('dialog', { name: 'Allow Unrestricted mode?' });
    await dialog.waitFor();
    await expect(dialog.innerText()).resolves.toContain(reason);
    await waitForStateLine(/Waiting for your approval/);
    // The message box says so too (not "the agent is working").
    await expect(page.locator('#composer-hint').innerText()).resolves.toMatch(/^Waiting for your approval/);
    await shot('upgrade-dialog');
    // Escape closes the dialog without answering; the banner brings it back.
    await page.keyboard.press('Escape');
    await dialog.waitFor({ state: 'hidden' });
    await page.getByRole('button', { name: 'Review request' }).click();
    await dialog.waitFor();
    await dialog.getByRole('button', { name: 'Approve' }).click();

    await page.getByTestId('mode-line').filter({ hasText: 'Unrestricted' }).waitFor();
    await page.getByText('I wrote notes.txt.').waitFor();
    await waitForStateLine(/Ready/);
    const diff = page.locator('article.tool[data-tool="patch"] .diff');
    await diff.locator('.diff-add', { hasText: '+first line' }).waitFor();
    await expect(page.locator('[data-type="system"]').innerText()).resolves.toMatch(/Unrestricted/);
    await expect(page.getByRole('button', { name: 'Switch to Restricted' }).isVisible()).resolves.toBe(true);
    await shot('upgrade-approved');

    // The downgrade button goes back to Restricted at once.
    await page.getByRole('button', { name: 'Switch to Restricted' }).click();
    await page.getByTestId('mode-line').filter({ hasText: 'read-only, sandboxed' }).waitFor();
  });

  it('shows a retry notice with its countdown, then the answer', async () => {
    await newConversation();
    api.enqueue(
      { kind: 'error', status: 529, errorType: 'overloaded_error', message: 'Overloaded' },
      { kind: 'message', content: [{ type: 'text', text: 'Answered on the second attempt.' }] },
    );
    await send('Hello?');
    await waitForStateLine(/Retrying: attempt 2 of 3 in \ds/);
    await expect(stateLine()).resolves.toMatch(/server error/);
    await page.locator('.notice-warn', { hasText: 'Retrying: attempt 2 of 3' }).waitFor();
    await shot('retry');
    await page.getByText('Answered on the second attempt.').waitFor();
    await waitForStateLine(/Ready/);
  });

  it('attaches images (refusing other files) and shows them in the message', async () => {
    await newConversation();
    api.enqueue({ kind: 'message', content: [{ type: 'text', text: 'I see a single pixel.' }] });
    const file = page.locator('input[type="file"]');
    await file.setInputFiles({ name: 'notes.txt', mimeType: 'text/plain', buffer: Buffer.from('hi') });
    await page.getByRole('alert').filter({ hasText: 'notes.txt: only PNG, JPEG, GIF and WebP images can be attached' }).waitFor();
    await file.setInputFiles({ name: 'pixel.png', mimeType: 'image/png', buffer: PIXEL_PNG });
    await page.locator('.attachments img[alt="pixel.png"]').waitFor();
    await send('What is in this image?');
    await page.locator('.msg-user img.thumb').waitFor();
    await page.getByText('I see a single pixel.').waitFor();
    await expect(page.locator('.attachments img').count()).resolves.toBe(0);
    const sent = api.requests.at(-1)!.body!.messages.at(-1)!;
    expect(JSON.stringify(sent.content)).toContain('"type":"image"');
  });

  it('warns at 80% context, summarises on request, and starts a new conversation from the summary', async () => {
    await newConversation();
    // claude-sonnet-4-6 has a 1M window: 850k tokens is 85%, under the 90% automatic threshold.
    api.enqueue(
      { kind: 'message', content: [{ type: 'text', text: 'That was a long read.' }], usage: { input_tokens: 850_000 } },
      { kind: 'message', content: [{ type: 'text', text: 'Summary: we read the code; next, fix the parser.' }] },
    );
    await send('Read everything.');
    await page.getByText('That was a long read.').waitFor();
    await page.getByTestId('context-usage').filter({ hasText: 'nearly full' }).waitFor();
    await page.locator('.notice-warn', { hasText: '85% full' }).waitFor();
    await shot('context-warning');
    await page.getByRole('button', { name: 'Summarise and continue' }).click();
    await page.locator('[data-type="continuation"]', { hasText: 'Summary: we read the code; next, fix the parser.' }).waitFor();
    await waitForStateLine(/read-only/);
    await expect(page.getByLabel('Message', { exact: true }).isVisible()).resolves.toBe(false);
    await shot('continuation');
    const before = page.url();
    await page.locator('.exhausted').getByRole('button', { name: 'Start a new conversation from this' }).click();
    await page.waitForURL((u) => u.href !== before);
    await waitForStateLine(/Ready/);
    await page.locator('.conv-meta').filter({ hasText: 'continued from' }).waitFor();
  });

  it('shows a failed request as an error with its kind, and recovers on the next message', async () => {
    await newConversation();
    api.enqueue(
      { kind: 'error', status: 400, errorType: 'invalid_request_error', message: 'messages: text content blocks must be non-empty' },
      { kind: 'message', content: [{ type: 'text', text: 'Back on track.' }] },
    );
    await send('Break, please.');
    await waitForStateLine(/^Error \(invalid request\): .*non-empty/);
    await page.locator('[data-type="error"]', { hasText: 'non-empty' }).waitFor();
    await shot('error');
    await send('Try again.');
    await page.getByText('Back on track.').waitFor();
    await waitForStateLine(/Ready/);
  });

  it("shows the model's thinking collapsed, apart from the answer", async () => {
    await newConversation();
    const thought = 'The user asks for the capital of France. That is Paris.';
    // Slow enough to see the thinking stream in before the answer.
    api.enqueue({
      kind: 'message',
      content: [
        { type: 'thinking', thinking: thought },
        { type: 'text', text: 'The capital of France is Paris.' },
      ],
      eventDelayMs: 60,
      chunkChars: 8,
    });
    await send('What is the capital of France?');
    const live = page.locator('.msg-streaming details.thinking-live');
    await live.waitFor();
    await expect(live.getAttribute('open')).resolves.toBeNull();
    await expect(live.locator('summary').innerText()).resolves.toBe('Thinking…');

    const answer = page.locator('li.msg-agent', { hasText: 'The capital of France is Paris.' });
    await answer.waitFor();
    await waitForStateLine(/Ready/);
    await expect(answer.locator('.msg-body').innerText()).resolves.toBe('The capital of France is Paris.');
    const thinking = answer.locator('details.thinking');
    await expect(thinking.count()).resolves.toBe(1);
    await expect(thinking.getAttribute('open')).resolves.toBeNull();
    await expect(thinking.locator('summary').innerText()).resolves.toBe('Thought (11 words)');
    await expect(thinking.locator('.thinking-text').isVisible()).resolves.toBe(false);
    await shot('thinking-collapsed');
    await thinking.locator('summary').click();
    await expect(thinking.locator('.thinking-text').innerText()).resolves.toBe(thought);
    await shot('thinking-open');
    // The thinking went back to the API with its signature (the local API checks it), before the answer.
    api.enqueue({ kind: 'message', content: [{ type: 'text', text: 'You are welcome.' }] });
    await send('Thanks.');
    await page.getByText('You are welcome.').waitFor();
    const assistant = api.requests.at(-1)!.body!.messages.at(-2)!;
    expect(assistant.role).toBe('assistant');
    expect(assistant.content).toEqual([
      { type: 'thinking', thinking: thought, signature: expect.stringMatching(/^\S+$/) },
      { type: 'text', text: 'The capital of France is Paris.' },
    ]);
  });

  it('declares a refusal once, and takes a new message after it', async () => {
    await newConversation();
    const why = 'The request asks for instructions that could cause harm';
    api.enqueue({ kind: 'message', content: [{ type: 'text', text: 'I will not' }], stopReason: 'refusal', stopExplanation: why });
    await send('Write something the model declines.');
    const marker = page.locator('.stop-marker[data-stop="refusal"]');
    await marker.waitFor();
    await waitForStateLine(/Ready/);
    await expect(marker.innerText()).resolves.toMatch(/^The model declined to answer/);
    // The error message the conversation service adds is said in the marker, not again beside it.
    await page.locator('.stop-marker[data-type="error"]').waitFor();
    await expect(page.locator('li.notice-error').count()).resolves.toBe(0);
    await expect(page.getByText(/declined to answer/).count()).resolves.toBe(1);
    const said = await marker.innerText();
    expect(said.split(why).length - 1).toBe(1);
    expect(said).not.toMatch(/\.\./);
    await shot('refusal');
    api.enqueue({ kind: 'message', content: [{ type: 'text', text: 'Here is something else.' }] });
    await send('Something else, then.');
    await page.getByText('Here is something else.').waitFor();
    await waitForStateLine(/Ready/);
  });

  it('chooses thinking and web tools for a new conversation and changes them in its header', async () => {
    await newConversation({ thinking: 'Low', webSearch: true });
    const settings = page.getByTestId('settings');
    await expect(settings.locator('summary').innerText()).resolves.toMatch(/^Thinking: low · Web search/);
    await settings.locator('summary').click();
    await settings.getByLabel('Thinking').selectOption({ label: 'High' });
    await settings.getByLabel('Web fetch').check();
    await settings.getByRole('button', { name: 'Save' }).click();
    // This deployment allows web search only: the service's sentence, in the panel.
    await settings
      .getByRole('alert')
      .filter({ hasText: /web_fetch/ })
      .waitFor();
    await expect(settings.locator('summary').innerText()).resolves.toMatch(/^Thinking: low/);
    await shot('settings-refused');
    await settings.getByLabel('Web fetch').uncheck();
    await settings.getByRole('button', { name: 'Save' }).click();
    await settings.locator('summary', { hasText: /^Thinking: high · Web search/ }).waitFor();
    await expect(settings.locator('details').getAttribute('open')).resolves.toBeNull();
    // The next request to the model has them.
    api.enqueue({ kind: 'message', content: [{ type: 'text', text: 'Settings noted.' }] });
    await send('Go on.');
    await page.getByText('Settings noted.').waitFor();
    const body = api.requests.at(-1)!.body!;
    expect(body.thinking).toBeDefined();
    expect(body.output_config?.effort).toBe('high');
    expect(body.tools?.map((t) => t.name)).toContain('web_search');
    expect(body.tools?.map((t) => t.name)).not.toContain('web_fetch');
  });

  it('shows a web search with its results and the sources the answer cites', async () => {
    await newConversation({ webSearch: true });
    const source = { url: 'https://en.wikipedia.org/wiki/Bedrock', title: 'Bedrock - Wikipedia' };
    api.enqueue({
      kind: 'message',
      content: [
        {
          type: 'raw',
          start: { type: 'server_tool_use', id: 'srvtoolu_01', name: 'web_search', input: {} },
          deltas: [{ type: 'input_json_delta', partial_json: '{"query":"what is bedrock"}' }],
        },
        {
          type: 'raw',
          start: {
            type: 'web_search_tool_result',
            tool_use_id: 'srvtoolu_01',
            content: [{ type: 'web_search_result', ...source, encrypted_content: 'ZW5j', page_age: null }],
          },
        },
        {
          type: 'raw',
          start: { type: 'text', text: '', citations: [] },
          deltas: [
            {
              type: 'citations_delta',
              citation: { type: 'web_search_result_location', ...source, encrypted_index: 'aWR4', cited_text: 'Bedrock is the solid rock' },
            },
            { type: 'text_delta', text: 'Bedrock is the solid rock under the soil.' },
          ],
        },
      ],
    });
    await send('What is bedrock?');
    const answer = page.locator('li.msg-agent', { hasText: 'Bedrock is the solid rock under the soil.' });
    await answer.waitFor();
    await expect(answer.locator('.server-tool-head').innerText()).resolves.toBe('Searched the web: what is bedrock');
    const results = answer.locator('details.server-results');
    await expect(results.getAttribute('open')).resolves.toBeNull();
    await expect(results.locator('summary').innerText()).resolves.toBe('1 result');
    await expect(answer.locator('sup.cite a').getAttribute('href')).resolves.toBe(source.url);
    await expect(answer.locator('ol.sources a').innerText()).resolves.toBe(source.title);
    await waitForStateLine(/Ready/);
    await shot('web-search');
  });

  it('sends a refused token back to the sign-in form, which takes a pasted token', async () => {
    await page.evaluate("localStorage.setItem('bedrock.token', 'not-the-token')");
    await page.reload();
    const form = page.locator('form.sign-in');
    // Generous: right after a cold start the first refused call can take a while. A failure
    // leaves a screenshot of what the page showed instead.
    // Said as information (a status, in the page's text colour), not as an error.
    await form
      .getByRole('status')
      .filter({ hasText: /^Signed out: .*bearer token/ })
      .waitFor({ timeout: 30_000 })
      .catch(async (err: unknown) => {
        await shot('sign-in-failure');
        throw err;
      });
    await shot('sign-in');
    await form.getByLabel('Token').fill(system.token);
    await form.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { name: 'New conversation' }).waitFor();
    // The list loads after sign-in: wait for it (the earlier tests' conversations are there).
    await page.locator('.conversation-list li').first().waitFor();
    await expect(page.locator('.conversation-list li').count()).resolves.toBeGreaterThan(0);
  }, 90_000);

  it('ran every scenario above under the strict Content-Security-Policy, without a violation', async () => {
    const res = await page.request.get(`${system.httpUrl}/`);
    expect(res.headers()['content-security-policy']).toMatch(/default-src 'self'.*frame-ancestors 'none'/);
    expect(cspViolations).toEqual([]);
  });
});
