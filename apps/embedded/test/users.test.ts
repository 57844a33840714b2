/**
 * Users and tokens in the embedded product (PGlite): the local user is an admin, adds a user and
 * issues a token that works, and revoking it stops it within a second (migration 007 runs on
 * PGlite too); the audit log's rows are written there as well (migration 010).
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Code, ConnectError, createClient } from '@connectrpc/connect';
import { createConnectTransport } from '@connectrpc/connect-node';
import { AdminService, ConversationService } from '@bedrock/contracts';
import { startEmbedded, type RunningEmbedded } from '../src/index.ts';

let bedrock: RunningEmbedded | undefined;
let dataDir: string | undefined;

beforeAll(async () => {
  dataDir = mkdtempSync(join(tmpdir(), 'bedrock-users-data-'));
  bedrock = await startEmbedded({
    env: {
      ...process.env,
      BEDROCK_DATA_DIR: dataDir,
      BEDROCK_PORT: '0',
      BEDROCK_GRPC_PORT: '0',
      ANTHROPIC_API_KEY: '',
      DATABASE_URL: '',
      LOG_LEVEL: 'warn',
      // More than one user: conversations in workspaces, each user their own uid.
      BEDROCK_HOST_PATHS: 'off',
    },
  });
}, 120_000);

afterAll(async () => {
  await bedrock?.stop();
  if (dataDir) rmSync(dataDir, { recursive: true, force: true });
});

function transport(token: string) {
  return createConnectTransport({
    baseUrl: bedrock!.httpUrl,
    httpVersion: '1.1',
    interceptors: [
      (next) => (req) => {
        req.header.set('authorization', `Bearer ${token}`);
        return next(req);
      },
    ],
  });
}
const admin = (token: string) => createClient(AdminService, transport(token));
const conversations = (token: string) => createClient(ConversationService, transport(token));
const codeOf = (p: Promise<unknown>) =>
  p.then(
    () => 'ok',
    (err: unknown) => Code[ConnectError.from(err).code],
  );

describe('users in the embedded product', () => {
  it('the local user is an admin: adds a user, issues a token that works, revokes it', async () => {
    const local = bedrock!.token;
    await admin(local).addUser({ userId: 'pat' });
    const issued = await admin(local).issueToken({ userId: 'pat', expiresInSeconds: 86_400n });
    const created = await conversations(issued.secret).createConversation({});
    // pat sees their conversation; the local user does not.
    const id = created.conversation!.id;
    expect((await conversations(issued.secret).listConversations({})).conversations.map((c) => c.id)).toContain(id);
    expect((await conversations(local).listConversations({})).conversations.map((c) => c.id)).not.toContain(id);
    // pat is no admin.
    expect(await codeOf(admin(issued.secret).listUsers({}))).toBe('PermissionDenied');

    await admin(local).revokeToken({ tokenId: issued.token!.id });
    await new Promise((r) => setTimeout(r, 1000));
    expect(await codeOf(conversations(issued.secret).listConversations({}))).toBe('Unauthenticated');
  });

  it('audits user, token and conversation changes on PGlite, with the client from the user-agent when no bedrock-client is sent', async () => {
    const local = bedrock!.token;
    await admin(local).addUser({ userId: 'quinn' });
    const issued = await admin(local).issueToken({ userId: 'quinn' });
    await admin(local).revokeToken({ tokenId: issued.token!.id });
    const id = (await conversations(local).createConversation({})).conversation!.id;
    await conversations(local).deleteConversation({ conversationId: id });
    const { events } = await admin(local).listAuditEvents({ pageSize: 4 });
    expect(events.map((e) => [e.action, e.conversationId])).toEqual([
      ['conversation_deleted', id],
      ['token_revoked', ''],
      ['token_issued', ''],
      ['user_added', ''],
    ]);
    // This client sends no bedrock-client header: web-bff forwards its user-agent.
    for (const e of events) expect(e.details!.client).toMatch(/^connect-es\//);
    expect(events[3]!.details).toMatchObject({ user_id: 'quinn', role: 'user' });
    expect(await codeOf(admin(issued.secret).listAuditEvents({}))).toBe('Unauthenticated');
  });

  it('deletes a user with their conversation and token on PGlite; the token stops within a second', async () => {
    const local = bedrock!.token;
    await admin(local).addUser({ userId: 'rae' });
    const issued = await admin(local).issueToken({ userId: 'rae' });
    const id = (await conversations(issued.secret).createConversation({})).conversation!.id;
    const res = await admin(local).deleteUser({ userId: 'rae', requestId: 'del-rae' });
    expect(res).toMatchObject({ user: { id: 'rae' }, deletedConversationIds: [id], deletedTokens: 1 });
    await new Promise((r) => setTimeout(r, 1100));
    expect(await codeOf(conversations(issued.secret).listConversations({}))).toBe('Unauthenticated');
    expect((await admin(local).listUsers({})).users.map((u) => u.id)).not.toContain('rae');
    expect((await admin(local).listAuditEvents({ action: 'user_deleted' })).events[0]!.details).toMatchObject({
      user_id: 'rae',
      conversations: 1,
      tokens: 1,
    });
    expect(await codeOf(admin(local).deleteUser({ userId: 'rae' }))).toBe('NotFound');
  });
});

describe('host paths in the embedded product', () => {
  it('are on for its one user, and adding a second user is refused while they are', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'bedrock-users-hostpaths-'));
    const single = await startEmbedded({
      env: {
        ...process.env,
        BEDROCK_DATA_DIR: dir,
        BEDROCK_PORT: '0',
        BEDROCK_GRPC_PORT: '0',
        ANTHROPIC_API_KEY: '',
        DATABASE_URL: '',
        LOG_LEVEL: 'warn',
      },
    });
    try {
      expect(single.hostPaths).toBe(true);
      const t = createConnectTransport({
        baseUrl: single.httpUrl,
        httpVersion: '1.1',
        interceptors: [
          (next) => (req) => {
            req.header.set('authorization', `Bearer ${single.token}`);
            return next(req);
          },
        ],
      });
      const err = await createClient(AdminService, t)
        .addUser({ userId: 'sam' })
        .then(
          () => undefined,
          (e: unknown) => ConnectError.from(e),
        );
      expect(err && Code[err.code]).toBe('FailedPrecondition');
      expect(err?.rawMessage).toMatch(/BEDROCK_HOST_PATHS=off/);
      // Its one user still names a directory of this machine.
      const c = await createClient(ConversationService, t).createConversation({ cwd: dir });
      expect(c.conversation?.cwd).toBe(dir);
    } finally {
      await single.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  }, 120_000);
});
