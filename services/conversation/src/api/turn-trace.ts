/**
 * The trace context of one user action (a message, a cancel, an approval): the caller's W3C
 * `traceparent` (and `tracestate`) when valid, otherwise a new root trace. It goes into every
 * outbox job the action produces (`trace_context`), the gateway and the runner copy it into
 * their results, and the consumer passes it on to the next jobs, so one user turn is one trace
 * even when no service runs an OpenTelemetry SDK (docs/observability.md, "Tracing").
 */
import { randomBytes } from 'node:crypto';
import { TRACEPARENT, TRACESTATE } from '@bedrock/platform/server';

/** version-traceid-parentid-flags, lowercase hex (W3C Trace Context level 1); later versions may append fields. */
const TRACEPARENT_RE = /^([\da-f]{2})-([\da-f]{32})-([\da-f]{16})-([\da-f]{2})(-.*)?$/;
const nonZero = (hex: string) => /[^0]/.test(hex);

/** A random id of `bytes` bytes as lowercase hex, never all zeros (invalid in W3C Trace Context). */
function randomId(bytes: number): string {
  for (;;) {
    const id = randomBytes(bytes).toString('hex');
    if (nonZero(id)) return id;
  }
}

/**
 * `{traceparent, tracestate?}` for a request's headers: the caller's trace when its
 * `traceparent` is valid (version `ff`, extra fields on version 00 and all-zero ids are not),
 * else a new sampled root trace.
 */
export function turnTraceContext(headers: Headers): Record<string, string> {
  const m = TRACEPARENT_RE.exec(headers.get(TRACEPARENT)?.trim() ?? '');
  if (m && m[1] !== 'ff' && !(m[1] === '00' && m[5] !== undefined) && nonZero(m[2]!) && nonZero(m[3]!)) {
    const carrier: Record<string, string> = { [TRACEPARENT]: `00-${m[2]}-${m[3]}-${m[4]}` };
    const state = headers.get(TRACESTATE)?.trim();
    if (state) carrier[TRACESTATE] = state;
    return carrier;
  }
  return { [TRACEPARENT]: `00-${randomId(16)}-${randomId(8)}-01` };
}

/** The trace id of a payload's `trace_context`, for log lines (`trace_id`); undefined without a valid one. */
export function traceIdOf(carrier: Record<string, string> | undefined): string | undefined {
  const m = /^[\da-f]{2}-([\da-f]{32})-[\da-f]{16}-[\da-f]{2}/.exec(carrier?.[TRACEPARENT] ?? '');
  return m && /[^0]/.test(m[1]!) ? m[1] : undefined;
}
