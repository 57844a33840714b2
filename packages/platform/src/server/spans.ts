/**
 * Spans and trace carriers on the OpenTelemetry API (no SDK here: tracing.ts starts it). The
 * `trace_context` map of queue payloads is written and read with `@opentelemetry/core`'s W3C
 * propagator, so a trace given by a caller flows through the jobs even while tracing is off.
 */
import { context, ROOT_CONTEXT, SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import type { Attributes, Context, Span, Tracer } from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';

/** The `trace_context` map of a payload (`traceContext` in generated code). */
export type TraceCarrier = Record<string, string>;

/** Re-exported so services need no direct dependency on the OpenTelemetry API. */
export { SpanKind } from '@opentelemetry/api';
export type { Span } from '@opentelemetry/api';

let enabled = false;

/** Whether a tracing SDK started by `startTracing` is running in this process. */
export function tracingEnabled(): boolean {
  return enabled;
}

/** @internal Set by `startTracing` and its shutdown. */
export function setTracingEnabled(value: boolean): void {
  enabled = value;
}

/** The tracer of Bedrock's own spans (a no-op tracer while tracing is off). */
export function tracer(): Tracer {
  return trace.getTracer('bedrock');
}

const w3c = new W3CTraceContextPropagator();
const recordSetter = { set: (carrier: TraceCarrier, key: string, value: string) => void (carrier[key] = value) };
const recordGetter = {
  get: (carrier: TraceCarrier, key: string) => carrier[key],
  keys: (carrier: TraceCarrier) => Object.keys(carrier),
};

/** The W3C `traceparent` / `tracestate` of `ctx`'s span (default: the active one); empty without a valid span. */
export function injectTrace(ctx: Context = context.active()): TraceCarrier {
  const carrier: TraceCarrier = {};
  w3c.inject(ctx, carrier, recordSetter);
  return carrier;
}

/** `base` (default ROOT) with the remote span a payload's `trace_context` names; `base` itself when it names none validly. */
export function extractTrace(carrier: TraceCarrier | undefined, base: Context = ROOT_CONTEXT): Context {
  if (!carrier || !carrier.traceparent) return base;
  return w3c.extract(base, carrier, recordGetter);
}

/**
 * The `trace_context` to put in a payload produced now: the active span's when there is one
 * (tracing on), else `fallback` re-written by the propagator (a valid carrier is kept, an
 * invalid one dropped), so a trace given by a caller still flows with tracing off.
 */
export function traceCarrier(fallback?: TraceCarrier): TraceCarrier {
  const active = trace.getSpanContext(context.active());
  if (active && trace.isSpanContextValid(active)) return injectTrace();
  return fallback ? injectTrace(extractTrace(fallback)) : {};
}

/** The trace id a payload's `trace_context` names, for log lines; undefined without a valid one. */
export function traceIdOf(carrier: TraceCarrier | undefined): string | undefined {
  const spanContext = trace.getSpanContext(extractTrace(carrier));
  return spanContext && trace.isSpanContextValid(spanContext) ? spanContext.traceId : undefined;
}

/**
 * `trace_id` of a job's `trace_context`, for the child logger of a job while tracing is off,
 * so its lines still join the turn's trace; empty while tracing is on (the logger's mixin then
 * writes the active span's ids) and for a missing or invalid carrier.
 */
export function jobTraceLogFields(carrier: TraceCarrier | undefined): { trace_id?: string } {
  if (enabled) return {};
  const traceId = traceIdOf(carrier);
  return traceId ? { trace_id: traceId } : {};
}

/** `trace_id` / `span_id` of the active span, merged into every log line (the logger's mixin). */
export function activeTraceLogFields(): { trace_id?: string; span_id?: string } {
  const span = trace.getSpan(context.active());
  if (!span) return {};
  const spanContext = span.spanContext();
  if (!trace.isSpanContextValid(spanContext)) return {};
  return { trace_id: spanContext.traceId, span_id: spanContext.spanId };
}

/**
 * Runs `fn` inside a new active span, ends it when `fn` settles, and marks it ERROR with the
 * exception when `fn` throws. `fn` may add attributes (e.g. the response model) to the span.
 */
export async function inSpan<T>(
  name: string,
  options: { kind?: SpanKind; attributes?: Attributes; parent?: Context },
  fn: (span: Span) => Promise<T>,
): Promise<T> {
  const parent = options.parent ?? context.active();
  const span = tracer().startSpan(name, { kind: options.kind ?? SpanKind.INTERNAL, attributes: options.attributes }, parent);
  try {
    return await context.with(trace.setSpan(parent, span), () => fn(span));
  } catch (err) {
    failSpan(span, err);
    throw err;
  } finally {
    span.end();
  }
}

/** Marks a span failed with an exception (`error.type`, the exception event, status ERROR). */
export function failSpan(span: Span, err: unknown): void {
  if (!span.isRecording()) return;
  const error = err instanceof Error ? err : new Error(String(err));
  span.recordException(error);
  span.setAttribute('error.type', error.name || 'Error');
  span.setStatus({ code: SpanStatusCode.ERROR, message: error.message });
}
