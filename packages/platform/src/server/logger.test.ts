import { Writable } from 'node:stream';
import { describe, expect, it } from '@jest/globals';
import { createLogger, parseLogLevel, withContext } from './logger.ts';

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

  it('child loggers carry conversation_id and request_id', () => {
    const out = sink();
    const log = createLogger({ service: 'conversation', level: 'debug', destination: out.stream });
    const child = withContext(log, { conversationId: 'c1', requestId: 'r1', attempt: 2, skipped: undefined });
    child.debug('turn');
    child.error({ err: new Error('boom') }, 'failed');
    const [a, b] = out.lines();
    expect(a).toMatchObject({ conversation_id: 'c1', request_id: 'r1', attempt: 2, level: 'debug', msg: 'turn' });
    expect(a).not.toHaveProperty('skipped');
    expect(b).toMatchObject({ level: 'error', conversation_id: 'c1', err: { message: 'boom', type: 'Error' } });
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
