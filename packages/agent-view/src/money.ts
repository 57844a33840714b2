/**
 * Money as Bedrock counts it: whole micro-dollars (1 USD = 1,000,000), never floating point
 * in storage. Pure: for the CLI and the web UI alike.
 */

/**
 * `micros` as dollars: cents from a cent up ("$12.34", rounded down so a figure never shows
 * more than was spent), four decimals below a cent ("$0.0042"), every decimal it takes below a
 * hundredth of a cent ("$0.000042": never "$0.0000" for something), "$0.00" for nothing.
 */
export function formatUsd(micros: number | bigint): string {
  const m = BigInt(micros);
  const sign = m < 0n ? '-' : '';
  const abs = m < 0n ? -m : m;
  if (abs === 0n) return '$0.00';
  if (abs < 100n) return `${sign}$0.${abs.toString().padStart(6, '0').replace(/0+$/, '')}`;
  if (abs < 10_000n) return `${sign}$0.${(abs / 100n).toString().padStart(4, '0')}`;
  const cents = abs / 10_000n;
  const dollars = (cents / 100n).toString().replace(/\B(?=(\d{3})+(?!\d))/g, ',');
  return `${sign}$${dollars}.${(cents % 100n).toString().padStart(2, '0')}`;
}

/** "$1.23 of $5.00 (25%)" against a budget; a budget of 0 is no budget: "$1.23 (no budget)". */
export function spendAgainst(spentMicros: number | bigint, budgetMicros: number | bigint): string {
  const spent = BigInt(spentMicros);
  const budget = BigInt(budgetMicros);
  if (budget <= 0n) return `${formatUsd(spent)} (no budget)`;
  const percent = (spent * 100n) / budget;
  return `${formatUsd(spent)} of ${formatUsd(budget)} (${percent}%)`;
}

/**
 * Dollars as the user types them ("5", "$2.50", "0.125") in micro-dollars; "0" (or "$0") is 0.
 * Undefined when it is not a non-negative amount with at most six decimals.
 */
export function parseUsd(text: string): number | undefined {
  const match = /^\$?(\d{1,12})(?:\.(\d{1,6}))?$/.exec(text.trim());
  if (!match) return undefined;
  return Number(match[1]) * 1_000_000 + Number((match[2] ?? '').padEnd(6, '0'));
}

/**
 * The web UI's one line of spend: "Spent today $0.12 of $5.00 · this month $1.20 of $50.00";
 * a period without a budget shows its spend alone.
 */
export function spendSummary(
  todayMicros: number | bigint,
  dailyBudgetMicros: number | bigint,
  monthMicros: number | bigint,
  monthlyBudgetMicros: number | bigint,
): string {
  const part = (spent: number | bigint, budget: number | bigint) =>
    BigInt(budget) > 0n ? `${formatUsd(spent)} of ${formatUsd(budget)}` : formatUsd(spent);
  return `Spent today ${part(todayMicros, dailyBudgetMicros)} · this month ${part(monthMicros, monthlyBudgetMicros)}`;
}

/** The token counts of a Usage the cache-read share needs (Conversation.total_usage has them). */
export interface CacheCounts {
  readonly inputTokens: number | bigint;
  readonly cacheReadInputTokens: number | bigint;
  readonly cacheCreationInputTokens: number | bigint;
}

/**
 * Of all the input the model was sent, the part read from the prompt cache (billed at 0.1x):
 * cache_read / (input + cache_read + cache_creation), 0..1. Undefined when nothing was sent.
 */
export function cacheReadShare(u: CacheCounts): number | undefined {
  const read = Number(u.cacheReadInputTokens);
  const all = Number(u.inputTokens) + read + Number(u.cacheCreationInputTokens);
  return all > 0 ? read / all : undefined;
}

/**
 * The whole percent of the input read from the cache, rounded down (so 99.9% is not called 100%);
 * undefined when the cache was never used (nothing read or written: a model or deployment without
 * prompt caching says nothing).
 */
export function cacheReadPercent(u: CacheCounts | undefined): number | undefined {
  if (!u || Number(u.cacheReadInputTokens) + Number(u.cacheCreationInputTokens) === 0) return undefined;
  const read = Number(u.cacheReadInputTokens);
  const all = Number(u.inputTokens) + read + Number(u.cacheCreationInputTokens);
  // Whole percent from integers (share * 100 in floating point gives 28.999… for 29%).
  return Math.floor((read * 100) / all);
}

/** "cache 92% read" (see cacheReadPercent); "" when the cache was never used. */
export function cacheReadPhrase(u: CacheCounts | undefined): string {
  const percent = cacheReadPercent(u);
  return percent === undefined ? '' : `cache ${percent}% read`;
}
