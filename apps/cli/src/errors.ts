/** How a failed command ends: its exit code (exit-codes.ts) and one line for stderr. */
import { Code, ConnectError } from '@connectrpc/connect';
import { rejectionOf } from '@bedrock/contracts';
import { join } from 'node:path';
import { DEFAULT_URL, dataDir, resolveToken } from './connection.ts';
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

/** Where the token came from, or where it was looked for in vain. */
function tokenHint(env: NodeJS.ProcessEnv): string {
  if (env.BEDROCK_TOKEN?.trim()) return 'the token in BEDROCK_TOKEN was refused: check it, or unset it to use the local token';
  const file = join(dataDir(env), 'token');
  if (!resolveToken(env))
    return `no token: BEDROCK_TOKEN is not set and ${file} does not exist (npm start writes it; or set BEDROCK_TOKEN, or BEDROCK_DATA_DIR to that start's data directory)`;
  return `the token in ${file} was refused (written by another start than the server's? set BEDROCK_DATA_DIR to its data directory, or BEDROCK_TOKEN)`;
}

/** One line for stderr, with what the user can do about it. */
export function describeError(err: unknown, env: NodeJS.ProcessEnv = process.env): string {
  if (err instanceof UsageError) return err.message;
  const e = ConnectError.from(err);
  const url = (env.BEDROCK_URL || DEFAULT_URL).replace(/\/+$/, '');
  const hint =
    e.code === Code.Unauthenticated
      ? ` (${tokenHint(env)})`
      : e.code === Code.Unavailable
        ? ` (cannot reach the Bedrock server at ${url}: is it running, e.g. npm start? BEDROCK_URL sets its address)`
        : rejectionOf(e)?.code === 'agent_busy'
          ? ' (send it with --queue to deliver it when the turn ends, --steer to give it to the agent after its running tools, or --interrupt to cancel the turn first)'
          : '';
  return `${Code[e.code]}: ${e.rawMessage}${hint}`;
}
