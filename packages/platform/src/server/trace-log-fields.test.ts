import { describe, expect, it } from '@jest/globals';
import { traceLogFieldsOf } from './trace-log-fields.ts';

describe('traceLogFieldsOf', () => {
  it('reads trace_id and span_id from a carrier without any global propagator', () => {
    expect(traceLogFieldsOf({ traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01' })).toEqual({ trace_id: '4bf92f3577b34da6a3ce929d0e0e4736', span_id: '00f067aa0ba902b7' });
  });

  it('is empty for missing or invalid carriers', () => {
    expect([traceLogFieldsOf(undefined), traceLogFieldsOf({}), traceLogFieldsOf({ traceparent: '00-00000000000000000000000000000000-00f067aa0ba902b7-01' })]).toEqual([{}, {}, {}]);
  });
});
