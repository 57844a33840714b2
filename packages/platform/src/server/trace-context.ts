import { context as otelContext, propagation, trace } from '@opentelemetry/api';
import type { Context } from '@opentelemetry/api';
import { W3CTraceContextPropagator } from './w3c-propagator.ts';

/**
 * Trace context through queue payloads: the producer writes W3C `traceparent`/`tracestate`
 * into the payload's `map<string,string> trace_context` field, the consumer reads it back,
 * so one user turn (RPC → conversation → llm-gateway / tool-runner → conversation) is one
 * trace. Everything goes through the global `@opentelemetry/api` propagator: with no
 * OpenTelemetry SDK and no {@link installTraceContextPropagation}, inject writes nothing and
 * extract returns the context unchanged, so calling these is always safe.
 *
 * Pass contexts explicitly (`extractTraceContext` → `injectTraceContext(ctx)`) rather than
 * relying on `context.active()`: without an SDK no context manager is registered, and an
 * explicit context still carries the trace from one job to the next.
 */

/** The `trace_context` map of a payload (`traceContext` in generated code). */
export type TraceCarrier = Record<string, string>;

/**
 * Returns a new carrier holding the trace context of `ctx` (default: the active context),
 * ready to assign to a payload's `traceContext`. Empty when there is nothing to propagate.
 */
export function injectTraceContext(ctx: Context = otelContext.active()): TraceCarrier {
  const carrier: TraceCarrier = {};
  propagation.inject(ctx, carrier);
  return carrier;
}

/**
 * Returns `base` (default: the active context) with the remote span context read from a
 * payload's `traceContext`. A missing or malformed carrier yields `base` unchanged.
 */
export function extractTraceContext(carrier: TraceCarrier | undefined, base: Context = otelContext.active()): Context {
  if (!carrier) return base;
  return propagation.extract(base, carrier);
}

/** Runs `fn` with the payload's trace context active (effective once an SDK registers a context manager). */
export function withTraceContext<T>(carrier: TraceCarrier | undefined, fn: () => T): T {
  return otelContext.with(extractTraceContext(carrier), fn);
}

/**
 * Log fields `trace_id` / `span_id` for a context, so log lines can be joined to traces
 * (`withContext(logger, traceLogFields(ctx))`). Empty without a valid span context.
 */
export function traceLogFields(ctx: Context = otelContext.active()): { trace_id?: string; span_id?: string } {
  const spanContext = trace.getSpanContext(ctx);
  if (!spanContext || !trace.isSpanContextValid(spanContext)) return {};
  return { trace_id: spanContext.traceId, span_id: spanContext.spanId };
}

/**
 * Registers the W3C Trace Context propagator as the global one, for processes that run no
 * OpenTelemetry SDK but should still pass trace context along (the SDK registers its own,
 * so do not call this when one is configured). Returns false if a propagator was already
 * registered, which is then kept.
 */
export function installTraceContextPropagation(): boolean {
  return propagation.setGlobalPropagator(new W3CTraceContextPropagator());
}
