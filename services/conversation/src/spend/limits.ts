/**
 * Per-user limits (docs/conversation.md, "Limits"): budgets per UTC day and month held through
 * reservations, busy conversations, messages per minute, conversations owned. Decides with the
 * figures store/user-limits.ts reads; the racing counts are taken under per-user locks.
 */
import type { Pool, PoolClient } from 'pg';
import { createKeyedChain } from '../keyed-chain.ts';
import { Code, ConnectError } from '@connectrpc/connect';
import { create } from '@bufbuild/protobuf';
import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import { RejectionSchema, TokenTotalsSchema, UserLimitsSchema, UserUsageSchema, type UserUsage } from '@bedrock/contracts';
import { NO_TOKENS, type TokenCounts } from '../store/conversation-store.ts';
import { createUserLimitsStore, type LimitsRow, type TokenTotalsRow } from '../store/user-limits.ts';
import { clientDetails, type AuditActor } from '../store/audit-store.ts';
import { formatUsd } from '@bedrock/agent-view/money';
import { nextUtcMidnight, nextUtcMinute, nextUtcMonth, utcDay, utcMonthStart } from './periods.ts';

/** 0 is unlimited; budgets in micro-dollars. */
export interface Limits {
  readonly dailyBudgetMicros: number;
  readonly monthlyBudgetMicros: number;
  readonly maxBusyConversations: number;
  readonly messagesPerMinute: number;
  /** Top-level conversations a user may own (created, forked, continued). */
  readonly maxConversations: number;
}

/** A daily or a monthly budget above 0 (0 is none); store/applied-rows.ts `noBudgetOf` says the same in SQL. */
export function hasBudget(limits: Pick<Limits, 'dailyBudgetMicros' | 'monthlyBudgetMicros'>): boolean {
  return limits.dailyBudgetMicros > 0 || limits.monthlyBudgetMicros > 0;
}

export const LIMIT_FIELDS = [
  'dailyBudgetMicros',
  'monthlyBudgetMicros',
  'maxBusyConversations',
  'messagesPerMinute',
  'maxConversations',
] as const;
export type LimitField = (typeof LIMIT_FIELDS)[number];

/** The name of each limit in rejections and in UserUsage.limits_set (the proto field names). */
const LIMIT_NAMES: Record<LimitField, string> = {
  dailyBudgetMicros: 'daily_budget_micros',
  monthlyBudgetMicros: 'monthly_budget_micros',
  maxBusyConversations: 'max_busy_conversations',
  messagesPerMinute: 'messages_per_minute',
  maxConversations: 'max_conversations',
};

const COLUMNS: Record<LimitField, string> = LIMIT_NAMES;

export interface UsageFigures {
  readonly userId: string;
  readonly limits: Limits;
  readonly set: readonly LimitField[];
  readonly spentToday: number;
  readonly spentThisMonth: number;
  readonly busy: number;
  /** Held for LLM requests in flight (unexpired reservations), micro-dollars. */
  readonly reserved: number;
  /** Top-level conversations the user owns. */
  readonly conversations: number;
  /** Tokens of the user's responses in the UTC day and month (zeros where not read: the budget check). */
  readonly tokensToday: TokenCounts;
  readonly tokensThisMonth: TokenCounts;
  readonly at: Date;
}

function tokenTotals(row: TokenTotalsRow | undefined): TokenCounts {
  if (!row) return NO_TOKENS;
  return {
    input: Number(row.input),
    output: Number(row.output),
    cacheCreation: Number(row.cacheCreation),
    cacheRead: Number(row.cacheRead),
  };
}

function tokenTotalsToProto(t: TokenCounts) {
  return create(TokenTotalsSchema, {
    inputTokens: BigInt(t.input),
    outputTokens: BigInt(t.output),
    cacheCreationInputTokens: BigInt(t.cacheCreation),
    cacheReadInputTokens: BigInt(t.cacheRead),
  });
}

/** How long a reservation counts at most: a crash between reserving and settling cannot hold budget for longer. */
export const RESERVATION_TTL_MS = 60 * 60 * 1000;

/** An LLM request about to be emitted, for `reserve`. */
export interface ReservationRequest {
  readonly userId: string;
  readonly conversationId: string;
  readonly requestId: string;
  /** The request's worst-case cost (spend/estimate.ts). */
  readonly micros: number;
  /** What the same transition adds to the spend (a response it applies), not yet in user_daily_spend. */
  readonly pendingCostMicros: number;
}

export interface LimitsStore {
  /** The limits in force for `user`, which of them are set for the user, spend and busy count at `now`. */
  usage(userId: string, now: Date): Promise<UsageFigures>;
  /** What `user` may still spend at `now` before their tightest budget (micro-dollars, may be negative); null: no budget. */
  /** `client`: a connection the caller holds (inside its transaction), so that a pool of one cannot wait on itself. */
  remainingBudget(userId: string, now: Date, client?: PoolClient): Promise<number | null>;
  /**
   * Holds `request.micros` of the owner's budget for an LLM request about to be emitted, when
   * what is left (budgets − spend − the transition's own cost − other unexpired holds) is
   * positive; answers what was left before holding (null: no budget, nothing held). Under a
   * per-user transaction lock, so two replicas cannot both take the last of a budget: a request
   * is emitted only while something is left and each holds its worst case, so the spend can
   * pass a budget by at most one request's cost. On `client`'s transaction when given.
   */
  reserve(request: ReservationRequest, now: Date, client?: PoolClient): Promise<number | null>;
  /** Sets some limits (or, `reset`, every one back to the defaults) and audits the change in one statement. */
  set(userId: string, change: Partial<Limits> | 'reset', by: AuditActor, now: Date): Promise<UsageFigures>;
  /**
   * Checks the limits a SendMessage meets, then runs `apply` (the message). `startsTurn`: the
   * conversation is at rest, so the message makes it busy (the busy-conversation limit counts
   * it; then the count and `apply` run under the user's lock, so two replicas cannot both take
   * the last place). Throws RESOURCE_EXHAUSTED with a `limit_reached` Rejection when over one.
   */
  admitMessage<T>(userId: string, startsTurn: boolean, now: Date, apply: () => Promise<T>): Promise<T>;
  /**
   * Checks the number of conversations the user owns, then runs `create` under the user's lock
   * (so two replicas cannot both take the last place). RESOURCE_EXHAUSTED `limit_reached` over it.
   */
  admitConversation<T>(userId: string, now: Date, create: () => Promise<T>): Promise<T>;
}

export function usageToProto(u: UsageFigures): UserUsage {
  return create(UserUsageSchema, {
    userId: u.userId,
    limits: create(UserLimitsSchema, {
      dailyBudgetMicros: BigInt(u.limits.dailyBudgetMicros),
      monthlyBudgetMicros: BigInt(u.limits.monthlyBudgetMicros),
      maxBusyConversations: u.limits.maxBusyConversations,
      messagesPerMinute: u.limits.messagesPerMinute,
      maxConversations: u.limits.maxConversations,
    }),
    limitsSet: u.set.map((f) => LIMIT_NAMES[f]),
    spentTodayMicros: BigInt(u.spentToday),
    spentThisMonthMicros: BigInt(u.spentThisMonth),
    busyConversations: u.busy,
    reservedMicros: BigInt(u.reserved),
    conversations: u.conversations,
    tokensToday: tokenTotalsToProto(u.tokensToday),
    tokensThisMonth: tokenTotalsToProto(u.tokensThisMonth),
    dayResetsAt: timestampFromDate(nextUtcMidnight(u.at)),
    monthResetsAt: timestampFromDate(nextUtcMonth(u.at)),
  });
}

/** The error a SendMessage over a limit answers. */
export function limitError(limit: LimitField, message: string, resetsAt: Date | null): ConnectError {
  const rejection = create(RejectionSchema, {
    code: 'limit_reached',
    message,
    limit: LIMIT_NAMES[limit].replace(/_micros$/, ''),
    ...(resetsAt ? { resetsAt: timestampFromDate(resetsAt) } : {}),
  });
  return new ConnectError(message, Code.ResourceExhausted, undefined, [{ desc: RejectionSchema, value: rejection }]);
}

export function createLimitsStore(options: { readonly pool: Pool; readonly defaults: Limits }): LimitsStore {
  const { pool, defaults } = options;
  const rows = createUserLimitsStore(pool);
  /**
   * The advisory lock is held on a connection of its own while the message is applied on
   * another, so it needs a pool of two or more. A pool of one is the embedded mode's PGlite, one
   * session in one process: the in-process lock is then the whole lock (there is no other replica).
   */
  const poolSize = (pool as { options?: { max?: number } }).options?.max ?? 10;
  const crossReplica = poolSize > 1;
  /** At most poolSize - 1 connections hold locks, so that applying a message always finds one. */
  const lockHolders = createSemaphore(Math.max(1, poolSize - 1));
  /** Per user, the admissions running in this process, one after another. */
  const admissions = createKeyedChain();

  function withUserLock<T>(userId: string, fn: () => Promise<T>): Promise<T> {
    return admissions.run(userId, () => fn());
  }

  async function withAdvisoryLock<T>(userId: string, fn: () => Promise<T>): Promise<T> {
    await lockHolders.acquire();
    try {
      return await rows.withUserLock(userId, fn);
    } finally {
      lockHolders.release();
    }
  }

  /** `except`: a conversation whose hold is left out of `reserved` (the one about to replace it). */
  async function usage(userId: string, now: Date, client?: PoolClient, except = '', budgetOnly = false): Promise<UsageFigures> {
    const read = { userId, day: utcDay(now), monthStart: utcMonthStart(now), now, except };
    const row = await rows.readUsage(read, budgetOnly, client);
    const stored = row.limits;
    const set: LimitField[] = [];
    const value = (field: LimitField): number => {
      const v = stored?.[COLUMNS[field] as keyof LimitsRow];
      if (v === null || v === undefined) return defaults[field];
      set.push(field);
      return Number(v);
    };
    const limits: Limits = {
      dailyBudgetMicros: value('dailyBudgetMicros'),
      monthlyBudgetMicros: value('monthlyBudgetMicros'),
      maxBusyConversations: value('maxBusyConversations'),
      messagesPerMinute: value('messagesPerMinute'),
      maxConversations: value('maxConversations'),
    };
    return {
      userId,
      limits,
      set,
      spentToday: Number(row.today),
      spentThisMonth: Number(row.month),
      busy: row.busy,
      reserved: Number(row.reserved),
      conversations: row.conversations,
      tokensToday: tokenTotals(row.tokens?.today),
      tokensThisMonth: tokenTotals(row.tokens?.month),
      at: now,
    };
  }

  /** What is left of the tightest budget after `extra` more spend and the holds; null: no budget. */
  function left(u: UsageFigures, extra: number): number | null {
    const each: number[] = [];
    if (u.limits.dailyBudgetMicros > 0) each.push(u.limits.dailyBudgetMicros - u.spentToday - extra);
    if (u.limits.monthlyBudgetMicros > 0) each.push(u.limits.monthlyBudgetMicros - u.spentThisMonth - extra);
    return each.length > 0 ? Math.min(...each) - u.reserved : null;
  }

  async function reserveOn(client: PoolClient, r: ReservationRequest, now: Date): Promise<number | null> {
    await rows.lockReservations(client, r.userId);
    const remaining = left(await usage(r.userId, now, client, r.conversationId, true), r.pendingCostMicros);
    if (remaining !== null && remaining > 0) {
      await rows.holdReservation(client, {
        conversationId: r.conversationId,
        userId: r.userId,
        requestId: r.requestId,
        micros: r.micros,
        expiresAt: new Date(now.getTime() + RESERVATION_TTL_MS),
      });
    }
    return remaining;
  }

  /** Takes one message of the user's minute, or says the minute is full (one statement; replicas share the row). */
  async function takeMessage(userId: string, perMinute: number, now: Date): Promise<boolean> {
    const minute = new Date(Math.floor(now.getTime() / 60_000) * 60_000);
    return rows.takeMessage(userId, minute, perMinute);
  }

  /** Refuses a message when a budget is spent (until its reset) or held by requests in flight (until they finish). */
  function checkBudgets(u: UsageFigures): void {
    const { limits, at: now } = u;
    if (limits.dailyBudgetMicros > 0 && u.spentToday >= limits.dailyBudgetMicros) {
      const resets = nextUtcMidnight(now);
      throw limitError(
        'dailyBudgetMicros',
        `daily budget reached: ${formatUsd(u.spentToday)} of ${formatUsd(limits.dailyBudgetMicros)} spent today; it resets at ${resets.toISOString()}`,
        resets,
      );
    }
    if (limits.monthlyBudgetMicros > 0 && u.spentThisMonth >= limits.monthlyBudgetMicros) {
      const resets = nextUtcMonth(now);
      throw limitError(
        'monthlyBudgetMicros',
        `monthly budget reached: ${formatUsd(u.spentThisMonth)} of ${formatUsd(limits.monthlyBudgetMicros)} spent this month; it resets at ${resets.toISOString()}`,
        resets,
      );
    }
    // Spent: refused until the period resets. Held for requests in flight: until they finish (no reset time).
    const heldToday =
      limits.dailyBudgetMicros > 0 && u.spentToday < limits.dailyBudgetMicros && u.spentToday + u.reserved >= limits.dailyBudgetMicros;
    const heldMonth =
      limits.monthlyBudgetMicros > 0 &&
      u.spentThisMonth < limits.monthlyBudgetMicros &&
      u.spentThisMonth + u.reserved >= limits.monthlyBudgetMicros;
    if (heldToday || heldMonth) {
      const field = heldToday ? 'dailyBudgetMicros' : 'monthlyBudgetMicros';
      const spent = heldToday ? u.spentToday : u.spentThisMonth;
      throw limitError(
        field,
        `${heldToday ? 'daily' : 'monthly'} budget in use: ${formatUsd(spent)} of ${formatUsd(limits[field])} spent and the rest held for your LLM requests in flight (${formatUsd(u.reserved)} at most); send again when one of your conversations comes to rest`,
        null,
      );
    }
  }

  return {
    usage: (userId, now) => usage(userId, now),

    async remainingBudget(userId, now, client) {
      return left(await usage(userId, now, client), 0);
    },

    async reserve(request, now, client) {
      // No budget (most users): nothing to hold, one query and no lock, as before reservations.
      if (left(await usage(request.userId, now, client, request.conversationId, true), 0) === null) return null;
      if (client) return reserveOn(client, request, now);
      return rows.inTransaction((own) => reserveOn(own, request, now));
    },

    async set(userId, change, by, now) {
      const before = await usage(userId, now);
      if (change === 'reset') {
        await rows.resetLimits(userId, {
          userId: by.userId,
          action: 'limit_changed',
          conversationId: null,
          details: details(before, null),
        });
      } else {
        const after = { ...before.limits, ...change };
        await rows.setLimits(
          userId,
          {
            dailyBudgetMicros: change.dailyBudgetMicros ?? null,
            monthlyBudgetMicros: change.monthlyBudgetMicros ?? null,
            maxBusyConversations: change.maxBusyConversations ?? null,
            messagesPerMinute: change.messagesPerMinute ?? null,
            maxConversations: change.maxConversations ?? null,
          },
          by.userId,
          { userId: by.userId, action: 'limit_changed', conversationId: null, details: details(before, after) },
        );
      }
      return usage(userId, now);

      function details(old: UsageFigures, next: Limits | null): Record<string, unknown> {
        return { ...clientDetails(by), user_id: userId, old: old.limits, new: next ?? 'defaults' };
      }
    },

    async admitMessage(userId, startsTurn, now, apply) {
      const u = await usage(userId, now);
      const { limits } = u;
      checkBudgets(u);
      if (limits.messagesPerMinute > 0 && !(await takeMessage(userId, limits.messagesPerMinute, now))) {
        const resets = nextUtcMinute(now);
        throw limitError(
          'messagesPerMinute',
          `message rate reached: ${limits.messagesPerMinute} messages a minute; the next minute starts at ${resets.toISOString()}`,
          resets,
        );
      }
      const budgeted = hasBudget(limits);
      if (!startsTurn || (limits.maxBusyConversations === 0 && !budgeted)) return apply();
      const countThenApply = async () => {
        const again = await usage(userId, now);
        // Messages racing to start turns: each sees what the ones before it hold (their first request's reservation).
        if (budgeted) checkBudgets(again);
        const { busy } = again;
        if (limits.maxBusyConversations > 0 && busy >= limits.maxBusyConversations) {
          throw limitError(
            'maxBusyConversations',
            `busy conversations limit reached: ${busy} of ${limits.maxBusyConversations} of your conversations are working; wait for one to finish or cancel one`,
            null,
          );
        }
        return apply();
      };
      // The count and the message under the user's lock, so that of two messages racing for the
      // last place (or the last of a budget) the second counts what the first took: within this
      // replica an in-process lock; across replicas also a Postgres advisory lock.
      return withUserLock(userId, () => (crossReplica ? withAdvisoryLock(userId, countThenApply) : countThenApply()));
    },

    async admitConversation(userId, now, create) {
      const { limits } = await usage(userId, now);
      if (limits.maxConversations === 0) return create();
      const countThenCreate = async () => {
        const { conversations } = await usage(userId, now);
        if (conversations >= limits.maxConversations) {
          throw limitError(
            'maxConversations',
            `conversations limit reached: you have ${conversations} of ${limits.maxConversations} conversations; delete one you no longer need (bedrock rm ID) to make room`,
            null,
          );
        }
        return create();
      };
      return withUserLock(userId, () => (crossReplica ? withAdvisoryLock(userId, countThenCreate) : countThenCreate()));
    },
  };
}

/** A counting semaphore (in-process). */
function createSemaphore(permits: number): { acquire(): Promise<void>; release(): void } {
  let free = permits;
  const waiting: (() => void)[] = [];
  return {
    acquire() {
      if (free > 0) {
        free -= 1;
        return Promise.resolve();
      }
      return new Promise<void>((resolve) => waiting.push(resolve));
    },
    release() {
      const next = waiting.shift();
      if (next) next();
      else free += 1;
    },
  };
}
