/**
 * Errors of the conversation service as clients see them. Its answers are already written for
 * users (codes and messages a person can act on), so they pass through with their code, message and
 * `bedrock.v1.Rejection` detail; what would leak internals (connection errors naming hosts,
 * internal or unknown failures) becomes a generic message and the detail is logged.
 * docs/web-bff.md, "Balancing over the conversation replicas".
 */
import { Code, ConnectError } from '@connectrpc/connect';
import { RejectionSchema, rejectionOf } from '@bedrock/contracts';
import { classifyCallFailure, type Logger } from '@bedrock/platform/server';

/** Codes whose messages come from the conversation service's own validation and state machine. */
const PASS_THROUGH = new Set<Code>([
  Code.InvalidArgument,
  Code.NotFound,
  Code.FailedPrecondition,
  Code.AlreadyExists,
  Code.PermissionDenied,
  Code.OutOfRange,
  Code.ResourceExhausted,
  Code.Aborted,
]);

/** The upstream connection failed, or broke after the call was sent (not a status the service answered). */
function connectionFailed(err: unknown): boolean {
  const failure = classifyCallFailure(err);
  return failure === 'not-sent' || failure === 'broken';
}

/**
 * The error for a failed call to the conversation service. `callerSignal` is the client's
 * own call's signal: a call the client cancelled stays CANCELED; one the upstream ended
 * (CANCELED without the client asking) is UNAVAILABLE.
 *
 * A connection that could not be made or broke during the call is UNAVAILABLE, whatever code
 * the HTTP/2 client gave it: a reset socket comes out of connect-node as ABORTED ("read
 * ECONNRESET"), a stream whose connection closed under it as CANCELED or INTERNAL ("http/2
 * stream closed with error code ..."). Clients retry UNAVAILABLE (with the same request id for
 * a change: docs/conversation.md); ABORTED and INTERNAL would read as a refusal or a bug.
 */
export function mapUpstreamError(err: unknown, logger: Logger, method: string, callerSignal?: AbortSignal): ConnectError {
  const e = ConnectError.from(err);
  if (callerSignal?.aborted) return new ConnectError('the call was cancelled', Code.Canceled);
  if (e.code === Code.Unavailable || connectionFailed(err) || (e.code === Code.Canceled && callerSignal !== undefined)) {
    logger.warn({ method, code: Code[e.code], err: e.message }, 'conversation service unavailable');
    return new ConnectError('the conversation service is unavailable; try again shortly', Code.Unavailable);
  }
  if (PASS_THROUGH.has(e.code)) {
    // Only the Rejection detail passes; nothing else the upstream attached.
    const rejection = rejectionOf(e);
    return new ConnectError(e.rawMessage, e.code, undefined, rejection ? [{ desc: RejectionSchema, value: rejection }] : undefined);
  }
  switch (e.code) {
    case Code.Canceled:
      return new ConnectError('the call was cancelled', Code.Canceled);
    case Code.DeadlineExceeded:
      logger.warn({ method, err: e.message }, 'conversation service call timed out');
      return new ConnectError('the conversation service did not answer in time; try again', Code.DeadlineExceeded);
    case Code.Unauthenticated:
      // web-bff's own service credential was refused: a deployment problem, not the user's.
      logger.error(
        { method, code: Code[e.code], err: e.message },
        "the conversation service refused web-bff's service token: check BEDROCK_SERVICE_TOKEN_FILE here and the conversation service's BEDROCK_SERVICE_PEERS_FILE (a web-bff entry)",
      );
      return new ConnectError('internal error', Code.Internal);
    default:
      logger.error({ method, code: Code[e.code], err: e.message }, 'conversation service call failed');
      return new ConnectError('internal error', Code.Internal);
  }
}
