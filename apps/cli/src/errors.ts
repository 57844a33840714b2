/** How a failed command ends: its exit code (exit-codes.ts) and one line for stderr. */
import { Code, ConnectError } from '@connectrpc/connect';
import { rejectionOf } from '@bedrock/contracts';
import { EXIT, UsageError } from './exit-codes.ts';

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
  // The conversation service refused the action (busy, finished, ...): the user can act on it.
  if (rejectionOf(e)) return EXIT.rejected;
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
