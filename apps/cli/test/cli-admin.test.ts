/**
 * `bedrock admin users|tokens` against the real web-bff and conversation service (Postgres):
 * an admin (named in BEDROCK_ADMIN_USERS) adds a user and issues a token printed once, which
 * then works as BEDROCK_TOKEN until it is revoked; a user who is no admin is refused (exit 3);
 * bad command lines are usage errors (exit 2).
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { startSystem, type System } from '@bedrock/web-bff/test-support';
import { parseExpires } from '../src/admin.ts';
import { run } from '../src/run.ts';

let s: System;
beforeAll(async () => {
  s = await startSystem({ label: 'cli_admin', playWorkers: false, bff: { auth: { admins: ['alice'] } } });
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

describe('bedrock admin', () => {
  it('adds a user, issues a token shown once that works, lists and revokes it', async () => {
    const alice = s.tokens.alice!;
    expect(await bedrock(['admin', 'users', 'add', 'carol', '--display-name', 'Carol C.'], alice)).toMatchObject({
      code: 0,
      stdout: 'added user carol (role user)\n',
    });
    expect(await bedrock(['admin', 'users', 'add', 'root2', '--admin'], alice)).toMatchObject({
      code: 0,
      stdout: 'added user root2 (role admin)\n',
    });
    const dup = await bedrock(['admin', 'users', 'add', 'carol'], alice);
    expect([dup.code, dup.stderr]).toEqual([3, 'bedrock: AlreadyExists: user carol already exists\n']);

    const issued = await bedrock(['admin', 'tokens', 'issue', 'carol', '--label', 'laptop', '--expires', '30d'], alice);
    expect(issued.code).toBe(0);
    expect(issued.stdout).toMatch(/^bdr_[A-Za-z0-9_-]{43}\n$/);
    expect(issued.stderr).toMatch(/^token tok_\S+ for carol \(laptop\), expires \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ; shown once/);
    const token = issued.stdout.trim();
    const id = /token (tok_\S+)/.exec(issued.stderr)![1]!;

    // The token is carol's.
    const created = await bedrock(['new', '--cwd', '/tmp'], token);
    expect(created.code).toBe(0);
    expect((await bedrock(['ls'], token)).stdout).toContain(created.stdout.trim());

    const users = await bedrock(['admin', 'users', 'list'], alice);
    expect(users.stdout).toMatch(/^carol\tuser\tactive\tCarol C\.$/m);
    expect(users.stdout).toMatch(/^root2\tadmin\tactive\troot2$/m);
    const tokens = await bedrock(['admin', 'tokens', 'list', 'carol'], alice);
    expect(tokens.stdout).toMatch(new RegExp(`^${id}\\tcarol\\tactive\\tcreated \\S+\\texpires \\S+\\tlast used \\S+Z\\tlaptop$`, 'm'));
    expect(tokens.stdout).not.toContain(token);
    const listedJson = await bedrock(['admin', 'tokens', 'list', '--json'], alice);
    expect(JSON.parse(listedJson.stdout.trim().split('\n')[0]!)).toMatchObject({ id, userId: 'carol', label: 'laptop' });

    expect(await bedrock(['admin', 'tokens', 'revoke', id], alice)).toMatchObject({ code: 0, stdout: `revoked token ${id} of carol\n` });
    await new Promise((r) => setTimeout(r, 1000));
    const refused = await bedrock(['ls'], token);
    expect([refused.code, refused.stderr]).toEqual([
      3,
      'bedrock: Unauthenticated: bearer token revoked (set BEDROCK_TOKEN, or run the embedded default so its local token exists)\n',
    ]);
    expect(await bedrock(['admin', 'users', 'disable', 'carol'], alice)).toMatchObject({ code: 0 });
    expect((await bedrock(['admin', 'users', 'list', '--json'], alice)).stdout).toMatch(/"id":"carol".*"disabledAt":/);
  });

  it('refuses a user who is no admin, and bad command lines', async () => {
    const bob = await bedrock(['admin', 'users', 'list'], s.tokens.bob!);
    expect([bob.code, bob.stderr]).toEqual([3, 'bedrock: PermissionDenied: ListUsers needs the admin role; user bob has the role user\n']);
    for (const args of [
      ['admin', 'users'],
      ['admin', 'users', 'add'],
      ['admin', 'tokens', 'issue', 'carol', '--expires', '30'],
      ['admin', 'tokens', 'revoke', 'a', 'b'],
      ['admin', 'users', 'list', '--label', 'x'],
      ['ls', '--admin'],
    ]) {
      const r = await bedrock(args, s.tokens.alice!);
      expect({ args, code: r.code }).toEqual({ args, code: 2 });
    }
    expect(parseExpires('30d')).toBe(2_592_000n);
    expect(parseExpires('12h')).toBe(43_200n);
    expect(parseExpires('2w')).toBe(1_209_600n);
  });
});
