/**
 * Retrying a user action, for the web UI and the `bedrock` CLI (no DOM and no Node APIs, so both can use
 * it). Each user action gets a fresh request id and every retry of it repeats that id: the conversation
 * service applies the action once and answers a retry with the first outcome (docs/conversation.md,
 * "Idempotent requests"; the policy as users see it: docs/cli.md, "Retries").
 */
import { Code, ConnectError } from '@connectrpc/connect';

/**
 * Codes worth another attempt with the same request id: UNAVAILABLE (the server or its upstream could not
 * be reached, or the connection broke during the call) and ABORTED.
 */
export const RETRYABLE_CODES: ReadonlySet<Code> = new Set([Code.Unavailable, Code.Aborted]);

export interface RetryPolicy {
  /** Attempts in all, the first included. */
  readonly attempts: number;
  /** No attempt starts later than this after the first one, ms. */
  readonly budgetMs: number;
  /** Delay before the second attempt, ms; doubled for each further one, up to `maxDelayMs` (±20% jitter). */
  readonly baseDelayMs: number;
  readonly maxDelayMs: number;
}

export const DEFAULT_RETRY_POLICY: RetryPolicy = { attempts: 6, budgetMs: 30_000, baseDelayMs: 250, maxDelayMs: 5000 };

export interface RetryNotice {
  /** The attempt about to start (2, 3, ...). */
  readonly attempt: number;
  readonly attempts: number;
  readonly delayMs: number;
  /** Why the previous attempt failed. */
  readonly error: ConnectError;
}

export interface RetryOptions {
  readonly policy?: RetryPolicy;
  /** Stops waiting (the action then fails with CANCELED). */
  readonly signal?: AbortSignal;
  /** Told before each retry (a status line, a note on stderr). */
  readonly onRetry?: (notice: RetryNotice) => void;
  /** For tests. */
  readonly sleep?: (ms: number, signal?: AbortSignal) => Promise<void>;
  readonly now?: () => number;
  readonly random?: () => number;
}

/** How an action that was retried until the policy ran out ended. */
export interface Exhausted {
  readonly attempts: number;
  readonly elapsedMs: number;
  /** The last attempt's error. */
  readonly last: ConnectError;
}

// Not a ConnectError subclass: ConnectError's instanceof is duck-typed and would take any ConnectError for one.
const exhausted = new WeakMap<object, Exhausted>();

/** The last error with "(gave up after N attempts over Xs)" added; {@link retriesExhausted} tells it apart. */
function exhaustedError(last: ConnectError, attempts: number, elapsedMs: number): ConnectError {
  const err = new ConnectError(
    `${last.rawMessage} (gave up after ${attempts} attempts over ${(elapsedMs / 1000).toFixed(1)}s)`,
    last.code,
    last.metadata,
    undefined,
    last,
  );
  exhausted.set(err, { attempts, elapsedMs, last });
  return err;
}

/** Set when `err` ended an action whose retries ran out. */
export function retriesExhausted(err: unknown): Exhausted | undefined {
  return typeof err === 'object' && err !== null ? exhausted.get(err) : undefined;
}

/**
 * A fresh request id: a random UUID (v4). Uses getRandomValues, which browsers offer on plain
 * http too (randomUUID needs a secure context).
 */
export function newRequestId(): string {
  const b = globalThis.crypto.getRandomValues(new Uint8Array(16));
  b[6] = (b[6]! & 0x0f) | 0x40;
  b[8] = (b[8]! & 0x3f) | 0x80;
  const hex = Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

function defaultSleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal?.addEventListener('abort', done, { once: true });
  });
}

/**
 * Runs one user action: `call` gets the action's request id (the same on every attempt) and
 * is run again on UNAVAILABLE or ABORTED, with exponential backoff, until it succeeds, fails otherwise, or the
 * policy runs out (a few attempts, bounded in time); then the last error is thrown saying so ({@link retriesExhausted}).
 */
export async function retrying<T>(call: (requestId: string) => Promise<T>, options: RetryOptions = {}): Promise<T> {
  const policy = options.policy ?? DEFAULT_RETRY_POLICY;
  const sleep = options.sleep ?? defaultSleep;
  const now = options.now ?? Date.now;
  const random = options.random ?? Math.random;
  const requestId = newRequestId();
  const started = now();
  for (let attempt = 1; ; attempt++) {
    try {
      return await call(requestId);
    } catch (err) {
      const e = ConnectError.from(err);
      if (options.signal?.aborted || !RETRYABLE_CODES.has(e.code)) throw err;
      const delayMs = Math.round(Math.min(policy.maxDelayMs, policy.baseDelayMs * 2 ** (attempt - 1)) * (0.8 + 0.4 * random()));
      const elapsed = now() - started;
      if (attempt >= policy.attempts || elapsed + delayMs > policy.budgetMs) {
        // One attempt is no retry: the error stays as it was.
        throw attempt > 1 ? exhaustedError(e, attempt, elapsed) : err;
      }
      options.onRetry?.({ attempt: attempt + 1, attempts: policy.attempts, delayMs, error: e });
      await sleep(delayMs, options.signal);
      if (options.signal?.aborted) throw new ConnectError('cancelled while waiting to retry', Code.Canceled);
    }
  }
}
