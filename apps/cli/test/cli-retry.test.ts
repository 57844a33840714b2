/**
 * The `bedrock` CLI retries a change with the same request id when web-bff answers
 * UNAVAILABLE: here the conversation service dies after it saved a message and before its
 * answer got out (the operator's case), and comes back. The message is stored once and the
 * CLI prints its id; when the service stays away, the CLI gives up in bounded time and says so.
 */
import { execFile } from 'node:child_process';
import { resolve } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { run } from '../src/run.ts';
import { startSystem, type System } from '@bedrock/web-bff/test-support';

const BIN = resolve('node_modules/.bin/bedrock');

let s: System;
let db: pg.Pool;
beforeAll(async () => {
  s = await startSystem({ label: 'cli_retry', proxyUpstream: true });
  db = new pg.Pool({ connectionString: s.db.url, max: 2 });
});
afterAll(async () => {
  await db?.end();
  await s?.close();
});

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

function bedrockBin(args: string[], env: Record<string, string> = {}): Promise<Run> {
  return new Promise((resolveRun) => {
    execFile(
      BIN,
      args,
      {
        env: { PATH: process.env.PATH, HOME: process.env.HOME, BEDROCK_URL: s.bff.httpUrl, BEDROCK_TOKEN: s.tokens.alice, ...env },
        timeout: 60_000,
      },
      (err, stdout, stderr) => resolveRun({ code: err ? (typeof err.code === 'number' ? err.code : -1) : 0, stdout, stderr }),
    );
  });
}

async function bedrock(args: string[], env: Record<string, string> = {}): Promise<Run> {
  let stdout = '';
  let stderr = '';
  const code = await run(
    args,
    { BEDROCK_URL: s.bff.httpUrl, BEDROCK_TOKEN: s.tokens.alice, HOME: '/nonexistent', ...env },
    {
      out: (t) => void (stdout += t),
      err: (t) => void (stderr += t),
    },
  );
  return { code, stdout, stderr };
}

async function userMessages(id: string): Promise<string[]> {
  const { rows } = await db.query<{ id: string }>(
    "SELECT id FROM messages WHERE conversation_id = $1 AND message_type = 'user' ORDER BY sequence",
    [id],
  );
  return rows.map((r) => r.id);
}

describe('bedrock retries a change through an upstream that is killed and restarted', () => {
  it('send: the service saves the message and dies before answering; the retry gets the first answer and the message is stored once', async () => {
    const created = await bedrock(['new', '--cwd', '/tmp']);
    expect(created.code).toBe(0);
    const id = created.stdout.trim();
    const proxy = s.proxy!;

    // The conversation service's answers never get back to web-bff from now on ...
    proxy.blackhole(true);
    const sending = bedrockBin(['send', id, 'run the tests']);
    // ... so the message is saved but not answered. Then the service dies with the connection.
    const saved = await s.waitFor('message saved', async () => (await userMessages(id))[0], 30_000);
    await new Promise((r) => setTimeout(r, 200)); // its answer is on the wire (and swallowed)
    proxy.refuse(true);
    proxy.reset();
    proxy.blackhole(false);
    await s.restartConversation();
    await new Promise((r) => setTimeout(r, 500));
    proxy.refuse(false);

    const sent = await sending;
    expect(sent.stderr).toMatch(/Unavailable: .*; retrying in \d+\.\ds \(attempt 2 of \d+\)/);
    expect(sent.code).toBe(0);
    // The answer is the first attempt's: the message it saved, stored once; one turn started.
    expect(sent.stdout.trim()).toBe(saved);
    expect(await userMessages(id)).toEqual([saved]);
    expect(s.llmJobs.filter((j) => j.conversationId === id)).toHaveLength(1);
    const shown = await bedrock(['show', id, '--json']);
    const texts = JSON.parse(shown.stdout).messages.flatMap((m: { content: { text?: { text: string } }[] }) =>
      m.content.map((c) => c.text?.text),
    );
    expect(texts.filter((t: string | undefined) => t === 'run the tests')).toHaveLength(1);
  }, 90_000);

  it('gives up after a bounded time and says so when the service stays away (exit 4)', async () => {
    const id = (await bedrock(['new', '--cwd', '/tmp'])).stdout.trim();
    const proxy = s.proxy!;
    proxy.refuse(true);
    proxy.reset();
    try {
      const started = Date.now();
      const cancel = await bedrock(['cancel', id], { BEDROCK_RETRY_FOR: '2s' });
      expect(cancel.code).toBe(4);
      expect(cancel.stderr).toMatch(/retrying in .*\(attempt 2 of \d+\)/);
      expect(cancel.stderr).toMatch(/bedrock: Unavailable: .*\(gave up after \d+ attempts over \d+\.\ds\)/);
      expect(Date.now() - started).toBeLessThan(10_000);
    } finally {
      proxy.refuse(false);
    }
    // BEDROCK_RETRY_FOR=0: one attempt, no retry.
    proxy.refuse(true);
    proxy.reset();
    try {
      const once = await bedrock(['cancel', id], { BEDROCK_RETRY_FOR: '0' });
      expect(once.code).toBe(4);
      expect(once.stderr).not.toMatch(/retrying/);
    } finally {
      proxy.refuse(false);
    }
    expect((await bedrock(['cancel', id], { BEDROCK_RETRY_FOR: 'soon' })).code).toBe(2);
  }, 60_000);
});
