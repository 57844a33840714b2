import { describe, expect, it } from '@jest/globals';
import { commonEnv } from './common-env.ts';
import {
  EnvError,
  bool,
  describeEnv,
  duration,
  envMarkdownTable,
  int,
  oneOf,
  optional,
  port,
  readEnv,
  setting,
  str,
  url,
  urlList,
} from './env.ts';

const spec = {
  port: setting({ name: 'APP_PORT', parse: port(), default: 8080, doc: 'gRPC port.' }),
  workers: setting({ name: 'APP_WORKERS', parse: int({ min: 1, max: 64 }), default: 4, doc: 'Concurrent jobs.' }),
  debug: setting({ name: 'APP_DEBUG', parse: bool(), default: false, doc: 'Verbose mode.' }),
  redis: setting({ name: 'APP_REDIS_URL', parse: url({ protocols: ['redis', 'rediss'] }), doc: 'Redis to use.' }),
  mode: setting({ name: 'APP_MODE', parse: oneOf(['embedded', 'distributed']), default: 'embedded', doc: 'Deployment shape.' }),
  timeout: setting({ name: 'APP_TIMEOUT', parse: duration(), default: 30_000, doc: 'Tool timeout.' }),
  name: setting({ name: 'APP_NAME', parse: optional(str()), default: undefined, doc: 'Display name.' }),
};

describe('readEnv', () => {
  it('parses every kind of value and applies defaults', () => {
    const config = readEnv(spec, {
      APP_REDIS_URL: 'redis://localhost:6379',
      APP_DEBUG: 'Yes',
      APP_TIMEOUT: '1.5s',
      APP_WORKERS: ' 8 ',
      APP_PORT: '',
    });
    expect(config).toEqual({
      port: 8080,
      workers: 8,
      debug: true,
      redis: new URL('redis://localhost:6379'),
      mode: 'embedded',
      timeout: 1500,
      name: undefined,
    });
    // The inferred types are the parsers' types.
    const mode: 'embedded' | 'distributed' = config.mode;
    const redisHost: string = config.redis.hostname;
    expect([mode, redisHost]).toEqual(['embedded', 'localhost']);
  });

  it('reports every bad variable in one error', () => {
    let error: unknown;
    try {
      readEnv(spec, { APP_PORT: '70000', APP_WORKERS: 'four', APP_DEBUG: 'maybe', APP_MODE: 'cloud', APP_TIMEOUT: '5 minutes' });
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(EnvError);
    const { problems, message } = error as EnvError;
    expect(problems).toHaveLength(6);
    expect(problems).toEqual([
      'APP_PORT="70000" is invalid: expected a port 0..65535 (out of range)',
      'APP_WORKERS="four" is invalid: expected an integer 1..64 (not an integer)',
      'APP_DEBUG="maybe" is invalid: expected true or false',
      'APP_REDIS_URL is required: expected a redis/rediss URL (Redis to use.)',
      'APP_MODE="cloud" is invalid: expected one of embedded, distributed',
      expect.stringMatching(/^APP_TIMEOUT="5 minutes" is invalid: expected a duration/),
    ]);
    expect(message).toContain('APP_PORT');
    expect(message).toContain('APP_TIMEOUT');
  });

  it('rejects URLs with a scheme outside the allowed list', () => {
    expect(() => readEnv(spec, { APP_REDIS_URL: 'http://x' })).toThrow(
      /APP_REDIS_URL="http:\/\/x" is invalid: expected a redis\/rediss URL \(scheme http: not allowed\)/,
    );
  });

  it('parses durations in every unit', () => {
    const d = duration();
    expect([d.parse('250'), d.parse('250ms'), d.parse('2s'), d.parse('5m'), d.parse('1h'), d.parse('0.25s')]).toEqual([
      250, 250, 2000, 300_000, 3_600_000, 250,
    ]);
    expect(() => d.parse('-1s')).toThrow();
    expect(() => d.parse('1d')).toThrow();
  });

  it('reads the common settings with their defaults', () => {
    expect(readEnv(commonEnv, {})).toEqual({ logLevel: 'info', host: '0.0.0.0', metricsPort: 9464, shutdownGraceMs: 10_000 });
    expect(readEnv(commonEnv, { LOG_LEVEL: 'debug', BEDROCK_SHUTDOWN_GRACE: '30s' })).toMatchObject({
      logLevel: 'debug',
      shutdownGraceMs: 30_000,
    });
  });
});

describe('urlList', () => {
  it('reads one or more comma-separated URLs and names a bad one', () => {
    const p = urlList({ protocols: ['http', 'https'] });
    expect(p.parse('http://a:1, http://b:2,,').map((u) => u.href)).toEqual(['http://a:1/', 'http://b:2/']);
    expect(() => p.parse('http://a:1,ftp://b')).toThrow('ftp://b: scheme ftp: not allowed');
    expect(p.expected).toBe('one or more http/https URLs, comma-separated');
    expect(p.format!([new URL('http://a:1'), new URL('http://b:2')])).toBe('http://a:1/,http://b:2/');
  });
});

describe('describeEnv', () => {
  it('lists name, default as written in the environment, and doc', () => {
    const rows = describeEnv(spec);
    expect(rows.map((r) => r.name)).toEqual([
      'APP_PORT',
      'APP_WORKERS',
      'APP_DEBUG',
      'APP_REDIS_URL',
      'APP_MODE',
      'APP_TIMEOUT',
      'APP_NAME',
    ]);
    expect(rows[0]).toEqual({ name: 'APP_PORT', default: '8080', required: false, expected: 'a port 0..65535', doc: 'gRPC port.' });
    expect(rows[3]).toMatchObject({ name: 'APP_REDIS_URL', default: undefined, required: true });
    expect(rows[5]?.default).toBe('30s');
    expect(rows[6]).toMatchObject({ default: undefined, required: false });
  });

  it('masks passwords in URL defaults and renders a Markdown table', () => {
    const s = { db: setting({ name: 'DB_URL', parse: url(), default: new URL('postgres://u:secret@h/db'), doc: 'Postgres | primary.' }) };
    expect(describeEnv(s)[0]?.default).toBe('postgres://u:***@h/db');
    expect(envMarkdownTable(s)).toBe(
      '| variable | default | expected | meaning |\n| --- | --- | --- | --- |\n| `DB_URL` | `postgres://u:***@h/db` | an absolute URL | Postgres \\| primary. |',
    );
  });
});
