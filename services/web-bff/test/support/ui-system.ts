/**
 * The environment of the web UI browser suites (ui, ui-screens, ui-navigation, ui-blocks, ui-details, ui-stream, ui-spend, ui-write-access .e2e.test.ts): a whole system
 * in-process (`startEmbedded`) with a scripted local Messages API, headless Chromium (playwright-core) and its first page,
 * and that page's helpers. Each suite calls startUiSystem in beforeAll and stopUiSystem in afterAll.
 */
import { execFileSync } from 'node:child_process';
import { chownSync, existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createTestDatabase } from '@bedrock/testkit/database';
import { chromium, type Browser, type Page } from 'playwright-core';
import { startEmbedded, type RunningEmbedded } from '@bedrock/embedded';
import { startMessagesApiServer, type MessagesApiServer } from '@bedrock/offline-model';

const CHROMIUM = '/usr/bin/chromium';
/** The test folder, above this one (import.meta.dirname needs Node 20.11; the engines field allows 20.9). */
const HERE = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const REPO = resolve(HERE, '../../..');
const UI_DIST = resolve(HERE, '../ui/dist');
export const SHOTS = join(REPO, 'test-results', 'screenshots');
/** Backoff before the 2nd attempt: long enough to see and photograph the countdown. */
const RETRY_BASE = '3s';

export let api: MessagesApiServer;
export let system: RunningEmbedded;
export let browser: Browser;
export let page: Page;
let dataDir: string;
export let workDir: string;
let database: { url: string; drop(): Promise<void> } | undefined;
/** What the browser reported against the page's Content-Security-Policy (web-bff sends a strict one). */
export const cspViolations: string[] = [];

/**
 * A fresh database on the local PostgreSQL server when one answers (`make test` starts it):
 * the embedded PGlite's first start (initdb in WebAssembly) takes 30 s or more on a busy
 * machine. Without a server the test runs on PGlite all the same, only slower.
 */
async function freshDatabase(): Promise<typeof database> {
  return createTestDatabase('ui').catch(() => undefined);
}

export interface UiSystemOptions {
  /** Settings over the suites' common ones; `undefined` removes one (e.g. ANTHROPIC_API_KEY for the offline demo model). */
  readonly env?: Record<string, string | undefined>;
  /** The page's default timeout, ms (default 15 s). */
  readonly pageTimeoutMs?: number;
}

/** Starts the system, the browser and the first page (signed in from the link): the suites' beforeAll. */
export async function startUiSystem(options: UiSystemOptions = {}): Promise<void> {
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
      ...options.env,
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
  page.setDefaultTimeout(options.pageTimeoutMs ?? 15_000);
  page.on('console', (message) => {
    if (/Content Security Policy|Refused to/i.test(message.text())) cspViolations.push(message.text());
  });
  await page.goto(`${system.httpUrl}/?token=${system.token}`);
}

/** Closes what startUiSystem started: the suites' afterAll. */
export async function stopUiSystem(): Promise<void> {
  await browser?.close();
  await system?.stop();
  await api?.close();
  await database?.drop();
  for (const dir of [dataDir, workDir]) if (dir) rmSync(dir, { recursive: true, force: true });
}

export async function shot(name: string): Promise<void> {
  await page.screenshot({ path: join(SHOTS, `${name}.png`) });
}

/** Creates a conversation through the form (thinking and web tools as given, else the defaults) and waits until its view is live. */
export async function newConversation(settings: { thinking?: string; webSearch?: boolean } = {}): Promise<void> {
  const before = page.url();
  await page.getByLabel('Host directory (single-user installs)').fill(workDir);
  await page.locator('#new-thinking').selectOption({ label: settings.thinking ?? 'Default' });
  await page.locator('#new-web_search').setChecked(settings.webSearch ?? false);
  await page.getByRole('button', { name: 'Start' }).click();
  await page.waitForURL((u) => u.href !== before && /\/c\/[^/]+$/.test(u.pathname));
  await waitForStateLine(/Ready/);
}

export function stateLine(): Promise<string> {
  return page.getByTestId('state-line').innerText();
}

export async function waitForStateLine(re: RegExp): Promise<void> {
  await page.getByTestId('state-line').filter({ hasText: re }).waitFor();
}

export async function send(text: string): Promise<void> {
  await page.getByLabel('Message', { exact: true }).fill(text);
  await page.keyboard.press('Enter');
}
