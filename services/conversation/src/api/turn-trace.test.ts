import { describe, expect, it } from '@jest/globals';
import { traceIdOf, turnTraceContext } from './turn-trace.ts';

const PARENT = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';

describe('turnTraceContext', () => {
  it("keeps the caller's traceparent and tracestate", () => {
    expect(turnTraceContext(new Headers({ traceparent: PARENT, tracestate: 'vendor=x' }))).toEqual({
      traceparent: PARENT,
      tracestate: 'vendor=x',
    });
    expect(traceIdOf(turnTraceContext(new Headers({ traceparent: PARENT })))).toBe('4bf92f3577b34da6a3ce929d0e0e4736');
  });

  it('starts a new sampled root trace when there is none or it is invalid', () => {
    for (const headers of [
      new Headers(),
      new Headers({ traceparent: '00-00000000000000000000000000000000-00f067aa0ba902b7-01' }),
      new Headers({ traceparent: 'ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01' }),
    ]) {
      const carrier = turnTraceContext(headers);
      expect(carrier.traceparent).toMatch(/^00-[\da-f]{32}-[\da-f]{16}-01$/);
      expect(carrier.traceparent).not.toContain('4bf92f3577b34da6a3ce929d0e0e4736');
      expect(traceIdOf(carrier)).toBeDefined();
    }
    expect(turnTraceContext(new Headers()).traceparent).not.toBe(turnTraceContext(new Headers()).traceparent);
  });

  it('traceIdOf ignores missing and malformed carriers', () => {
    expect([traceIdOf(undefined), traceIdOf({}), traceIdOf({ traceparent: 'nope' })]).toEqual([undefined, undefined, undefined]);
  });
});
