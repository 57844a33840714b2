/**
 * The trace context of one user action (a message, a cancel, an approval), written into every
 * outbox job the action produces (`trace_context`). With tracing on it is the active span's
 * (the `invoke_agent` span of the turn, under the call's server span); with tracing off it is
 * the caller's W3C `traceparent` / `tracestate` when valid, else a new root trace, so one user
 * turn is still one trace id in every job and log line (docs/observability.md, "Tracing").
 */
import { randomBytes } from 'node:crypto';
import { extractTrace, injectTrace, traceCarrier } from '@bedrock/platform/server';

/** A random id of `bytes` bytes as lowercase hex, never all zeros (invalid in W3C Trace Context). */
function randomId(bytes: number): string {
  for (;;) {
    const id = randomBytes(bytes).toString('hex');
    if (/[^0]/.test(id)) return id;
  }
}

/**
 * `{traceparent, tracestate?}` for an action: the active span's, else the caller's valid one, else
 * a new sampled root trace. Parsing and writing are `@opentelemetry/core`'s W3C propagator
 * (through platform's helpers).
 */
export function turnTraceContext(headers: Headers): Record<string, string> {
  const given: Record<string, string> = {};
  for (const name of ['traceparent', 'tracestate']) {
    const value = headers.get(name);
    if (value) given[name] = value;
  }
  const carrier = traceCarrier(given);
  if (carrier.traceparent) return carrier;
  return injectTrace(extractTrace({ traceparent: `00-${randomId(16)}-${randomId(8)}-01` }));
}

export { traceIdOf } from '@bedrock/platform/server';

/** Attributes of the `invoke_agent` span of a user turn (OpenTelemetry GenAI agent spans). */
export function invokeAgentAttributes(conversationId: string): Record<string, string> {
  return {
    'gen_ai.operation.name': 'invoke_agent',
    'gen_ai.system': 'anthropic',
    'gen_ai.agent.id': conversationId,
    'gen_ai.conversation.id': conversationId,
  };
}
