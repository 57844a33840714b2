/**
 * Titles and search on the embedded database: migration 006 runs on PGlite (with the pg_trgm and
 * btree_gin extensions it loads), the first message titles a conversation, a rename sticks, and
 * ListConversations' query finds titles ignoring case — through the public API, as the CLI and
 * the web UI use it.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createClient, type Client } from '@connectrpc/connect';
import { createConnectTransport } from '@connectrpc/connect-node';
import { ConversationService } from '@bedrock/contracts';
import { startEmbedded, type RunningEmbedded } from '../src/index.ts';

let bedrock: RunningEmbedded;
let client: Client<typeof ConversationService>;
let dataDir: string;

beforeAll(async () => {
  dataDir = mkdtempSync(join(tmpdir(), 'bedrock-titles-data-'));
  bedrock = await startEmbedded({
    env: {
      ...process.env,
      BEDROCK_DATA_DIR: dataDir,
      BEDROCK_PORT: '0',
      BEDROCK_GRPC_PORT: '0',
      ANTHROPIC_API_KEY: '',
      DATABASE_URL: '',
      LOG_LEVEL: 'warn',
    },
  });
  client = createClient(
    ConversationService,
    createConnectTransport({
      baseUrl: bedrock.httpUrl,
      httpVersion: '1.1',
      interceptors: [
        (next) => (req) => {
          req.header.set('authorization', `Bearer ${bedrock.token}`);
          return next(req);
        },
      ],
    }),
  );
}, 120_000);

afterAll(async () => {
  await bedrock?.stop();
  if (dataDir) rmSync(dataDir, { recursive: true, force: true });
}, 60_000);

describe('titles on PGlite', () => {
  it('titles from the first message, keeps a rename, and searches titles ignoring case', async () => {
    const first = (await client.createConversation({ cwd: tmpdir() })).conversation!.id;
    await client.sendMessage({ conversationId: first, text: '# Tidy the **Makefile**\nplease' });
    expect((await client.getConversation({ conversationId: first })).conversation!.title).toBe('Tidy the Makefile');

    const second = (await client.createConversation({ cwd: tmpdir() })).conversation!.id;
    expect((await client.renameConversation({ conversationId: second, title: 'Makefile targets for CI' })).conversation!.title).toBe(
      'Makefile targets for CI',
    );
    await client.sendMessage({ conversationId: second, text: 'something else' });
    expect((await client.getConversation({ conversationId: second })).conversation!.title).toBe('Makefile targets for CI');

    const found = await client.listConversations({ query: 'MAKEFILE' });
    expect(found.conversations.map((c) => c.id)).toEqual([second, first]);
    const paged = await client.listConversations({ query: 'makefile', pageSize: 1 });
    expect(paged.conversations.map((c) => c.id)).toEqual([second]);
    const rest = await client.listConversations({ query: 'makefile', pageSize: 1, pageToken: paged.nextPageToken });
    expect(rest.conversations.map((c) => c.id)).toEqual([first]);
    expect((await client.listConversations({ query: 'tidy' })).conversations.map((c) => c.id)).toEqual([first]);
  }, 60_000);
});
