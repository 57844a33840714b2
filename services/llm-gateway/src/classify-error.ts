/**
 * Classifies a failed model call for the state machine, which owns retries (REQ-BED-006):
 * the gateway only says what kind of failure it was, whether a retry can help, and the
 * provider's retry-after hint. See docs/llm-gateway.md for the table.
 */
import { APIConnectionError, APIConnectionTimeoutError, APIError } from '@anthropic-ai/sdk';
import { ErrorKind } from '@bedrock/contracts';
import { sentence, sentences } from './sentences.ts';

export interface Classified {
  readonly kind: ErrorKind;
  readonly retryable: boolean;
  /** Actionable, safe to show to the user. */
  readonly message: string;
  /** 0 when the provider gave no hint. */
  readonly retryAfterMs: number;
  /** 0 for network errors and errors sent mid-stream. */
  readonly httpStatus: number;
  readonly providerRequestId: string;
}

/** The API's error types (the `error.type` of an error body or a mid-stream error event). */
const BY_TYPE: Readonly<Record<string, { kind: ErrorKind; retryable: boolean }>> = {
  authentication_error: { kind: ErrorKind.AUTH, retryable: false },
  permission_error: { kind: ErrorKind.AUTH, retryable: false },
  billing_error: { kind: ErrorKind.AUTH, retryable: false },
  invalid_request_error: { kind: ErrorKind.INVALID_REQUEST, retryable: false },
  not_found_error: { kind: ErrorKind.INVALID_REQUEST, retryable: false },
  request_too_large: { kind: ErrorKind.INVALID_REQUEST, retryable: false },
  rate_limit_error: { kind: ErrorKind.RATE_LIMIT, retryable: true },
  api_error: { kind: ErrorKind.SERVER, retryable: true },
  overloaded_error: { kind: ErrorKind.SERVER, retryable: true },
  timeout_error: { kind: ErrorKind.SERVER, retryable: true },
};

function byStatus(status: number, shouldRetryHeader: string | null): { kind: ErrorKind; retryable: boolean } {
  if (status === 401 || status === 402 || status === 403) return { kind: ErrorKind.AUTH, retryable: false };
  if (status === 429) return { kind: ErrorKind.RATE_LIMIT, retryable: true };
  if (status === 408) return { kind: ErrorKind.NETWORK, retryable: true };
  // The SDK's own policy retries lock conflicts; so does the state machine.
  if (status === 409) return { kind: ErrorKind.SERVER, retryable: true };
  if (status >= 500) return { kind: ErrorKind.SERVER, retryable: true };
  if (status >= 400) return { kind: ErrorKind.INVALID_REQUEST, retryable: false };
  return { kind: ErrorKind.UNKNOWN, retryable: shouldRetryHeader === 'true' };
}

/** `retry-after-ms` (float ms) wins over `retry-after` (seconds or an HTTP date). Capped at 1 h. */
export function parseRetryAfter(headers: Headers | undefined, now = Date.now()): number {
  if (!headers) return 0;
  const cap = (ms: number) => (Number.isFinite(ms) && ms > 0 ? Math.min(Math.round(ms), 3_600_000) : 0);
  const ms = headers.get('retry-after-ms');
  if (ms && Number.isFinite(Number(ms))) return cap(Number(ms));
  const value = headers.get('retry-after')?.trim();
  if (!value) return 0;
  if (/^\d+(\.\d+)?$/.test(value)) return cap(Number(value) * 1000);
  const date = Date.parse(value);
  return Number.isNaN(date) ? 0 : cap(date - now);
}

const ADVICE: Partial<Record<ErrorKind, string>> = {
  [ErrorKind.AUTH]: "Check ANTHROPIC_API_KEY and the account's permissions and billing.",
  [ErrorKind.INVALID_REQUEST]: 'The request was rejected as invalid; retrying will not help.',
  [ErrorKind.RATE_LIMIT]: 'The model provider is rate-limiting this account.',
  [ErrorKind.SERVER]: 'The model provider is overloaded or failing.',
  [ErrorKind.NETWORK]: 'The model provider could not be reached.',
};

function compose(kind: ErrorKind, what: string): string {
  return sentences(what, ADVICE[kind]);
}

/** Classifies anything the SDK call or the stream threw. */
export function classifyError(err: unknown): Classified {
  if (err instanceof APIConnectionTimeoutError) {
    return base(ErrorKind.NETWORK, true, compose(ErrorKind.NETWORK, 'The request to the model provider timed out'));
  }
  if (err instanceof APIConnectionError) {
    const cause = err.cause instanceof Error ? `: ${err.cause.message}` : '';
    return base(ErrorKind.NETWORK, true, compose(ErrorKind.NETWORK, `Connection to the model provider failed${cause}`));
  }
  if (err instanceof APIError) {
    const status = typeof err.status === 'number' ? err.status : 0;
    const type = err.type ?? null;
    // A status, when present, decides; a mid-stream error event has only its type.
    const rule = (status === 0 && type && BY_TYPE[type]) ||
      (status ? byStatus(status, err.headers?.get('x-should-retry') ?? null) : undefined) || { kind: ErrorKind.UNKNOWN, retryable: true };
    const where = status ? `HTTP ${status}` : 'mid-stream';
    const detail = err.apiMessage ?? err.message;
    return {
      kind: rule.kind,
      retryable: rule.retryable,
      message: compose(rule.kind, `Model provider error (${where}${type ? ` ${type}` : ''}): ${detail}`),
      retryAfterMs: parseRetryAfter(err.headers),
      httpStatus: status,
      providerRequestId: err.requestID ?? '',
    };
  }
  const network = networkCause(err);
  if (network) {
    return base(
      ErrorKind.NETWORK,
      true,
      compose(ErrorKind.NETWORK, `The connection to the model provider broke mid-response (${network})`),
    );
  }
  if (err instanceof SyntaxError) {
    // JSON.parse of an SSE data line failed: the transfer was corrupted or the provider misbehaved.
    return base(ErrorKind.SERVER, true, compose(ErrorKind.SERVER, `The model provider sent a malformed stream event (${err.message})`));
  }
  const message = err instanceof Error ? err.message : String(err);
  return base(ErrorKind.UNKNOWN, false, sentence(`Unexpected error calling the model provider: ${message}`));
}

export function base(kind: ErrorKind, retryable: boolean, message: string, providerRequestId = ''): Classified {
  return { kind, retryable, message, retryAfterMs: 0, httpStatus: 0, providerRequestId };
}

/** Socket-level error codes (Node and undici) that mean the connection failed, not the request. */
const NETWORK_CODES = new Set([
  'ECONNRESET',
  'ECONNREFUSED',
  'ECONNABORTED',
  'EPIPE',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EAI_AGAIN',
  'ENOTFOUND',
]);

/**
 * undici reports a body cut after the headers as `TypeError: terminated` caused by a
 * SocketError; walk the cause chain for such codes. Returns a short description or undefined.
 */
function networkCause(err: unknown): string | undefined {
  // Duck-typed: undici's errors may come from another realm (e.g. under a test VM), where instanceof fails.
  const asError = (e: unknown) =>
    typeof e === 'object' && e !== null ? (e as { name?: unknown; message?: unknown; code?: unknown; cause?: unknown }) : undefined;
  let e = asError(err);
  for (let depth = 0; e && depth < 5; e = asError(e.cause), depth++) {
    if (typeof e.code === 'string' && (NETWORK_CODES.has(e.code) || e.code.startsWith('UND_ERR_')))
      return `${e.code}: ${String(e.message)}`;
  }
  const top = asError(err);
  return top?.name === 'TypeError' && top.message === 'terminated' ? 'terminated' : undefined;
}
