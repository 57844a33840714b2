import { ROOT_CONTEXT, defaultTextMapGetter } from '@opentelemetry/api';
import type { TraceCarrier } from './trace-context.ts';
import { traceLogFields } from './trace-context.ts';
import { W3CTraceContextPropagator } from './w3c-propagator.ts';

const w3c = new W3CTraceContextPropagator();

/**
 * `trace_id` / `span_id` log fields of a payload's `trace_context`, read with the W3C
 * propagator directly, so they appear in log lines even when no global propagator or SDK is
 * installed. Empty for a missing or invalid carrier.
 */
export function traceLogFieldsOf(carrier: TraceCarrier | undefined): { trace_id?: string; span_id?: string } {
  if (!carrier) return {};
  return traceLogFields(w3c.extract(ROOT_CONTEXT, carrier, defaultTextMapGetter));
}
