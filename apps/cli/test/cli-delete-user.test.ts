/**
 * `bedrock admin users delete ID [--yes]` against the real web-bff and conversation service:
 * never without --yes when nothing can ask; with --yes the user, their conversations and
 * tokens go (their token stops); a non-admin and deleting oneself get exit 3 (refused by the
 * server); a tokens-file user gets the warning that the file token remains.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { startSystem, type System } from '@bedrock/web-bff/test-support';
import { run } from '../src/run.ts';

let s: System;
beforeAll(async () => {
  s = await startSystem({ label: 'cli_delete_user', playWorkers: false, bff: { auth: { admins: ['alice'] } } });
});
afterAll(async () => {
  await s?.close();
});

async function bedrock(args: string[], token: string): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = '';
  let stderr = '';
  const code = await run(
    args,
    { BEDROCK_URL: s.bff.httpUrl, BEDROCK_TOKEN: token, HOME: '/nonexistent', BEDROCK_RETRY_FOR: '0' },
    { out: (t) => void (stdout += t), err: (t) => void (stderr += t) },
  );
  return { code, stdout, stderr };
}

describe('bedrock admin users delete', () => {
  it('asks or needs --yes, then deletes the user, their conversations and tokens', async () => {
    const alice = s.tokens.alice!;
    expect((await bedrock(['admin', 'users', 'add', 'hana'], alice)).code).toBe(0);
    const token = (await bedrock(['admin', 'tokens', 'issue', 'hana'], alice)).stdout.trim();
    const id = (await bedrock(['new', '--cwd', '/tmp'], token)).stdout.trim();
    expect((await bedrock(['ls'], token)).stdout).toContain(id);

    // Not on a terminal (the test's stdin is not one): nothing asks, so nothing is deleted.
    const unasked = await bedrock(['admin', 'users', 'delete', 'hana'], alice);
    expect(unasked.code).toBe(2);
    expect(unasked.stderr).toContain('pass --yes');
    expect((await bedrock(['ls'], token)).stdout).toContain(id);

    const refused = await bedrock(['admin', 'users', 'delete', 'hana', '--yes'], s.tokens.bob!);
    expect(refused.code).toBe(3);
    expect(refused.stderr).toContain('DeleteUser needs the admin role');
    const self = await bedrock(['admin', 'users', 'delete', 'alice', '--yes'], alice);
    expect(self.code).toBe(3);
    expect(self.stderr).toContain('cannot delete yourself');

    const done = await bedrock(['admin', 'users', 'delete', 'hana', '--yes'], alice);
    expect(done).toMatchObject({
      code: 0,
      stdout: 'deleted user hana: their user row, 1 conversation (sub-agents included) and 1 token\n',
    });
    expect((await bedrock(['admin', 'users', 'list'], alice)).stdout).not.toContain('hana');
    expect((await bedrock(['admin', 'audit', '--action', 'user_deleted'], alice)).stdout).toMatch(
      /\talice\tuser_deleted\t-\tcli\t.*user_id=hana/,
    );
    // Her token stops within a second (web-bff's cache).
    await new Promise((r) => setTimeout(r, 1100));
    expect((await bedrock(['ls'], token)).code).toBe(3);
    expect((await bedrock(['admin', 'users', 'delete', 'hana', '--yes'], alice)).code).toBe(3);
  });

  it("warns that a tokens-file user's file token still signs them in", async () => {
    const bob = s.tokens.bob!;
    expect((await bedrock(['new', '--cwd', '/tmp'], bob)).code).toBe(0);
    const res = await bedrock(['admin', 'users', 'delete', 'bob', '--yes', '--json'], s.tokens.alice!);
    expect(res.code).toBe(0);
    expect(JSON.parse(res.stdout)).toMatchObject({ tokensFileEntryRemains: true });
    const plain = await bedrock(['new', '--cwd', '/tmp'], bob);
    expect(plain.code).toBe(0);
    const again = await bedrock(['admin', 'users', 'delete', 'bob', '--yes'], s.tokens.alice!);
    expect(again).toMatchObject({ code: 0, stdout: 'deleted user bob: no user row, 1 conversation (sub-agents included) and 0 tokens\n' });
    expect(again.stderr).toContain("warning: web-bff's tokens file still has an entry for bob");
  });
});
