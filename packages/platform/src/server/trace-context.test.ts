import { describe, expect, it } from '@jest/globals';
import { create, fromBinary, toBinary } from '@bufbuild/protobuf';
import { ROOT_CONTEXT, TraceFlags, createTraceState, trace } from '@opentelemetry/api';
import type { SpanContext } from '@opentelemetry/api';
import { ToolExecJobSchema } from '@bedrock/contracts';
import { extractTraceContext, injectTraceContext, installTraceContextPropagation, traceLogFields } from './trace-context.ts';

const TRACE_ID = '4bf92f3577b34da6a3ce929d0e0e4736';
const SPAN_ID = '00f067aa0ba902b7';
const turn: SpanContext = {
  traceId: TRACE_ID,
  spanId: SPAN_ID,
  traceFlags: TraceFlags.SAMPLED,
  isRemote: false,
  traceState: createTraceState('vendor=a,other=b'),
};
const withTurn = trace.setSpanContext(ROOT_CONTEXT, turn);

// The tests share the process-wide propagator, so their order matters: first without one.
describe('without a registered propagator (no SDK)', () => {
  it('injects nothing and extracts nothing, without throwing', () => {
    expect(injectTraceContext(withTurn)).toEqual({});
    expect(injectTraceContext()).toEqual({});
    const ctx = extractTraceContext({ traceparent: `00-${TRACE_ID}-${SPAN_ID}-01` }, ROOT_CONTEXT);
    expect(trace.getSpanContext(ctx)).toBeUndefined();
    expect(extractTraceContext(undefined, ROOT_CONTEXT)).toBe(ROOT_CONTEXT);
  });
});

describe('with the W3C propagator installed', () => {
  it('installs once and keeps the first propagator', () => {
    expect(installTraceContextPropagation()).toBe(true);
    expect(installTraceContextPropagation()).toBe(false);
  });

  it('writes traceparent and tracestate into a carrier', () => {
    expect(injectTraceContext(withTurn)).toEqual({
      traceparent: `00-${TRACE_ID}-${SPAN_ID}-01`,
      tracestate: 'vendor=a,other=b',
    });
    const unsampled = trace.setSpanContext(ROOT_CONTEXT, { ...turn, traceFlags: TraceFlags.NONE, traceState: undefined });
    expect(injectTraceContext(unsampled)).toEqual({ traceparent: `00-${TRACE_ID}-${SPAN_ID}-00` });
    expect(injectTraceContext(ROOT_CONTEXT)).toEqual({});
  });

  it('carries one trace through a queue payload on the wire', () => {
    const job = create(ToolExecJobSchema, { toolUseId: 't1', conversationId: 'c1', traceContext: injectTraceContext(withTurn) });
    const received = fromBinary(ToolExecJobSchema, toBinary(ToolExecJobSchema, job));
    const ctx = extractTraceContext(received.traceContext, ROOT_CONTEXT);
    const remote = trace.getSpanContext(ctx);
    expect(remote).toMatchObject({ traceId: TRACE_ID, spanId: SPAN_ID, traceFlags: TraceFlags.SAMPLED, isRemote: true });
    expect(remote?.traceState?.get('vendor')).toBe('a');
    expect(traceLogFields(ctx)).toEqual({ trace_id: TRACE_ID, span_id: SPAN_ID });
    // A consumer that enqueues the next job passes the same trace on.
    expect(injectTraceContext(ctx)).toEqual(job.traceContext);
  });

  it('keeps trace flags it does not know (W3C level 2 random bit), as OpenTelemetry does', () => {
    const ctx = extractTraceContext({ traceparent: `00-${TRACE_ID}-${SPAN_ID}-03` }, ROOT_CONTEXT);
    expect(trace.getSpanContext(ctx)?.traceFlags).toBe(3);
    expect(injectTraceContext(ctx)).toEqual({ traceparent: `00-${TRACE_ID}-${SPAN_ID}-03` });
  });

  it('ignores malformed traceparent headers', () => {
    const bad = [
      `00-${'0'.repeat(32)}-${SPAN_ID}-01`, // all-zero trace id
      `00-${TRACE_ID}-${'0'.repeat(16)}-01`, // all-zero span id
      `ff-${TRACE_ID}-${SPAN_ID}-01`, // forbidden version
      `00-${TRACE_ID}-${SPAN_ID}-01-extra`, // version 00 has four fields
      `00-${TRACE_ID.toUpperCase()}-${SPAN_ID}-01`, // hex must be lowercase
      `00-${TRACE_ID}-${SPAN_ID}`,
      'garbage',
    ];
    for (const traceparent of bad) {
      expect(trace.getSpanContext(extractTraceContext({ traceparent }, ROOT_CONTEXT))).toBeUndefined();
    }
    expect(traceLogFields(ROOT_CONTEXT)).toEqual({});
  });

  it('accepts future versions by their first four fields', () => {
    const ctx = extractTraceContext({ traceparent: `cc-${TRACE_ID}-${SPAN_ID}-01-what-the-future-holds` }, ROOT_CONTEXT);
    expect(trace.getSpanContext(ctx)?.traceId).toBe(TRACE_ID);
  });
});
