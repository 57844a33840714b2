/**
 * The caller's W3C Trace Context headers (`traceparent`, `tracestate`), to pass on to the
 * conversation service so one user turn is one trace from the client through every queue hop
 * (docs/observability.md, "Tracing"). The conversation service validates them and starts a
 * new trace when there is none.
 */
const TRACE_HEADERS = ['traceparent', 'tracestate'] as const;

/** The trace headers present in `incoming` (at most 512 characters each), as a plain object. */
export function traceHeaders(incoming: Headers): Record<string, string> {
  const out: Record<string, string> = {};
  for (const name of TRACE_HEADERS) {
    const value = incoming.get(name);
    if (value && value.length <= 512) out[name] = value;
  }
  return out;
}
