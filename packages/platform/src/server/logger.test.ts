import { Writable } from 'node:stream';
import { describe, expect, it } from '@jest/globals';
import { ROOT_CONTEXT, context, trace } from '@opentelemetry/api';
import { createLogger, parseLogLevel } from './logger.ts';
import { startTracing } from './tracing.ts';

/** Collects the JSON lines a logger writes. */
function sink(): { stream: Writable; lines: () => Record<string, unknown>[] } {
  const chunks: string[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _enc, done) {
      chunks.push(chunk.toString());
      done();
    },
  });
  const lines = () =>
    chunks
      .join('')
      .split('\n')
      .filter((l) => l !== '')
      .map((l) => JSON.parse(l) as Record<string, unknown>);
  return { stream, lines };
}

describe('createLogger', () => {
  it("logs an error's message, code and cause, not the objects it carries (a pg error's client)", () => {
    const out = sink();
    const log = createLogger({ service: 'conversation', level: 'info', destination: out.stream });
    const err = Object.assign(new Error('terminating connection due to administrator command'), {
      code: '57P01',
      severity: 'FATAL',
      client: { connectionParameters: { user: 'postgres' }, parsedStatements: { big: 'x'.repeat(10_000) } },
      cause: new Error('the server went away'),
    });
    log.error({ err }, 'idle Postgres connection failed');
    const [line] = out.lines();
    const logged = line?.err as Record<string, unknown>;
    expect(logged).toMatchObject({
      type: 'Error',
      message: expect.stringMatching(/^terminating connection due to administrator command/),
      code: '57P01',
      severity: 'FATAL',
    });
    expect(logged.client).toBeUndefined();
    expect(String(logged.message)).toContain('the server went away');
    // The client's 10,000 characters are not there (the stacks are).
    expect(JSON.stringify(line)).not.toContain('xxxxxxxxxx');
  });

  it('writes one JSON object per line with level name, ISO time, service and msg', () => {
    const out = sink();
    const log = createLogger({ service: 'tool-runner', level: 'info', destination: out.stream });
    log.info({ tool: 'bash' }, 'started');
    log.debug('hidden at info');
    const [line, ...rest] = out.lines();
    expect(rest).toEqual([]);
    expect(line).toMatchObject({ level: 'info', service: 'tool-runner', msg: 'started', tool: 'bash', pid: process.pid });
    expect(new Date(line?.time as string).toISOString()).toBe(line?.time);
  });

  it('writes trace_id and span_id of the active span on every line', async () => {
    const out = sink();
    const log = createLogger({ service: 'conversation', level: 'debug', destination: out.stream });
    log.info('outside');
    // Tracing on registers the context manager; a span that records nothing exports nothing.
    const tracing = await startTracing({ serviceName: 'test', env: { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:9' } });
    try {
      const span = trace.wrapSpanContext({ traceId: '4bf92f3577b34da6a3ce929d0e0e4736', spanId: '00f067aa0ba902b7', traceFlags: 1 });
      context.with(trace.setSpan(ROOT_CONTEXT, span), () => log.child({ conversation_id: 'c1' }).info('inside'));
    } finally {
      await tracing.shutdown();
    }
    const [a, b] = out.lines();
    expect(a).not.toHaveProperty('trace_id');
    expect(b).toMatchObject({
      conversation_id: 'c1',
      trace_id: '4bf92f3577b34da6a3ce929d0e0e4736',
      span_id: '00f067aa0ba902b7',
      msg: 'inside',
    });
  });

  it('takes the level from LOG_LEVEL when none is given', () => {
    const saved = process.env.LOG_LEVEL;
    process.env.LOG_LEVEL = 'warn';
    try {
      const out = sink();
      const log = createLogger({ service: 's', destination: out.stream });
      log.info('dropped');
      log.warn('kept');
      expect(out.lines().map((l) => l.msg)).toEqual(['kept']);
    } finally {
      if (saved === undefined) delete process.env.LOG_LEVEL;
      else process.env.LOG_LEVEL = saved;
    }
  });
});

describe('parseLogLevel', () => {
  it('defaults to info and rejects unknown levels', () => {
    expect(parseLogLevel(undefined)).toBe('info');
    expect(parseLogLevel('')).toBe('info');
    expect(parseLogLevel(' DEBUG ')).toBe('debug');
    expect(() => parseLogLevel('verbose')).toThrow(/LOG_LEVEL: expected one of trace, debug/);
  });
});
