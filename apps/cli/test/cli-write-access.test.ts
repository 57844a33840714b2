/**
 * Where Unrestricted tools write, in the CLI (issue 28, item 5), against the embedded product
 * (host paths on, tools as the directory's owner: nobody for a root-owned one) and a scripted
 * Messages API: `bedrock show` names the directory and the tool user as the tool-runner reported
 * them, and warns when that user cannot write there; the ACP permission request says the same
 * before the editor's user answers; `--json` carries the runner's answer.
 */
import { chmodSync, chownSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createTestDatabase } from '@bedrock/testkit/database';
import { startEmbedded, type RunningEmbedded } from '@bedrock/embedded';
import { startMessagesApiServer, type MessagesApiServer } from '@bedrock/offline-model';
import { run } from '../src/run.ts';
import { upgradeTitle } from '../src/acp/updates.ts';
import { renderWriteAccess } from '../src/render-conversation.ts';

let system: RunningEmbedded;
let api: MessagesApiServer;
let database: { url: string; drop(): Promise<void> } | undefined;
const dirs: string[] = [];
let rootDir: string;
let ownDir: string;

beforeAll(async () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'bedrock-cli-wa-data-'));
  rootDir = mkdtempSync(join(tmpdir(), 'bedrock-cli-wa-root-'));
  chmodSync(rootDir, 0o755);
  ownDir = mkdtempSync(join(tmpdir(), 'bedrock-cli-wa-own-'));
  if (process.getuid?.() === 0) chownSync(ownDir, 65534, 65534);
  dirs.push(dataDir, rootDir, ownDir);
  database = await createTestDatabase('cli_write_access').catch(() => undefined);
  api = await startMessagesApiServer({ fallback: () => ({ kind: 'message', content: [{ type: 'text', text: 'Nothing scripted.' }] }) });
  system = await startEmbedded({
    env: {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      BEDROCK_DATA_DIR: dataDir,
      BEDROCK_PORT: '0',
      BEDROCK_GRPC_PORT: '0',
      ANTHROPIC_API_KEY: 'test',
      ANTHROPIC_BASE_URL: api.url,
      BEDROCK_DEFAULT_MODEL: 'claude-sonnet-4-6',
      LOG_LEVEL: 'error',
      ...(database ? { DATABASE_URL: database.url } : {}),
    },
  });
}, 120_000);
afterAll(async () => {
  await system?.stop();
  await api?.close();
  await database?.drop();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

async function bedrock(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = '';
  let stderr = '';
  const code = await run(
    args,
    { BEDROCK_URL: system.httpUrl, BEDROCK_TOKEN: system.token, HOME: '/nonexistent', BEDROCK_RETRY_FOR: '0' },
    { out: (t) => void (stdout += t), err: (t) => void (stderr += t) },
  );
  return { code, stdout, stderr };
}

describe('where Unrestricted tools write (CLI)', () => {
  it('show names the place and the tool user, and warns when that user cannot write it', async () => {
    if (process.getuid?.() !== 0) throw new Error('this test runs as root: it makes a root-owned project whose tools run as nobody');
    const id = (await bedrock(['new', '--cwd', rootDir])).stdout.trim();
    const shown = await bedrock(['show', id]);
    expect(shown.code).toBe(0);
    expect(shown.stdout).toContain(`mode: restricted (read-only, sandboxed; Unrestricted would write in ${rootDir} as nobody (uid 65534))`);
    expect(shown.stdout).toContain(
      `warning: nobody (uid 65534) cannot write ${rootDir}: it is owned by root (uid 0), mode 0755. In Unrestricted mode its writes there will fail ("Permission denied")`,
    );
    const json = JSON.parse((await bedrock(['show', id, '--json'])).stdout);
    expect(json.conversation.writeAccess).toMatchObject({
      path: rootDir,
      toolUser: 'nobody (uid 65534)',
      problem: expect.stringMatching(/owned by root/),
    });
    expect(json.conversation.writeAccess.writable).toBeUndefined(); // false: protobuf JSON leaves it out

    // The editor's permission request says it before the user answers.
    const title = upgradeTitle('I need to write notes.txt.', renderWriteAccess(json.conversation));
    expect(title).toMatch(
      new RegExp(
        `^The agent asks for write access in ${rootDir} as nobody \\(uid 65534\\) \\(Unrestricted mode\\): I need to write notes.txt. Allow it\\? Warning: nobody \\(uid 65534\\) cannot write`,
      ),
    );

    const own = (await bedrock(['new', '--cwd', ownDir])).stdout.trim();
    const fine = await bedrock(['show', own]);
    expect(fine.stdout).toContain(`Unrestricted would write in ${ownDir} as nobody (uid 65534)`);
    expect(fine.stdout).not.toContain('warning:');
    expect(JSON.parse((await bedrock(['show', own, '--json'])).stdout).conversation.writeAccess.writable).toBe(true);
  }, 60_000);
});
