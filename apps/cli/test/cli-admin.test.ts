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
      'bedrock: Unauthenticated: bearer token revoked (the token in BEDROCK_TOKEN was refused: check it, or unset it to use the local token)\n',
    ]);
    expect(await bedrock(['admin', 'users', 'disable', 'carol'], alice)).toMatchObject({ code: 0 });
    expect((await bedrock(['admin', 'users', 'list', '--json'], alice)).stdout).toMatch(/"id":"carol".*"disabledAt":/);
  });

  it('admin audit: who did what from which client, filtered by user, time and action; admins only', async () => {
    const alice = s.tokens.alice!;
    expect((await bedrock(['admin', 'users', 'add', 'dina'], alice)).code).toBe(0);
    const issued = await bedrock(['admin', 'tokens', 'issue', 'dina'], alice);
    const tokenId = /token (tok_\S+)/.exec(issued.stderr)![1]!;
    expect((await bedrock(['admin', 'tokens', 'revoke', tokenId], alice)).code).toBe(0);
    expect((await bedrock(['admin', 'users', 'disable', 'dina'], alice)).code).toBe(0);
    // A conversation's actions: a cancel of a turn waiting for the model (no gateway here), and its deletion.
    const id = (await bedrock(['new', '--cwd', '/tmp'], alice)).stdout.trim();
    expect((await bedrock(['send', id, 'hello'], alice)).code).toBe(0);
    expect((await bedrock(['cancel', id], alice)).code).toBe(0);
    await s.waitFor('the cancel to settle', async () => (await bedrock(['rm', id, '--yes'], alice)).code === 0);

    const audit = await bedrock(['admin', 'audit', '--user', 'alice', '--since', '1h'], alice);
    expect(audit.code).toBe(0);
    const lines = audit.stdout.trim().split('\n');
    const at = String.raw`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ`;
    // Newest first.
    expect(lines.slice(0, 6).map((l) => l.split('\t').slice(1, 5))).toEqual([
      ['alice', 'conversation_deleted', id, 'cli'],
      ['alice', 'conversation_cancelled', id, 'cli'],
      ['alice', 'user_disabled', '-', 'cli'],
      ['alice', 'token_revoked', '-', 'cli'],
      ['alice', 'token_issued', '-', 'cli'],
      ['alice', 'user_added', '-', 'cli'],
    ]);
    expect(lines[0]).toMatch(new RegExp(`^${at}\t`));
    expect(lines[3]).toMatch(new RegExp(`\tuser_id=dina token_id=${tokenId} already_revoked=false$`));
    expect(lines[5]).toMatch(/\trole=user user_id=dina display_name=dina$/);

    const json = await bedrock(['admin', 'audit', '--action', 'user_disabled', '--json'], alice);
    const events = json.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { userId: string; action: string; details: Record<string, unknown> });
    expect(events.every((e) => e.action === 'user_disabled')).toBe(true);
    expect(events[0]).toMatchObject({ userId: 'alice', details: { client: 'cli', user_id: 'dina', already_disabled: false } });
    expect((await bedrock(['admin', 'audit', '--since', '2099-01-01T00:00Z'], alice)).stdout).toBe('');
    expect((await bedrock(['admin', 'audit', '--user', 'alice', '--until', '1h'], alice)).stdout).not.toContain('dina');

    const bob = await bedrock(['admin', 'audit'], s.tokens.bob!);
    expect([bob.code, bob.stderr]).toEqual([
      3,
      'bedrock: PermissionDenied: ListAuditEvents needs the admin role; user bob has the role user\n',
    ]);
    for (const args of [
      ['admin', 'audit', '--since', 'yesterday'],
      ['admin', 'audit', 'extra'],
      ['admin', 'audit', '--label', 'x'],
      ['ls', '--since', '1h'],
    ]) {
      const r = await bedrock(args, alice);
      expect({ args, code: r.code }).toEqual({ args, code: 2 });
    }
    const bad = await bedrock(['admin', 'audit', '--action', 'nonsense'], alice);
    expect(bad.code).toBe(3);
    expect(bad.stderr).toMatch(/^bedrock: InvalidArgument: action nonsense is not audited; the actions are mode_upgrade_requested, /);
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
