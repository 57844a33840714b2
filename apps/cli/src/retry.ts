/**
 * The CLI's retries (docs/cli.md, "Retries"): every command that changes something sends a
 * fresh request id and, on UNAVAILABLE or ABORTED, sends the same request again with the
 * same id, with backoff, for at most BEDROCK_RETRY_FOR (default 30s, 6 attempts); each retry
 * is announced on stderr. The conversation service applies the request once whatever the
 * number of attempts (docs/conversation.md, "Idempotent requests").
 */
import { Code } from '@connectrpc/connect';
import { DEFAULT_RETRY_POLICY, retrying, type RetryPolicy } from '@bedrock/agent-view/retry';
import { UsageError } from './exit-codes.ts';
import type { Output } from './render.ts';

/** Runs one user action with retries; `call` gets its request id. */
export type Retry = <T>(call: (requestId: string) => Promise<T>) => Promise<T>;

/** BEDROCK_RETRY_FOR: how long to keep retrying (500ms, 30s, 2m; 0 = never retry). */
export function retryPolicyFromEnv(env: NodeJS.ProcessEnv): RetryPolicy {
  const raw = env.BEDROCK_RETRY_FOR?.trim();
  if (!raw) return DEFAULT_RETRY_POLICY;
  const match = /^(\d+(?:\.\d+)?)(ms|s|m)?$/.exec(raw);
  if (!match) throw new UsageError(`BEDROCK_RETRY_FOR=${raw}: expected a duration such as 500ms, 30s or 2m (0 turns retries off)`);
  const ms = Number(match[1]) * ({ ms: 1, s: 1000, m: 60_000 } as const)[(match[2] ?? 's') as 'ms' | 's' | 'm'];
  if (ms === 0) return { ...DEFAULT_RETRY_POLICY, attempts: 1, budgetMs: 0 };
  // A longer budget allows more attempts at the longest backoff.
  const attempts = Math.max(DEFAULT_RETRY_POLICY.attempts, Math.ceil(ms / DEFAULT_RETRY_POLICY.maxDelayMs) + 1);
  return { ...DEFAULT_RETRY_POLICY, attempts, budgetMs: ms };
}

export function createRetry(options: { readonly policy: RetryPolicy; readonly output: Output; readonly signal: AbortSignal }): Retry {
  return (call) =>
    retrying(call, {
      policy: options.policy,
      signal: options.signal,
      onRetry: ({ attempt, attempts, delayMs, error }) =>
        options.output.err(
          `bedrock: ${Code[error.code]}: ${error.rawMessage}; retrying in ${(delayMs / 1000).toFixed(1)}s (attempt ${attempt} of ${attempts})\n`,
        ),
    });
}
