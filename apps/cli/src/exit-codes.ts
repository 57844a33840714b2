/**
 * Exit codes of `bedrock` (docs/cli.md). Scripts can tell why a command failed. Imports
 * nothing, so that `--help` stays cheap; errors.ts maps errors to these codes.
 */

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
