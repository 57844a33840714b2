/**
 * Limits in the embedded product (PGlite: one database session, so a pool of one connection):
 * the busy-conversation limit, which counts under a per-user lock while the message is applied,
 * refuses the message that would make one too many instead of waiting on the pool's only
 * connection; GetUsage answers with the defaults from the environment.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Code, ConnectError, createClient } from '@connectrpc/connect';
import { createConnectTransport } from '@connectrpc/connect-node';
import { ConversationService, rejectionOf } from '@bedrock/contracts';
import { startEmbedded, type RunningEmbedded } from '../src/index.ts';

let bedrock: RunningEmbedded | undefined;
let dataDir: string | undefined;
let workDir: string | undefined;

beforeAll(async () => {
  dataDir = mkdtempSync(join(tmpdir(), 'bedrock-limits-data-'));
  workDir = mkdtempSync(join(tmpdir(), 'bedrock-limits-work-'));
  bedrock = await startEmbedded({
    env: {
      ...process.env,
      BEDROCK_DATA_DIR: dataDir,
      BEDROCK_PORT: '0',
      BEDROCK_GRPC_PORT: '0',
      ANTHROPIC_API_KEY: '',
      DATABASE_URL: '',
      LOG_LEVEL: 'warn',
      BEDROCK_MAX_BUSY_CONVERSATIONS: '1',
      BEDROCK_DAILY_BUDGET: '2.50',
    },
  });
}, 120_000);

afterAll(async () => {
  await bedrock?.stop();
  for (const dir of [dataDir, workDir]) if (dir) rmSync(dir, { recursive: true, force: true });
});

const client = () =>
  createClient(
    ConversationService,
    createConnectTransport({
      baseUrl: bedrock!.httpUrl,
      httpVersion: '1.1',
      interceptors: [
        (next) => (req) => {
          req.header.set('authorization', `Bearer ${bedrock!.token}`);
          return next(req);
        },
      ],
    }),
  );

describe('limits in the embedded product', () => {
  it('refuses a message that would make a second conversation busy, and reports the defaults', async () => {
    const c = client();
    const usage = (await c.getUsage({})).usage!;
    expect(usage.limits).toMatchObject({ dailyBudgetMicros: 2_500_000n, maxBusyConversations: 1 });
    const [a, b] = await Promise.all([c.createConversation({ cwd: workDir! }), c.createConversation({ cwd: workDir! })]);
    // Both at once, so that one is counted while the other is being applied: at most one starts a turn
    // (the offline model may answer the first before the second is counted, so both may pass).
    const outcomes = await Promise.allSettled([
      c.sendMessage({ conversationId: a.conversation!.id, text: 'hello' }),
      c.sendMessage({ conversationId: b.conversation!.id, text: 'hello' }),
    ]);
    const refused = outcomes.flatMap((o) => (o.status === 'rejected' ? [ConnectError.from(o.reason)] : []));
    expect(outcomes.filter((o) => o.status === 'fulfilled').length).toBeGreaterThanOrEqual(1);
    for (const err of refused) {
      expect(err.code).toBe(Code.ResourceExhausted);
      expect(rejectionOf(err)).toMatchObject({ code: 'limit_reached', limit: 'max_busy_conversations' });
    }
  }, 60_000);

  it('reserves budget on the one connection: a message with a request id (under the row lock) and one without', async () => {
    const c = client();
    const { conversation } = await c.createConversation({ cwd: workDir! });
    const id = conversation!.id;
    const rest = async () => {
      for (let i = 0; i < 200; i++) {
        const u = (await c.getUsage({})).usage!;
        if (u.busyConversations === 0 && u.reservedMicros === 0n) return;
        await new Promise((r) => setTimeout(r, 50));
      }
      throw new Error('still busy or holding budget');
    };
    await rest();
    await c.sendMessage({ conversationId: id, text: 'with an id', requestId: 'embedded-reserve-1' });
    await rest();
    await c.sendMessage({ conversationId: id, text: 'without' });
    await rest();
    expect((await c.getUsage({})).usage).toMatchObject({ reservedMicros: 0n, conversations: 3 });
  }, 60_000);
});
