/**
 * Spend and limits in the CLI (docs/cli.md, "Spend and limits"): `bedrock usage` shows the
 * caller's spend today and this month against their budgets and their other limits
 * (ConversationService.GetUsage); `bedrock admin limits USER [--daily USD] [--monthly USD]
 * [--busy N] [--per-minute N] [--conversations N] [--reset]` shows or sets a user's (AdminService, admins only).
 */
import { toJson } from '@bufbuild/protobuf';
import { timestampDate } from '@bufbuild/protobuf/wkt';
import { createClient } from '@connectrpc/connect';
import { AdminService, UserUsageSchema, type UserUsage } from '@bedrock/contracts';
import { cacheReadPercent, formatUsd, parseUsd, spendAgainst } from '@bedrock/agent-view/money';
import { apiTransport, connect } from './connection.ts';
import { EXIT, UsageError } from './exit-codes.ts';
import type { Output } from './output.ts';
import type { OptionValues } from './usage.ts';

const count = (n: number, none = 'no limit') => (n === 0 ? none : String(n));

/** The figures, one a line: spend against the budgets, then the other limits and which are the user's own. */
export function renderUsage(u: UserUsage): string {
  const l = u.limits!;
  const own = (field: string) => (u.limitsSet.includes(field) ? '' : ' (default)');
  const at = (t: UserUsage['dayResetsAt']) => (t ? timestampDate(t).toISOString().replace('.000Z', 'Z') : '');
  return [
    `user: ${u.userId}`,
    `today: ${spendAgainst(u.spentTodayMicros, l.dailyBudgetMicros)}${own('daily_budget_micros')}; resets ${at(u.dayResetsAt)}`,
    `this month: ${spendAgainst(u.spentThisMonthMicros, l.monthlyBudgetMicros)}${own('monthly_budget_micros')}; resets ${at(u.monthResetsAt)}`,
    `busy conversations: ${u.busyConversations} of ${count(l.maxBusyConversations)}${own('max_busy_conversations')}`,
    `messages per minute: ${count(l.messagesPerMinute)}${own('messages_per_minute')}`,
    `conversations: ${u.conversations} of ${count(l.maxConversations)}${own('max_conversations')}`,
    ...cacheLine(u),
    // Budget held for requests in flight (each one's worst case until its response is priced).
    ...(u.reservedMicros > 0n ? [`held for requests in flight: ${formatUsd(u.reservedMicros)}`] : []),
    '',
  ].join('\n');
}

/** "prompt cache: 92% read today, 88% this month": of the input the model was sent, the part read from the cache (billed at 0.1x). */
function cacheLine(u: UserUsage): string[] {
  const today = cacheReadPercent(u.tokensToday);
  const month = cacheReadPercent(u.tokensThisMonth);
  if (month === undefined) return [];
  return [`prompt cache: ${today === undefined ? 'not used today' : `${today}% read today`}, ${month}% this month`];
}

function print(output: Output, json: boolean, u: UserUsage): number {
  output.out(json ? `${JSON.stringify(toJson(UserUsageSchema, u))}\n` : renderUsage(u));
  return EXIT.ok;
}

/** `bedrock usage`: the caller's own figures. */
export async function usage(rest: string[], values: OptionValues, env: NodeJS.ProcessEnv, output: Output): Promise<number> {
  if (rest.length > 0) throw new UsageError(`expected no arguments after usage; bedrock help usage shows its usage`);
  const res = await connect(env).getUsage({});
  return print(output, values.json, res.usage!);
}

function whole(text: string, flag: string): number {
  if (!/^\d{1,9}$/.test(text))
    throw new UsageError(`--${flag} takes a whole number (0: no limit), not "${text}"; bedrock help admin shows its usage`);
  return Number(text);
}

function dollars(text: string, flag: string): bigint {
  const micros = parseUsd(text);
  if (micros === undefined)
    throw new UsageError(
      `--${flag} takes an amount in USD such as 5 or 2.50 (0: no budget), not "${text}"; bedrock help admin shows its usage`,
    );
  return BigInt(micros);
}

/** `bedrock admin limits USER [...]`: without a limit flag shows the user's figures, else sets what is given. */
export async function adminLimits(args: string[], values: OptionValues, env: NodeJS.ProcessEnv, output: Output): Promise<number> {
  if (args.length !== 1) throw new UsageError(`expected the user id after admin limits; bedrock help admin shows its usage`);
  const userId = args[0]!;
  const client = createClient(AdminService, apiTransport(env));
  const change = {
    ...(values.daily !== undefined ? { dailyBudgetMicros: dollars(values.daily, 'daily') } : {}),
    ...(values.monthly !== undefined ? { monthlyBudgetMicros: dollars(values.monthly, 'monthly') } : {}),
    ...(values.busy !== undefined ? { maxBusyConversations: whole(values.busy, 'busy') } : {}),
    ...(values['per-minute'] !== undefined ? { messagesPerMinute: whole(values['per-minute'], 'per-minute') } : {}),
    ...(values.conversations !== undefined ? { maxConversations: whole(values.conversations, 'conversations') } : {}),
  };
  if (values.reset && Object.keys(change).length > 0)
    throw new UsageError(`--reset returns every limit to the defaults: give no other limit with it; bedrock help admin shows its usage`);
  if (!values.reset && Object.keys(change).length === 0) {
    const res = await client.getUserLimits({ userId });
    return print(output, values.json, res.usage!);
  }
  const res = await client.setUserLimits({ userId, ...change, reset: values.reset === true });
  return print(output, values.json, res.usage!);
}
