/**
 * The web UI in headless Chromium (Debian's, driven by playwright-core) against a whole
 * system started in-process (`startEmbedded`) with a scripted local Messages API: send a
 * message and see the tool run, cancel a running tool, approve a mode upgrade (and see the
 * patch diff that follows), see a retry notice. Screenshots go to test-results/screenshots.
 */
import { execFileSync } from 'node:child_process';
import { chownSync, existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createTestDatabase } from '@bedrock/testkit/database';
import { afterAll, beforeAll, describe, expect, it, jest } from '@jest/globals';
import { chromium, type Browser, type Page } from 'playwright-core';
import { fromBinary } from '@bufbuild/protobuf';
import { SendMessageRequestSchema } from '@bedrock/contracts';
import { startEmbedded, type RunningEmbedded } from '@bedrock/embedded';
import { startMessagesApiServer, type MessagesApiServer } from '@bedrock/testkit';

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
      LOG_LEVEL: 'error',
      ...(database ? { DATABASE_URL: database.url } : {}),
    },
  });
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'],
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

/** Creates a conversation through the form and waits until its view is live. */
async function newConversation(): Promise<void> {
  const before = page.url();
  await page.getByLabel('Working directory').fill(workDir);
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
      { kind: 'message', content: [{ type: 'text', text: 'Let me look at the directory.' }, { type: 'tool_use', name: 'bash', input: { command: 'echo hello-from-bash; echo second line' } }] },
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
      // The composer is cleared once the send succeeded (its retry answered with the first outcome).
      const input = page.getByLabel('Message', { exact: true });
      for (let i = 0; i < 300 && (await input.inputValue()) !== ''; i++) await new Promise((r) => setTimeout(r, 50));
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
    await page.getByRole('button', { name: 'Cancel' }).click();
    await waitForStateLine(/Ready/);
    const card = page.locator('article.tool[data-tool="bash"]');
    await card.locator('.tool-result', { hasText: 'Cancelled by user' }).waitFor();
    await expect(card.getAttribute('data-status')).resolves.toBe('cancelled');
    expect(Date.now() - clicked).toBeLessThan(10_000);
    await expect(page.getByRole('button', { name: 'Cancel' }).isVisible()).resolves.toBe(false);
    await expect(page.getByRole('button', { name: 'Send' }).isEnabled()).resolves.toBe(true);
    await shot('cancelled');
  });

  it('asks for an upgrade in a dialog; approving switches the mode line to Unrestricted and the patch diff shows', async () => {
    await newConversation();
    const modeText = await page.getByTestId('mode-line').innerText();
    // Approving needs Restricted mode, which needs the kernel sandbox on this machine.
    if (!/Restricted/.test(modeText)) throw new Error(`this machine has no working sandbox, so no Restricted mode to upgrade from (mode line: ${modeText})`);
    expect(modeText).toMatch(/Restricted.*read-only, sandboxed/s);
    const reason = 'I need to write the fix into notes.txt.';
    api.enqueue(
      { kind: 'message', content: [{ type: 'tool_use', name: 'request_mode_upgrade', input: { reason } }] },
      { kind: 'message', content: [{ type: 'tool_use', name: 'patch', input: { path: 'notes.txt', patches: [{ operation: 'overwrite', new_text: 'first line\nsecond line\n' }] } }] },
      { kind: 'message', content: [{ type: 'text', text: 'I wrote notes.txt.' }] },
    );
    await send('Please fix it.');
    const dialog = page.getByRole('dialog', { name: 'Allow Unrestricted mode?' });
    await dialog.waitFor();
    await expect(dialog.innerText()).resolves.toContain(reason);
    await waitForStateLine(/Waiting for your approval/);
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

  it('sends a refused token back to the sign-in form, which takes a pasted token', async () => {
    await page.evaluate("localStorage.setItem('bedrock.token', 'not-the-token')");
    await page.reload();
    const form = page.locator('form.sign-in');
    // Generous: right after a cold start the first refused call can take a while. A failure
    // leaves a screenshot of what the page showed instead.
    await form
      .getByRole('alert')
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
