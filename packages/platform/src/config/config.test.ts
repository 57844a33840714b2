import { describe, expect, it } from '@jest/globals';
import { ConfigError, configMarkdownTable, describeConfig, loadConfig, optionalSetting, section, setting } from './config.ts';
import { bool, duration, formatDuration, formatSize, int, list, oneOf, port, size, str, url } from './types.ts';

const schema = section({
  server: section({
    port: setting('T_PORT', port(), { default: 8080, doc: 'Port.' }),
    grace: setting('T_GRACE', duration(), { default: 10_000, doc: 'Grace.' }),
  }),
  store: section({
    url: setting('T_DB_URL', url({ protocols: ['postgres'] }), { default: 'postgres://u:secret@h/db', doc: 'Postgres | primary.' }),
    pool: setting('T_POOL', int({ min: 1, max: 10 }), { default: 2, doc: 'Pool.' }),
    cache: setting('T_CACHE', size({ min: 1024 }), { default: 64 * 1024 ** 2, doc: 'Cache.' }),
  }),
  mode: setting('T_MODE', oneOf(['a', 'b'] as const), { default: 'a', doc: 'Mode.' }),
  verbose: setting('T_VERBOSE', bool(), { default: false, doc: 'Verbose.' }),
  ports: setting('T_PORTS', list(port()), { default: [1, 2], doc: 'Ports.' }),
  name: setting('T_NAME', str(), { doc: 'Required name.' }),
  token: optionalSetting('T_TOKEN', str(), { doc: 'Optional.' }),
});

describe('loadConfig', () => {
  it('gives the defaults, nested per concern, with only the required variable set', () => {
    expect(loadConfig(schema, { T_NAME: 'n' })).toEqual({
      server: { port: 8080, grace: 10_000 },
      store: { url: 'postgres://u:secret@h/db', pool: 2, cache: 64 * 1024 ** 2 },
      mode: 'a',
      verbose: false,
      ports: [1, 2],
      name: 'n',
      token: undefined,
    });
  });

  it('reads every type from the environment, durations and sizes with their units; empty counts as unset', () => {
    const config = loadConfig(schema, {
      T_NAME: ' n ',
      T_PORT: '0',
      T_GRACE: '1.5s',
      T_POOL: '10',
      T_CACHE: '512KiB',
      T_MODE: 'b',
      T_VERBOSE: 'YES',
      T_PORTS: ' 80, 443 ,',
      T_TOKEN: '',
    });
    expect(config).toMatchObject({
      server: { port: 0, grace: 1500 },
      store: { pool: 10, cache: 512 * 1024 },
      mode: 'b',
      verbose: true,
      ports: [80, 443],
    });
    expect(config.token).toBeUndefined();
    expect(loadConfig(schema, { T_NAME: 'n', T_GRACE: '5m', T_CACHE: '1GB' })).toMatchObject({
      server: { grace: 300_000 },
      store: { cache: 1e9 },
    });
  });

  it('lets typed overrides from code win over the environment, and validates them too', () => {
    const config = loadConfig(schema, { T_NAME: 'n', T_PORT: '9000' }, { server: { port: 0 }, store: { pool: 3 } });
    expect(config.server).toEqual({ port: 0, grace: 10_000 });
    expect(config.store.pool).toBe(3);
    expect(() => loadConfig(schema, { T_NAME: 'n' }, { store: { pool: 99 } })).toThrow(
      'store.pool (T_POOL) is invalid: expected an integer 1..10',
    );
  });

  it('names every bad variable at once, with what a valid value looks like', () => {
    let error: unknown;
    try {
      loadConfig(schema, {
        T_PORT: '70000',
        T_GRACE: '1500',
        T_CACHE: '10',
        T_MODE: 'c',
        T_VERBOSE: 'maybe',
        T_DB_URL: 'http://x',
        T_PORTS: '1,x',
      });
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(ConfigError);
    const problems = (error as ConfigError).problems;
    expect(problems).toEqual(
      expect.arrayContaining([
        'T_PORT="70000" is invalid: expected a port 0..65535 (out of range)',
        expect.stringMatching(
          /^T_GRACE="1500" is invalid: expected a duration with its unit \(ms, s, m, h\).*\(write the unit: 500ms, 30s, 5m, 1h\)$/,
        ),
        'T_CACHE="10" is invalid: expected a size with its unit (B, KB, MB, GB, KiB, MiB, GiB), such as 512KiB, 64MiB, at least 1KiB (write the unit: 100B, 50KB, 64MiB)',
        'T_MODE="c" is invalid: expected one of a, b',
        'T_VERBOSE="maybe" is invalid: expected true or false (not a boolean)',
        'T_DB_URL="http://x" is invalid: expected a postgres URL (scheme http: not allowed)',
        'T_PORTS="1,x" is invalid: expected port 0..65535s, comma-separated (not an integer)',
        'T_NAME is required: expected a string (Required name.)',
      ]),
    );
    expect(problems).toHaveLength(8);
    expect((error as Error).message).toMatch(/^invalid configuration:\n {2}/);
  });

  it('rejects a size below its minimum and a negative-looking duration', () => {
    expect(() => loadConfig(schema, { T_NAME: 'n', T_CACHE: '1KB' })).toThrow(/T_CACHE="1KB" is invalid: .*at least 1KiB/);
    expect(() => loadConfig(schema, { T_NAME: 'n', T_GRACE: '-1s' })).toThrow(/T_GRACE="-1s" is invalid/);
  });
});

describe('docs from the schema', () => {
  it('lists every setting in schema order with its path, its default as written in the environment, and masks credentials', () => {
    const rows = describeConfig(schema);
    expect(rows.map((r) => r.env)).toEqual([
      'T_PORT',
      'T_GRACE',
      'T_DB_URL',
      'T_POOL',
      'T_CACHE',
      'T_MODE',
      'T_VERBOSE',
      'T_PORTS',
      'T_NAME',
      'T_TOKEN',
    ]);
    expect(rows.find((r) => r.env === 'T_GRACE')).toMatchObject({ path: 'server.grace', default: '10s', required: false });
    expect(rows.find((r) => r.env === 'T_CACHE')?.default).toBe('64MiB');
    expect(rows.find((r) => r.env === 'T_NAME')).toMatchObject({ required: true, default: undefined });
    const table = configMarkdownTable(schema);
    expect(table).toContain('| `T_DB_URL` | `postgres://u:***@h/db` | a postgres URL | Postgres \\| primary. |');
    expect(table).toContain('| `T_NAME` | (required) |');
    expect(table).toContain('| `T_TOKEN` | (unset) |');
  });

  it('formats durations and sizes in the largest whole unit', () => {
    expect([formatDuration(1500), formatDuration(30_000), formatDuration(300_000), formatDuration(7_200_000)]).toEqual([
      '1500ms',
      '30s',
      '5m',
      '2h',
    ]);
    expect([formatSize(1500), formatSize(50_000), formatSize(512 * 1024), formatSize(64 * 1024 ** 2)]).toEqual([
      '1500B',
      '50KB',
      '512KiB',
      '64MiB',
    ]);
  });
});
