/**
 * The periods spend and limits are counted in, all in UTC: a day (from midnight), a month
 * (from the first), a minute. Pure: the caller passes the time (the service's clock, which
 * tests move).
 */

/** The UTC day of `at`, as Postgres takes a date: YYYY-MM-DD. */
export function utcDay(at: Date): string {
  return at.toISOString().slice(0, 10);
}

/** The first day of `at`'s UTC month, YYYY-MM-DD. */
export function utcMonthStart(at: Date): string {
  return `${at.toISOString().slice(0, 7)}-01`;
}

/** When the daily budget resets: the next UTC midnight. */
export function nextUtcMidnight(at: Date): Date {
  return new Date(Date.UTC(at.getUTCFullYear(), at.getUTCMonth(), at.getUTCDate() + 1));
}

/** When the monthly budget resets: the first of the next UTC month, at midnight. */
export function nextUtcMonth(at: Date): Date {
  return new Date(Date.UTC(at.getUTCFullYear(), at.getUTCMonth() + 1, 1));
}

/** When a per-minute count resets: the start of the next UTC minute. */
export function nextUtcMinute(at: Date): Date {
  return new Date(Math.floor(at.getTime() / 60_000) * 60_000 + 60_000);
}
