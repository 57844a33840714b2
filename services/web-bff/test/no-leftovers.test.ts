/**
 * No leftovers after a deletion, through the real web-bff and conversation service against real
 * Postgres and Redis: once a conversation is deleted (DeleteConversation, and another user's with
 * DeleteUser), no Redis key or field under the test's prefix and no Postgres row but the audit
 * log's holds any of its unique strings; a tool result that arrives after the deletion is removed
 * within seconds.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { Redis } from 'ioredis';
import { create, toJsonString } from '@bufbuild/protobuf';
import { createClient } from '@connectrpc/connect';
import { createGrpcTransport } from '@connectrpc/connect-node';
import {
  AdminService,
  ConversationEventJobSchema,
  McpService,
  QUEUE_CONVERSATION_EVENTS,
  StateKind,
  StopReason,
  ToolCompleteEventSchema,
  toolRunKey,
} from '@bedrock/contracts';
import { serviceTokenInterceptor } from '@bedrock/platform/server';
import { startSystem, type System } from './support/system.ts';

let s: System;
let pool: pg.Pool;
let redis: Redis;
beforeAll(async () => {
  s = await startSystem({ label: 'no_leftovers', bff: { auth: { admins: ['alice'] } } });
  pool = new pg.Pool({ connectionString: s.db.url, max: 1 });
  redis = new Redis('redis://127.0.0.1:6379');
});
afterAll(async () => {
  await redis?.quit();
  await pool?.end();
  await s?.close();
});

const mcpOf = (user: 'alice' | 'bob') =>
  createClient(McpService, createGrpcTransport({ baseUrl: s.bff.grpcUrl, interceptors: [serviceTokenInterceptor(s.tokens[user]!)] }));

/**
 * One turn with a tool call, every text in it marked with `mark` (text, tool input, tool output,
 * answer); returns the conversation id. The test plays the gateway and the runner on the real
 * queues and writes the run ledger as the runner does, so the marks are in completed, delayed and
 * failed jobs of every queue, in the run ledger and in the notification stream.
 */
async function turnWithTool(user: 'alice' | 'bob', mark: string): Promise<string> {
  const client = s.client(s.tokens[user]);
  const id = (await client.createConversation({ cwd: '/tmp' })).conversation!.id;
  // The conversation's own MCP server (its env a secret of the user's) and an off-switch.
  const mcp = mcpOf(user);
  await mcp.addMcpServer({ conversationId: id, name: 'own', command: 'true', env: { TOKEN: `${mark}-mcp-secret` } });
  await mcp.setMcpServerEnabled({ conversationId: id, name: 'own', enabled: false });
  await client.sendMessage({ conversationId: id, text: `${mark}-user-text` });
  const first = await s.waitFor('the LLM request', () => s.llmJobs.find((j) => j.conversationId === id));
  await s.delta(id, first.requestId, `${mark}-streamed`);
  await s.send(id, `llm-result/${first.requestId}`, {
    case: 'llmResponse',
    value: {
      requestId: first.requestId,
      stopReason: StopReason.TOOL_USE,
      content: [
        { block: { case: 'text', value: { text: `${mark}-thinking-aloud` } } },
        {
          block: { case: 'toolUse', value: { id: 't1', name: 'bash', inputJson: JSON.stringify({ command: `echo ${mark}-tool-input` }) } },
        },
      ],
    },
  });
  const tool = await s.waitFor('the tool job', () => s.toolJobs.find((j) => j.conversationId === id));
  // The runner's ledger record holds the result, as tool-exec-worker writes it.
  const result = create(ToolCompleteEventSchema, { toolUseId: tool.toolUseId, content: `${mark}-tool-output`, exitCode: 0 });
  const key = toolRunKey(id, tool.toolUseId);
  expect(await s.transport.runs.claim(key, 'runner-test#1')).toBeNull();
  await s.transport.runs.finish(key, 'runner-test#1', toJsonString(ToolCompleteEventSchema, result));
  await s.send(id, `tool-result/${id}/${tool.toolUseId}`, { case: 'toolComplete', value: result });
  const second = await s.waitFor('the second LLM request', () => s.llmJobs.filter((j) => j.conversationId === id)[1]);
  await s.send(id, `llm-result/${second.requestId}`, {
    case: 'llmResponse',
    value: {
      requestId: second.requestId,
      stopReason: StopReason.END_TURN,
      content: [{ block: { case: 'text', value: { text: `${mark}-answer` } } }],
    },
  });
  await s.waitFor('the turn to end', async () => {
    const c = (await client.getConversation({ conversationId: id })).conversation!;
    return c.state?.kind === StateKind.IDLE;
  });
  // A job still waiting (a timer far off) and a failed one, both carrying the conversation's text.
  const events = s.transport.queues.producer(QUEUE_CONVERSATION_EVENTS, ConversationEventJobSchema);
  const lateResult = (eventId: string) =>
    create(ConversationEventJobSchema, {
      eventId,
      conversationId: id,
      event: { case: 'toolComplete', value: { toolUseId: 'late', content: `${mark}-late-output` } },
    });
  expect(await events.add(`late/${id}`, lateResult(`late/${id}`), { delayMs: 3_600_000 })).toBe(true);
  const failing = s.transport.queues.producer('test-failing', ConversationEventJobSchema);
  const consumer = s.transport.queues.consume(
    'test-failing',
    ConversationEventJobSchema,
    async () => {
      throw new Error('refused');
    },
    { attempts: 1 },
  );
  await failing.add(`failed/${id}`, lateResult(`failed/${id}`));
  await s.waitFor('the failed job', async () => (await s.transport.queues.jobStatus('test-failing', `failed/${id}`)).state === 'failed');
  await consumer.close();
  return id;
}

/** Every key under the test's prefix, with each value, field and member it holds, as text. */
async function redisDump(): Promise<Map<string, string>> {
  const dump = new Map<string, string>();
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `${s.prefix}:*`, 'COUNT', 1000);
    cursor = next;
    for (const key of keys) {
      const type = await redis.type(key);
      const parts: string[] = [key];
      if (type === 'string') parts.push((await redis.get(key)) ?? '');
      else if (type === 'hash') parts.push(...Object.entries(await redis.hgetall(key)).flat());
      else if (type === 'list') parts.push(...(await redis.lrange(key, 0, -1)));
      else if (type === 'set') parts.push(...(await redis.smembers(key)));
      else if (type === 'zset') parts.push(...(await redis.zrange(key, '0', '-1')));
      else if (type === 'stream') parts.push(...(await redis.xrange(key, '-', '+')).flatMap(([entryId, fields]) => [entryId, ...fields]));
      dump.set(key, parts.join('\n'));
    }
  } while (cursor !== '0');
  return dump;
}

/** Every row of every table but the audit log, as text, by table. */
async function postgresDump(): Promise<Map<string, string>> {
  const { rows } = await pool.query<{ table_name: string }>(
    "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' AND table_type = 'BASE TABLE'",
  );
  const dump = new Map<string, string>();
  for (const { table_name } of rows) {
    if (table_name === 'audit_events') continue;
    const data = await pool.query<{ row: string }>(`SELECT t::text AS row FROM "${table_name}" t`);
    dump.set(table_name, data.rows.map((r) => r.row).join('\n'));
  }
  return dump;
}

/** Where `mark` is still found: Redis keys and Postgres tables. */
async function leftoversOf(mark: string): Promise<string[]> {
  const found: string[] = [];
  for (const [key, text] of await redisDump()) if (text.includes(mark)) found.push(`redis ${key}`);
  for (const [table, text] of await postgresDump()) if (text.includes(mark)) found.push(`postgres ${table}`);
  return found;
}

describe('deleting leaves nothing of a conversation but its audit rows', () => {
  it('DeleteConversation: no job, ledger record, stream entry or row holds its text', async () => {
    const mark = `zq${randomUUID().slice(0, 8)}`;
    const id = await turnWithTool('alice', mark);
    // Before: the text is in jobs of every queue it went through, the ledger and the stream.
    const before = await leftoversOf(mark);
    expect(before).toEqual(
      expect.arrayContaining([expect.stringMatching(/^redis .*:q:{conversation-events}:/), expect.stringMatching(/^postgres messages$/)]),
    );
    expect(before.some((k) => k.includes(':runs:tool/'))).toBe(true);
    expect(before.some((k) => k.includes(':q:{test-failing}:'))).toBe(true);
    expect(before).toContain('postgres mcp_servers');

    await s.client(s.tokens.alice).deleteConversation({ conversationId: id });
    expect(await leftoversOf(mark)).toEqual([]);
    // The tool's job (its input) and the LLM request jobs, which name the conversation, are gone too.
    const ids = [...(await redisDump()).keys()].filter((k) => k.includes(id));
    expect(ids).toEqual([]);

    // A result that comes after the deletion (a cancelled tool that finished late): the runner
    // records it and publishes it; the service drops the event and removes both soon after.
    const late = `${mark}-after-deletion`;
    const key = toolRunKey(id, 't9');
    expect(await s.transport.runs.claim(key, 'runner-test#2')).toBeNull();
    await s.transport.runs.finish(key, 'runner-test#2', late);
    await s.send(id, `tool-result/${id}/t9`, { case: 'toolComplete', value: { toolUseId: 't9', content: late } });
    expect((await leftoversOf(late)).length).toBeGreaterThan(0);
    await s.waitFor('the late result to be removed', async () => (await leftoversOf(late)).length === 0, 15_000);
  }, 60_000);

  it('DeleteUser: the same for every conversation of the user', async () => {
    const mark = `zq${randomUUID().slice(0, 8)}`;
    const id = await turnWithTool('bob', mark);
    // A server of bob's for all his conversations.
    await mcpOf('bob').addMcpServer({ name: 'mine', command: 'true', env: { TOKEN: `${mark}-all-secret` } });
    expect(await leftoversOf(`${mark}-all-secret`)).toEqual(['postgres mcp_servers']);
    const admin = createClient(
      AdminService,
      createGrpcTransport({ baseUrl: s.bff.grpcUrl, interceptors: [serviceTokenInterceptor(s.tokens.alice!)] }),
    );
    await admin.deleteUser({ userId: 'bob' });
    expect(await leftoversOf(mark)).toEqual([]);
    expect([...(await redisDump()).keys()].filter((k) => k.includes(id))).toEqual([]);
  }, 60_000);
});
