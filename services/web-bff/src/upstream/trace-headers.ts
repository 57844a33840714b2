/**
 * The W3C Trace Context headers (`traceparent`, `tracestate`) of a call to the conversation
 * service, so one user turn is one trace from the client through every queue hop
 * (docs/observability.md, "Tracing"). The conversation service starts a new trace when there is
 * none.
 */
import { traceCarrier } from '@bedrock/platform/server';

const TRACE_HEADERS = ['traceparent', 'tracestate'] as const;

/**
 * The trace headers to send upstream for a call that came in with `incoming`, as a plain object:
 * with tracing on, the context of web-bff's own server span (a child of the client's); with
 * tracing off, the client's headers when valid (written by `@opentelemetry/core`'s propagator;
 * at most 512 characters each).
 */
export function traceHeaders(incoming: Headers): Record<string, string> {
  const given: Record<string, string> = {};
  for (const name of TRACE_HEADERS) {
    const value = incoming.get(name);
    if (value && value.length <= 512) given[name] = value;
  }
  return traceCarrier(given);
}
