/** Exit codes of `bedrock` (docs/cli.md). Scripts can tell why a command failed. */
import { Code, ConnectError } from '@connectrpc/connect';

export const EXIT = {
  ok: 0,
  /** `send --wait` / `chat`: the turn ended with the conversation in ERROR (or FAILED). */
  turnError: 1,
  /** Bad arguments or options. */
  usage: 2,
  /** The server refused the request: not found, invalid, busy (cancel first), unauthenticated, ... */
  rejected: 3,
  /** The server or the connection failed: unavailable, internal, timeout. */
  server: 4,
  /** `send --wait`: the agent waits for approval of write access (`bedrock approve|deny ID`). */
  awaitingApproval: 5,
  /** `send --wait`: the context is exhausted (`bedrock new --from ID` continues). */
  exhausted: 6,
  /** Interrupted by Ctrl-C. */
  interrupted: 130,
} as const;

export class UsageError extends Error {}

/** Codes the client can act on (fix the request, cancel first, use another token). */
const REJECTIONS = new Set<Code>([
  Code.InvalidArgument,
  Code.NotFound,
  Code.AlreadyExists,
  Code.PermissionDenied,
  Code.FailedPrecondition,
  Code.OutOfRange,
  Code.Unauthenticated,
]);

export function exitCodeOf(err: unknown): number {
  if (err instanceof UsageError) return EXIT.usage;
  const e = ConnectError.from(err);
  if (e.code === Code.Canceled) return EXIT.interrupted;
  return REJECTIONS.has(e.code) ? EXIT.rejected : EXIT.server;
}

/** One line for stderr. */
export function describeError(err: unknown): string {
  if (err instanceof UsageError) return err.message;
  const e = ConnectError.from(err);
  const hint =
    e.code === Code.Unauthenticated
      ? ' (set BEDROCK_TOKEN, or run the embedded default so its local token exists)'
      : e.code === Code.Unavailable
        ? ' (is web-bff running? BEDROCK_URL sets its address)'
        : '';
  return `${Code[e.code]}: ${e.rawMessage}${hint}`;
}
