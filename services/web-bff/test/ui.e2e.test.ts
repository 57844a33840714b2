/**
 * The web UI in headless Chromium (Debian's, driven by playwright-core) against a whole
 * system started in-process (`startEmbedded`) with a scripted local Messages API: send a
 * message and see the tool run, cancel a running tool, approve a mode upgrade (and see the
 * patch diff that follows), see a retry notice, see the model's thinking collapsed and a
 * refusal declared, choose thinking and web tools. A second part scripts the API itself (the
 * page's calls answered by the test) to show every kind of block the model sends: thinking
 * streamed and persisted, web searches and fetches with their results, citations, answers cut
 * by the output limit, paused and continued, or declined. A third part is what a person sees
 * on a 1280×800 desktop and a 390×844 phone, light and dark: Markdown and highlighted code,
 * the phone layout (the drawer, the transcript's share, no sideways scrolling at 360 px), the
 * context figure at its peak, the queue, Esc, the not-found page, titles (from the first
 * message, renamed in place, kept after a reload, changed live), the title search, and a
 * sub-agent's transcript opened from its parent and the way back. Screenshots go to
 * test-results/screenshots.
 */
import { execFileSync } from 'node:child_process';
import { chownSync, existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createTestDatabase } from '@bedrock/testkit/database';
import { afterAll, beforeAll, describe, expect, it, jest } from '@jest/globals';
import { chromium, type Browser, type Page } from 'playwright-core';
import { create, fromBinary, toBinary, type MessageInitShape } from '@bufbuild/protobuf';
import {
  ConversationSchema,
  ForkConversationRequestSchema,
  ListConversationsRequestSchema,
  ListConversationsResponseSchema,
  MessageSchema,
  MessageType,
  SendMessageRequestSchema,
  ServerTool,
  StateKind,
  StopReason,
  ThinkingLevel,
  TokenDeltaKind,
  UpdateConversationSettingsRequestSchema,
  UpdateConversationSettingsResponseSchema,
  WatchConversationRequestSchema,
  WatchConversationResponseSchema,
  type ConversationEventSchema,
  type UpdateConversationSettingsRequest,
} from '@bedrock/contracts';
import { startEmbedded, type RunningEmbedded } from '@bedrock/embedded';
import { offlineModelResponder, startMessagesApiServer, type MessagesApiServer } from '@bedrock/offline-model';
import { envelope } from '@bedrock/testkit/raw-rpc';

const CHROMIUM = '/usr/bin/chromium';
/** This folder (import.meta.dirname needs Node 20.11; the engines field allows 20.9). */
const HERE = dirname(fileURLToPath(import.meta.url));
const REPO = resolve(HERE, '../../..');
const UI_DIST = resolve(HERE, '../ui/dist');
const SHOTS = join(REPO, 'test-results', 'screenshots');
/** Backoff before the 2nd attempt: long enough to see and photograph the countdown. */
const RETRY_BASE = '3s';
/** A 1×1 PNG. */
const PIXEL_PNG = Buffer.from('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==', 'base64');

let api: MessagesApiServer;
let system: RunningEmbedded;
let browser: Browser;
let page: Page;
let dataDir: string;
let workDir: string;
let database: { url: string; drop(): Promise<void> } | undefined;
/** What the browser reported against the page's Content-Security-Policy (web-bff sends a strict one). */
const cspViolations: string[] = [];

/**
 * A fresh database on the local PostgreSQL server when one answers (`make test` starts it):
 * the embedded PGlite's first start (initdb in WebAssembly) takes 30 s or more on a busy
 * machine. Without a server the test runs on PGlite all the same, only slower.
 */
async function freshDatabase(): Promise<typeof database> {
  return createTestDatabase('ui').catch(() => undefined);
}

beforeAll(async () => {
  if (!existsSync(CHROMIUM)) execFileSync('bash', [join(REPO, 'scripts/ensure-chromium.sh')], { stdio: 'inherit', timeout: 600_000 });
  // Test the current sources, not a stale build.
  execFileSync(process.execPath, [resolve(HERE, '../ui/build.mjs')], { stdio: 'pipe' });
  mkdirSync(SHOTS, { recursive: true });
  dataDir = mkdtempSync(join(tmpdir(), 'bedrock-ui-data-'));
  workDir = mkdtempSync(join(tmpdir(), 'bedrock-ui-work-'));
  // A project belongs to a person; tools run as its owner (root-owned: as nobody, who could not enter it).
  if (process.getuid?.() === 0) chownSync(workDir, 65534, 65534);
  // Unscripted requests (none expected) get a plain answer rather than an error.
  database = await freshDatabase();
  api = await startMessagesApiServer({ fallback: () => ({ kind: 'message', content: [{ type: 'text', text: 'Nothing scripted.' }] }) });
  system = await startEmbedded({
    env: {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      BEDROCK_DATA_DIR: dataDir,
      BEDROCK_PORT: '0',
      BEDROCK_GRPC_PORT: '0',
      BEDROCK_UI_DIR: UI_DIST,
      ANTHROPIC_API_KEY: 'test',
      ANTHROPIC_BASE_URL: api.url,
      BEDROCK_LLM_RETRY_BASE: RETRY_BASE,
      BEDROCK_DEFAULT_MODEL: 'claude-sonnet-4-6',
      // Web search may be turned on per conversation; web fetch is not allowed here.
      BEDROCK_SERVER_TOOLS: 'web_search',
      LOG_LEVEL: 'error',
      ...(database ? { DATABASE_URL: database.url } : {}),
    },
  });
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      '--no-first-run',
    ],
  });
  page = await browser.newPage({ viewport: { width: 1280, height: 820 } });
  page.setDefaultTimeout(15_000);
  page.on('console', (message) => {
    if (/Content Security Policy|Refused to/i.test(message.text())) cspViolations.push(message.text());
  });
  await page.goto(`${system.httpUrl}/?token=${system.token}`);
}, 240_000);

afterAll(async () => {
  await browser?.close();
  await system?.stop();
  await api?.close();
  await database?.drop();
  for (const dir of [dataDir, workDir]) if (dir) rmSync(dir, { recursive: true, force: true });
});

async function shot(name: string): Promise<void> {
  await page.screenshot({ path: join(SHOTS, `${name}.png`) });
}

/** Creates a conversation through the form (thinking and web tools as given, else the defaults) and waits until its view is live. */
async function newConversation(settings: { thinking?: string; webSearch?: boolean } = {}): Promise<void> {
  const before = page.url();
  await page.getByLabel('Host directory (single-user installs)').fill(workDir);
  await page.locator('#new-thinking').selectOption({ label: settings.thinking ?? 'Default' });
  await page.locator('#new-web_search').setChecked(settings.webSearch ?? false);
  await page.getByRole('button', { name: 'Start' }).click();
  await page.waitForURL((u) => u.href !== before && /\/c\/[^/]+$/.test(u.pathname));
  await waitForStateLine(/Ready/);
}

function stateLine(): Promise<string> {
  return page.getByTestId('state-line').innerText();
}

async function waitForStateLine(re: RegExp): Promise<void> {
  await page.getByTestId('state-line').filter({ hasText: re }).waitFor();
}

async function send(text: string): Promise<void> {
  await page.getByLabel('Message', { exact: true }).fill(text);
  await page.keyboard.press('Enter');
}

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

type Scheme = 'light' | 'dark';
const DESKTOP = { width: 1280, height: 800 };
const PHONE = { width: 390, height: 844 };

/**
 * What a person sees, on a desktop (1280×800) and a phone (390×844), light and dark: Markdown,
 * highlighted code, the layout, the context figure, the queue, the keys, the not-found page,
 * titles, search and sub-agents.
 * Each test opens its own browser context (viewport and colour scheme) signed in from the link.
 */
describe('the web UI as a person sees it, on a desktop and a phone', () => {
  const pages: Page[] = [];

  async function open(viewport: { width: number; height: number }, colorScheme: Scheme, path = '/'): Promise<Page> {
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

  afterAll(async () => {
    for (const p of pages) await p.context().close();
  });

  const phoneLayout = (p: Page) => p.evaluate<boolean>('window.innerWidth <= 760');

  /** Starts a conversation from the form (on a phone, from the drawer, which closes after). */
  async function start(p: Page): Promise<void> {
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

  async function say(p: Page, text: string): Promise<void> {
    await p.getByLabel('Message', { exact: true }).fill(text);
    await p.keyboard.press('Enter');
  }

  const state = (p: Page, re: RegExp) => p.getByTestId('state-line').filter({ hasText: re }).waitFor();

  /** Widths that stick out of the page or of the conversation's own parts (none may scroll sideways). */
  const overflow = (p: Page) =>
    p.evaluate<string[]>(`['html', '.conv-header', '.transcript', '.composer', '.topbar']
      .map((sel) => [sel, document.querySelector(sel)])
      .filter(([, el]) => el && el.scrollWidth > el.clientWidth + 1)
      .map(([sel, el]) => sel + ': ' + el.scrollWidth + ' > ' + el.clientWidth)`);

  const MARKDOWN = [
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

  /**
   * Uses up responses an earlier attempt of a scenario scripted but never asked for (it failed
   * half-way), so a retry starts from its own script rather than from the leftovers.
   */
  async function dropLeftovers(): Promise<void> {
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
  const waiting = (p: Page) => p.getByTestId('queue').locator('li').allInnerTexts();

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
    await p.screenshot({ path: join(SHOTS, 'phone-running-dark.png') });
    const pressed = Date.now();
    await p.keyboard.press('Escape');
    await state(p, /Ready/);
    expect(Date.now() - pressed).toBeLessThan(10_000);
    await p.locator('article.tool[data-status="cancelled"] .tool-result', { hasText: 'Cancelled by user' }).waitFor();
    await p.screenshot({ path: join(SHOTS, 'phone-esc-cancelled-dark.png') });
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

  /** The open conversation's id (from the address). */
  const openId = (p: Page) => decodeURIComponent(new URL(p.url()).pathname.replace(/^\/c\//, ''));
  const header = (p: Page) => p.locator('h1.conv-title');
  const listItem = (p: Page, id: string) => p.locator(`.conversation-list a[data-id="${id}"] .conv-slug`);

  /** What another client (the CLI, another tab) would do: a call to web-bff's public API with the same token. */
  async function call(p: Page, method: string, body: Record<string, unknown>): Promise<Record<string, unknown>> {
    const res = await p.request.post(`${system.httpUrl}/bedrock.v1.ConversationService/${method}`, {
      headers: { authorization: `Bearer ${system.token}`, 'content-type': 'application/json' },
      data: body,
    });
    expect(res.status()).toBe(200);
    return (await res.json()) as Record<string, unknown>;
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

type MessageInit = Exclude<MessageInitShape<typeof MessageSchema>, { $typeName: string }>;
type EventInit = MessageInitShape<typeof ConversationEventSchema>;

const serverBlock = (json: Record<string, unknown>) => ({
  block: { case: 'serverTool' as const, value: { blockType: String(json.type), blockJson: JSON.stringify(json) } },
});
const text = (t: string, citations?: unknown[]) => ({
  block: { case: 'text' as const, value: { text: t, citationsJson: citations ? JSON.stringify(citations) : '' } },
});

/**
 * The page's API answered by the test: ListConversations, WatchConversation (each call gets
 * the next batch of events pushed for its conversation, then the stream ends; a call with no
 * batch waits for one) and UpdateConversationSettings (as `settings` answers). Anything else is
 * UNIMPLEMENTED.
 */
class ScriptedApi {
  private readonly batches = new Map<string, EventInit[][]>();
  private readonly waiting = new Set<() => void>();
  /** Requests the page gave up (it navigated away): a watch waiting for them takes nothing. */
  private readonly gone = new WeakSet<object>();
  readonly settingsCalls: UpdateConversationSettingsRequest[] = [];
  settings: (
    req: UpdateConversationSettingsRequest,
  ) => { conversation: MessageInitShape<typeof ConversationSchema> } | { code: string; message: string } = () => ({
    code: 'unimplemented',
    message: 'not scripted',
  });
  private closed = false;

  constructor(private readonly conversations: MessageInitShape<typeof ConversationSchema>[]) {}

  /** The events the next watch call of `id` gets (the current one, if it waits). */
  push(id: string, events: EventInit[]): void {
    const list = this.batches.get(id) ?? [];
    list.push(events);
    this.batches.set(id, list);
    this.wake();
  }

  private wake(): void {
    for (const resolve of this.waiting) resolve();
    this.waiting.clear();
  }

  async attach(p: Page): Promise<void> {
    p.on('requestfailed', (r) => {
      this.gone.add(r);
      this.wake();
    });
    await p.route('**/bedrock.v1.ConversationService/**', async (route) => {
      const method = new URL(route.request().url()).pathname.split('/').at(-1);
      const body = route.request().postDataBuffer() ?? Buffer.alloc(0);
      const proto = (bytes: Uint8Array, contentType = 'application/proto') =>
        route.fulfill({ status: 200, contentType, body: Buffer.from(bytes) });
      if (method === 'ListConversations')
        return proto(
          toBinary(ListConversationsResponseSchema, create(ListConversationsResponseSchema, { conversations: this.conversations })),
        );
      if (method === 'UpdateConversationSettings') {
        const req = fromBinary(UpdateConversationSettingsRequestSchema, body);
        this.settingsCalls.push(req);
        const answer = this.settings(req);
        if ('code' in answer) return route.fulfill({ status: 400, contentType: 'application/json', body: JSON.stringify(answer) });
        return proto(toBinary(UpdateConversationSettingsResponseSchema, create(UpdateConversationSettingsResponseSchema, answer)));
      }
      if (method === 'WatchConversation') {
        // A Connect stream: the request enveloped; the answer enveloped messages, then an end-of-stream frame.
        const id = fromBinary(WatchConversationRequestSchema, body.subarray(5)).conversationId;
        const request = route.request();
        let next = this.batches.get(id)?.shift();
        while (!next && !this.closed && !this.gone.has(request)) {
          await new Promise<void>((resolve) => this.waiting.add(resolve));
          if (!this.gone.has(request)) next = this.batches.get(id)?.shift();
        }
        if (!next) return route.abort().catch(() => undefined);
        const frames = next.map((e) =>
          envelope(
            toBinary(WatchConversationResponseSchema, create(WatchConversationResponseSchema, { event: { conversationId: id, ...e } })),
          ),
        );
        return route
          .fulfill({
            status: 200,
            contentType: 'application/connect+proto',
            body: Buffer.concat([...frames, envelope(Buffer.from('{}'), 2)]),
          })
          .catch(() => undefined);
      }
      return route.fulfill({
        status: 501,
        contentType: 'application/json',
        body: JSON.stringify({ code: 'unimplemented', message: `${method} is not scripted` }),
      });
    });
    // The settings panel lists the conversation's MCP servers: these conversations have none.
    await p.route('**/bedrock.v1.McpService/ListMcpServers', (route) =>
      route.fulfill({ status: 200, contentType: 'application/proto', body: Buffer.alloc(0) }),
    );
  }

  close(): void {
    this.closed = true;
    this.wake();
  }
}

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
