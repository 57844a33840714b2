import { createTraceState, isSpanContextValid, trace } from '@opentelemetry/api';
import type { Context, TextMapGetter, TextMapPropagator, TextMapSetter } from '@opentelemetry/api';

export const TRACEPARENT = 'traceparent';
export const TRACESTATE = 'tracestate';

/** version-traceid-parentid-flags, lowercase hex (W3C Trace Context, level 1). */
const TRACEPARENT_RE = /^([\da-f]{2})-([\da-f]{32})-([\da-f]{16})-([\da-f]{2})(-.*)?$/;

/**
 * The W3C Trace Context propagator (`traceparent` / `tracestate`), the same format the
 * OpenTelemetry SDK uses by default. It lives here because `@opentelemetry/core`'s copy
 * pins an older `@opentelemetry/api` than this repo's; behaviour follows the spec:
 * invalid headers are ignored, future versions are parsed by their first four fields.
 */
export class W3CTraceContextPropagator implements TextMapPropagator {
  inject(context: Context, carrier: unknown, setter: TextMapSetter): void {
    const spanContext = trace.getSpanContext(context);
    if (!spanContext || !isSpanContextValid(spanContext)) return;
    const flags = (spanContext.traceFlags & 0xff).toString(16).padStart(2, '0');
    setter.set(carrier, TRACEPARENT, `00-${spanContext.traceId}-${spanContext.spanId}-${flags}`);
    const state = spanContext.traceState?.serialize();
    if (state) setter.set(carrier, TRACESTATE, state);
  }

  extract(context: Context, carrier: unknown, getter: TextMapGetter): Context {
    const header = first(getter.get(carrier, TRACEPARENT));
    if (!header) return context;
    const match = TRACEPARENT_RE.exec(header.trim());
    if (!match) return context;
    const [, version, traceId, spanId, flags, rest] = match as unknown as [string, string, string, string, string, string | undefined];
    // Version ff is forbidden; version 00 has exactly four fields.
    if (version === 'ff' || (version === '00' && rest !== undefined)) return context;
    const spanContext = {
      traceId,
      spanId,
      isRemote: true,
      // All bits kept, as OpenTelemetry does: level 2 defines 0x02 (random trace id).
      traceFlags: parseInt(flags, 16),
      traceState: undefined as ReturnType<typeof createTraceState> | undefined,
    };
    if (!isSpanContextValid(spanContext)) return context;
    const state = getter.get(carrier, TRACESTATE);
    const stateHeader = Array.isArray(state) ? state.join(',') : state;
    if (stateHeader) spanContext.traceState = createTraceState(stateHeader);
    return trace.setSpanContext(context, spanContext);
  }

  fields(): string[] {
    return [TRACEPARENT, TRACESTATE];
  }
}

function first(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}
