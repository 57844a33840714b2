import { describe, expect, it } from '@jest/globals';
import { ConfigError } from '@bedrock/platform/config';
import { readWebBffConfig } from './config.ts';

/** The problems of a config that does not load. */
function problems(env: Record<string, string>): readonly string[] {
  try {
    readWebBffConfig(env);
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as ConfigError).problems;
  }
  throw new Error('the config loaded');
}

describe('web-bff config', () => {
  it('has the documented defaults, nested per concern', () => {
    const config = readWebBffConfig({});
    expect(config.log.level).toBe('info');
    expect(config.server).toEqual({ host: '0.0.0.0', metricsPort: 9464, shutdownGrace: 10_000, httpPort: 8080, grpcPort: 8081 });
    expect(config.transport.kind).toBe('redis');
    expect(config.auth).toEqual({ tokensFile: undefined, tokens: undefined, admins: undefined, cacheTtl: 1000 });
    expect(config.oidc).toEqual({
      issuer: undefined,
      audience: undefined,
      jwksUrl: undefined,
      userClaim: 'sub',
      clockSkew: 30_000,
      users: 'auto',
    });
    expect(config.upstream).toEqual({
      conversationUrls: ['http://127.0.0.1:50051'],
      resolveInterval: 10_000,
      timeout: 30_000,
      serviceTokenFile: undefined,
    });
    expect(config.watch).toEqual({
      heartbeat: 15_000,
      maxLag: 30_000,
      stallTimeout: 60_000,
      bufferEvents: 512,
      linger: 10_000,
      maxPerUser: 64,
      delivery: 'push',
    });
    expect(config.http).toEqual({ corsOrigins: ['http://localhost:5173', 'http://127.0.0.1:5173'], uiDir: undefined });
  });

  it('reads every setting from the environment, durations with their units, lists comma-separated', () => {
    const config = readWebBffConfig({
      LOG_LEVEL: 'debug',
      BEDROCK_HOST: '127.0.0.1',
      BEDROCK_PORT: '0',
      BEDROCK_GRPC_PORT: '9091',
      BEDROCK_SHUTDOWN_GRACE: '1.5s',
      BEDROCK_TRANSPORT: 'memory',
      BEDROCK_TOKENS_FILE: '/etc/bedrock/tokens',
      BEDROCK_TOKENS: 'alice:abc',
      BEDROCK_CONVERSATION_URL: 'http://a:50051, https://b:50051',
      BEDROCK_CONVERSATION_RESOLVE_INTERVAL: '0ms',
      BEDROCK_UPSTREAM_TIMEOUT: '5m',
      BEDROCK_SERVICE_TOKEN_FILE: '/var/run/secrets/bedrock/token',
      BEDROCK_WATCH_HEARTBEAT: '300ms',
      BEDROCK_WATCH_MAX_LAG: '1h',
      BEDROCK_WATCH_STALL_TIMEOUT: '2.5s',
      BEDROCK_WATCH_BUFFER: '20000',
      BEDROCK_WATCH_LINGER: '1m',
      BEDROCK_CORS_ORIGINS: '*',
      BEDROCK_UI_DIR: '/app/ui',
    });
    expect(config).toMatchObject({
      log: { level: 'debug' },
      server: { host: '127.0.0.1', httpPort: 0, grpcPort: 9091, shutdownGrace: 1500 },
      transport: { kind: 'memory' },
      auth: { tokensFile: '/etc/bedrock/tokens', tokens: 'alice:abc' },
      upstream: {
        conversationUrls: ['http://a:50051', 'https://b:50051'],
        resolveInterval: 0,
        timeout: 300_000,
        serviceTokenFile: '/var/run/secrets/bedrock/token',
      },
      watch: { heartbeat: 300, maxLag: 3_600_000, stallTimeout: 2500, bufferEvents: 20_000, linger: 60_000 },
      http: { corsOrigins: ['*'], uiDir: '/app/ui' },
    });
  });

  it('rejects a bare number for a duration, naming the variable and the unit to write', () => {
    const found = problems({ BEDROCK_WATCH_HEARTBEAT: '15000', BEDROCK_SHUTDOWN_GRACE: '500' });
    expect(found).toHaveLength(2);
    expect(found.join('\n')).toMatch(
      /^BEDROCK_SHUTDOWN_GRACE="500" is invalid: expected a duration with its unit .*\(write the unit: 500ms, 30s, 5m, 1h\)$/m,
    );
    expect(found.join('\n')).toMatch(/^BEDROCK_WATCH_HEARTBEAT="15000" is invalid: expected a duration with its unit/m);
  });

  it('names every bad variable at once', () => {
    const found = problems({
      BEDROCK_GRPC_PORT: '70000',
      BEDROCK_CONVERSATION_URL: 'ftp://conversation:50051',
      BEDROCK_WATCH_BUFFER: '8',
      BEDROCK_UPSTREAM_TIMEOUT: '0s',
      BEDROCK_TRANSPORT: 'kafka',
    });
    expect(found).toHaveLength(5);
    const all = found.join('\n');
    expect(all).toMatch(/BEDROCK_GRPC_PORT="70000" is invalid: expected a port 0..65535/);
    expect(all).toMatch(/BEDROCK_CONVERSATION_URL="ftp:\/\/conversation:50051" is invalid: .*scheme ftp: not allowed/);
    expect(all).toMatch(/BEDROCK_WATCH_BUFFER="8" is invalid: expected an integer 16..100000/);
    expect(all).toMatch(/BEDROCK_UPSTREAM_TIMEOUT="0s" is invalid: .*\(at least 1ms\)/);
    expect(all).toMatch(/BEDROCK_TRANSPORT="kafka" is invalid: expected one of redis, memory/);
  });

  it('reads the sign-in settings, and keeps the auth cache at most a second', () => {
    const config = readWebBffConfig({
      BEDROCK_ADMIN_USERS: 'root, alice@example.com',
      BEDROCK_AUTH_CACHE_TTL: '250ms',
      BEDROCK_OIDC_ISSUER: 'https://id.example.com',
      BEDROCK_OIDC_AUDIENCE: 'bedrock,bedrock-api',
      BEDROCK_OIDC_USER_CLAIM: 'email',
      BEDROCK_OIDC_CLOCK_SKEW: '5s',
      BEDROCK_OIDC_USERS: 'registered',
    });
    expect(config.auth.admins).toEqual(['root', 'alice@example.com']);
    expect(config.auth.cacheTtl).toBe(250);
    expect(config.oidc).toEqual({
      issuer: 'https://id.example.com',
      audience: ['bedrock', 'bedrock-api'],
      jwksUrl: undefined,
      userClaim: 'email',
      clockSkew: 5000,
      users: 'registered',
    });
    const found = problems({ BEDROCK_AUTH_CACHE_TTL: '2s', BEDROCK_OIDC_USERS: 'everyone' }).join('\n');
    expect(found).toMatch(/^BEDROCK_AUTH_CACHE_TTL="2s" is invalid: .*at most 1s/m);
    expect(found).toMatch(/^BEDROCK_OIDC_USERS="everyone" is invalid: expected one of auto, registered/m);
  });

  it('refuses an empty list of conversation URLs', () => {
    expect(problems({ BEDROCK_CONVERSATION_URL: ' , ' })).toEqual([
      'BEDROCK_CONVERSATION_URL="," is invalid: expected http/https URLs, comma-separated (too few items)',
    ]);
  });

  it('lets typed overrides from code win over the environment (the embedded mode), and validates them', () => {
    const env = { BEDROCK_HOST: '0.0.0.0', BEDROCK_METRICS_PORT: '9464', BEDROCK_PORT: '8090', BEDROCK_TRANSPORT: 'redis' };
    const config = readWebBffConfig(env, {
      server: { host: '127.0.0.1', metricsPort: 0 },
      transport: { kind: 'memory' },
      upstream: { conversationUrls: ['http://127.0.0.1:40000'] },
      watch: { heartbeat: 250 },
    });
    // Overridden…
    expect(config.server).toMatchObject({ host: '127.0.0.1', metricsPort: 0 });
    expect(config.transport.kind).toBe('memory');
    expect(config.upstream.conversationUrls).toEqual(['http://127.0.0.1:40000']);
    expect(config.watch.heartbeat).toBe(250);
    // …the rest still from the environment.
    expect(config.server.httpPort).toBe(8090);
    expect(() => readWebBffConfig({}, { watch: { bufferEvents: 1 } })).toThrow(
      'watch.bufferEvents (BEDROCK_WATCH_BUFFER) is invalid: expected an integer 16..100000',
    );
  });
});
