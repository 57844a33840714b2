/**
 * A change that can carry a `request_id` but came without one gets one of web-bff's own
 * (`bff-<uuid>`) before it is sent upstream, so that web-bff may send it again to another
 * conversation replica when the connection broke after it went out (`retrySafe`): the
 * conversation service answers a repeat with the first outcome and applies it once. Without it,
 * such a call (a bare API client's SendMessage, say, sent in the moment a replica died) could only
 * fail with UNAVAILABLE. A client's own id is kept as it is: it also covers the client's retries,
 * which web-bff's cannot. docs/web-bff.md, "Retries, only when safe".
 */
import { randomUUID } from 'node:crypto';
import { ScalarType, type DescMessage, type DescMethod } from '@bufbuild/protobuf';
import { MethodOptions_IdempotencyLevel } from '@bufbuild/protobuf/wkt';
import type { Transport } from '@connectrpc/connect';

/** The prefix of the request ids web-bff gives (a client's may be anything else). */
const BFF_REQUEST_ID_PREFIX = 'bff-';

/**
 * What the proto declares safe to repeat (`option idempotency_level`): NO_SIDE_EFFECTS for reads,
 * IDEMPOTENT for changes that set absolute values. The proto is the one place this is said.
 */
export function declaredRepeatable(method: DescMethod): boolean {
  return (
    method.idempotency === MethodOptions_IdempotencyLevel.NO_SIDE_EFFECTS ||
    method.idempotency === MethodOptions_IdempotencyLevel.IDEMPOTENT
  );
}

const carriesRequestId = new WeakMap<DescMessage, boolean>();

/** Whether `message` has a `request_id` string field (found once per message type). */
function hasRequestId(message: DescMessage): boolean {
  let has = carriesRequestId.get(message);
  if (has === undefined) {
    const field = message.fields.find((f) => f.name === 'request_id');
    has = field !== undefined && field.fieldKind === 'scalar' && field.scalar === ScalarType.STRING;
    carriesRequestId.set(message, has);
  }
  return has;
}

/** `input` with a request id of web-bff's own when `method` is a change that takes one and has none. */
export function withRequestId<I>(method: DescMethod, input: I): I {
  if (method.methodKind !== 'unary' || declaredRepeatable(method) || !hasRequestId(method.input)) return input;
  const given = (input as { requestId?: unknown }).requestId;
  if (typeof given === 'string' && given !== '') return input;
  return { ...input, requestId: `${BFF_REQUEST_ID_PREFIX}${randomUUID()}` };
}

/** `transport` with {@link withRequestId} applied to every unary call. */
export function givingRequestIds(transport: Transport): Transport {
  return {
    unary: (method, signal, timeoutMs, header, input, contextValues) =>
      transport.unary(method, signal, timeoutMs, header, withRequestId(method, input), contextValues),
    stream: (method, signal, timeoutMs, header, input, contextValues) =>
      transport.stream(method, signal, timeoutMs, header, input, contextValues),
  };
}
