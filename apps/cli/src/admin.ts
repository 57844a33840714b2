/**
 * `bedrock admin users add|list|disable|delete`, `admin tokens issue|list|revoke` and `admin
 * audit`, through web-bff's AdminService (the caller must be an admin; docs/cli.md, "Admin: users
 * and tokens" and "Admin: the audit log"). An issued token is printed once, alone on stdout.
 */
import { createInterface } from 'node:readline/promises';
import { toJson } from '@bufbuild/protobuf';
import { timestampDate, timestampFromDate, type Timestamp } from '@bufbuild/protobuf/wkt';
import { createClient, type Client } from '@connectrpc/connect';
import {
  AdminService,
  AuditEventSchema,
  DeleteUserResponseSchema,
  IssueTokenResponseSchema,
  UserRole,
  UserSchema,
  UserTokenSchema,
  type AuditEvent,
  type User,
  type UserToken,
} from '@bedrock/contracts';
import { apiTransport } from './connection.ts';
import { adminLimits } from './spend.ts';
import { createRetry, retryPolicyFromEnv } from './retry.ts';
import { EXIT, UsageError } from './exit-codes.ts';
import type { Output } from './output.ts';
import { ADMIN_FLAGS, LIMIT_FLAGS, type OptionValues } from './usage.ts';

const UNITS: Record<string, number> = { s: 1, m: 60, h: 3600, d: 86_400, w: 604_800 };

/** `30d`, `12h`, `90m`, `2w`, `3600s` → seconds. */
export function parseExpires(text: string): bigint {
  const m = /^(\d{1,9})([smhdw])$/.exec(text.trim());
  if (!m || Number(m[1]) === 0)
    throw new UsageError(
      `--expires takes a positive number and a unit (s, m, h, d, w), such as 30d; not "${text}"; bedrock help admin shows its usage`,
    );
  return BigInt(Number(m[1]) * UNITS[m[2]!]!);
}

/** `--since`/`--until`: `2h` (that long ago; s, m, h, d, w) or an ISO 8601 time. */
export function parseTime(text: string, flag: string, now = Date.now()): Date {
  const ago = /^(\d{1,9})([smhdw])$/.exec(text.trim());
  if (ago) return new Date(now - Number(ago[1]) * UNITS[ago[2]!]! * 1000);
  // A date and time (a date alone is midnight UTC); not a bare number.
  const at = /^\d{4}-\d\d-\d\d([T ]\d\d:\d\d(:\d\d(\.\d+)?)?(Z|[+-]\d\d:?\d\d)?)?$/.test(text.trim()) ? new Date(text.trim()) : null;
  if (!at || Number.isNaN(at.getTime()))
    throw new UsageError(
      `--${flag} takes a time ago (such as 2h, 30m, 7d) or an ISO 8601 time (such as 2026-01-31T12:00Z); not "${text}"; bedrock help admin shows its usage`,
    );
  return at;
}

/** One audit event as a line: time, user, action, conversation, client, then the other details as key=value. */
function auditLine(e: AuditEvent): string {
  const { client, ...rest } = (e.details ?? {}) as Record<string, unknown>;
  const more = Object.entries(rest)
    .map(([k, v]) => `${k}=${typeof v === 'string' ? v : JSON.stringify(v)}`)
    .join(' ');
  return `${when(e.at)}\t${e.userId}\t${e.action}\t${e.conversationId || '-'}\t${typeof client === 'string' && client ? client : '-'}\t${more}\n`;
}

const when = (t: Timestamp | undefined) =>
  t
    ? timestampDate(t)
        .toISOString()
        .replace(/\.\d{3}Z$/, 'Z')
    : '-';
const roleName = (r: UserRole) => (r === UserRole.ADMIN ? 'admin' : 'user');

function userLine(u: User): string {
  return `${u.id}\t${roleName(u.role)}\t${u.disabledAt ? `disabled ${when(u.disabledAt)}` : 'active'}\t${u.displayName}\n`;
}

function tokenLine(t: UserToken): string {
  const state = t.revokedAt
    ? `revoked ${when(t.revokedAt)}`
    : t.expiresAt && timestampDate(t.expiresAt) <= new Date()
      ? 'expired'
      : 'active';
  return `${t.id}\t${t.userId}\t${state}\tcreated ${when(t.createdAt)}\texpires ${when(t.expiresAt)}\tlast used ${when(t.lastUsedAt)}\t${t.label}\n`;
}

const line = (value: unknown) => `${JSON.stringify(value)}\n`;

function need(rest: string[], count: number, what: string): string[] {
  if (rest.length !== count) throw new UsageError(`expected ${what}; bedrock help admin shows its usage`);
  return rest;
}

export async function admin(rest: string[], values: OptionValues, env: NodeJS.ProcessEnv, output: Output): Promise<number> {
  const [area, sub, ...args] = rest;
  const client: Client<typeof AdminService> = createClient(AdminService, apiTransport(env));
  const json = values.json;
  const only = (allowed: readonly (typeof ADMIN_FLAGS)[number][]) => {
    const extra = ADMIN_FLAGS.find((f) => values[f] !== undefined && values[f] !== false && !allowed.includes(f));
    if (extra) throw new UsageError(`--${extra} does not apply to admin ${area} ${sub}; bedrock help admin shows its usage`);
  };
  if (area === 'limits') {
    only(LIMIT_FLAGS);
    return adminLimits(rest.slice(1), values, env, output);
  }
  if (area === 'audit') {
    only(['user', 'since', 'until', 'action']);
    if (rest.length !== 1)
      throw new UsageError(`expected no arguments after admin audit (filters are options); bedrock help admin shows its usage`);
    const filter = {
      userId: values.user ?? '',
      action: values.action ?? '',
      ...(values.since !== undefined ? { since: timestampFromDate(parseTime(values.since, 'since')) } : {}),
      ...(values.until !== undefined ? { until: timestampFromDate(parseTime(values.until, 'until')) } : {}),
    };
    // Every page, newest first, printed as it arrives.
    let pageToken = '';
    do {
      const page = await client.listAuditEvents({ ...filter, pageToken, pageSize: 500 });
      for (const e of page.events) output.out(json ? line(toJson(AuditEventSchema, e)) : auditLine(e));
      pageToken = page.nextPageToken;
    } while (pageToken);
    return EXIT.ok;
  }
  switch (`${area} ${sub}`) {
    case 'users add': {
      only(['admin', 'display-name']);
      const [id] = need(args, 1, 'a user id (letters, digits and . _ @ -)');
      const { user } = await client.addUser({
        userId: id!,
        displayName: values['display-name'] ?? '',
        role: values.admin ? UserRole.ADMIN : UserRole.USER,
      });
      output.out(json ? line(toJson(UserSchema, user!)) : `added user ${user!.id} (role ${roleName(user!.role)})\n`);
      return EXIT.ok;
    }
    case 'users list': {
      only([]);
      need(args, 0, 'no arguments');
      const { users } = await client.listUsers({});
      for (const u of users) output.out(json ? line(toJson(UserSchema, u)) : userLine(u));
      return EXIT.ok;
    }
    case 'users disable': {
      only([]);
      const [id] = need(args, 1, 'a user id');
      const { user } = await client.disableUser({ userId: id! });
      output.out(json ? line(toJson(UserSchema, user!)) : `disabled user ${user!.id}: none of their tokens or sign-ins works any more\n`);
      return EXIT.ok;
    }
    case 'users delete': {
      only([]);
      const [id] = need(args, 1, 'a user id');
      if (!values.yes) {
        if (!process.stdin.isTTY)
          throw new UsageError(`admin users delete ${id}: not on a terminal, so nothing asks; pass --yes to delete without asking`);
        const rl = createInterface({ input: process.stdin, output: process.stderr });
        const answer = await rl
          .question(`Delete user ${id}, every conversation of theirs and their tokens? This cannot be undone. [y/N] `)
          .finally(() => rl.close());
        if (!/^y(es)?$/i.test(answer.trim())) {
          output.err('nothing deleted\n');
          return EXIT.ok;
        }
      }
      // A retry after a lost answer carries the same request id: it gets the same answer, not NOT_FOUND.
      const retry = createRetry({ policy: retryPolicyFromEnv(env), output, signal: new AbortController().signal });
      const res = await retry((requestId) => client.deleteUser({ userId: id!, requestId }));
      if (json) {
        output.out(line(toJson(DeleteUserResponseSchema, res)));
      } else {
        const n = res.deletedConversationIds.length;
        output.out(
          `deleted user ${id}: ${res.user ? 'their user row, ' : 'no user row, '}${n} conversation${n === 1 ? '' : 's'} (sub-agents included) and ${res.deletedTokens} token${res.deletedTokens === 1 ? '' : 's'}\n`,
        );
        if (res.tokensFileEntryRemains)
          output.err(
            `warning: web-bff's tokens file still has an entry for ${id}: that token still signs in until its line is removed (then SIGHUP)\n`,
          );
      }
      return EXIT.ok;
    }
    case 'tokens issue': {
      only(['label', 'expires']);
      const [user] = need(args, 1, 'the user id to issue the token to');
      const res = await client.issueToken({
        userId: user!,
        label: values.label ?? '',
        expiresInSeconds: values.expires === undefined ? 0n : parseExpires(values.expires),
      });
      if (json) {
        output.out(line(toJson(IssueTokenResponseSchema, res)));
      } else {
        // The token alone on stdout (scripts capture it); what it is on stderr.
        output.out(`${res.secret}\n`);
        const t = res.token!;
        output.err(
          `token ${t.id} for ${t.userId}${t.label ? ` (${t.label})` : ''}, ${t.expiresAt ? `expires ${when(t.expiresAt)}` : 'never expires'}; shown once: keep it secret (BEDROCK_TOKEN)\n`,
        );
      }
      return EXIT.ok;
    }
    case 'tokens list': {
      only([]);
      if (args.length > 1) throw new UsageError(`expected at most a user id; bedrock help admin shows its usage`);
      const { tokens } = await client.listTokens({ userId: args[0] ?? '' });
      for (const t of tokens) output.out(json ? line(toJson(UserTokenSchema, t)) : tokenLine(t));
      return EXIT.ok;
    }
    case 'tokens revoke': {
      only([]);
      const [id] = need(args, 1, 'a token id (bedrock admin tokens list)');
      const { token } = await client.revokeToken({ tokenId: id! });
      output.out(json ? line(toJson(UserTokenSchema, token!)) : `revoked token ${token!.id} of ${token!.userId}\n`);
      return EXIT.ok;
    }
    default:
      throw new UsageError(
        `expected admin users add|list|disable|delete, admin tokens issue|list|revoke or admin audit; bedrock help admin shows its usage`,
      );
  }
}
