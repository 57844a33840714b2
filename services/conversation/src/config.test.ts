import { readFileSync } from 'node:fs';
import { describe, expect, it } from '@jest/globals';
import { ConfigError } from '@bedrock/platform/config';
import { conversationSettingsTable, readConversationConfig } from './config.ts';

/** The problems of a config that must fail. */
function problems(env: Record<string, string>): readonly string[] {
  try {
    readConversationConfig(env);
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as ConfigError).problems;
  }
  throw new Error('expected the config to be refused');
}

describe('conversation config', () => {
  it('docs/conversation.md holds the settings table generated from the schema', () => {
    const doc = readFileSync(new URL('../../../docs/conversation.md', import.meta.url), 'utf8');
    const between = /<!-- settings:begin[^>]*-->\n([\s\S]*?)\n<!-- settings:end -->/.exec(doc);
    expect(between?.[1]).toBe(conversationSettingsTable());
  });

  it('has working defaults, nested per concern', () => {
    const config = readConversationConfig({});
    expect(config).toMatchObject({
      log: { level: 'info' },
      server: { host: '0.0.0.0', grpcPort: 50051, metricsPort: 9464, shutdownGrace: 10_000 },
      transport: { kind: 'redis', redis: { url: 'redis://127.0.0.1:6379' } },
      database: { url: 'postgres://postgres@127.0.0.1:5432/bedrock', poolSize: 10, migrate: true },
      models: { default: 'claude-sonnet-5-5', maxOutputTokens: 16_384 },
      conversations: { defaultThinking: 'high', sandbox: 'auto', checkCwd: true },
      turns: { llmRetryBase: 1000, cancelAckTimeout: 5000, subAgentTimeout: 600_000 },
      events: { concurrency: 16 },
      outbox: { pollInterval: 500 },
      recovery: { interval: 1000, staleAfter: 3000 },
      requestIds: { retention: 86_400_000 },
    });
    // Unset: no peers file (every call refused), no registry override, no server tools.
    expect([config.server.servicePeersFile, config.models.registry, config.conversations.serverTools]).toEqual([
      undefined,
      undefined,
      undefined,
    ]);
  });

  it('reads durations with their units, in milliseconds', () => {
    const config = readConversationConfig({
      BEDROCK_LLM_RETRY_BASE: '50ms',
      BEDROCK_CANCEL_ACK_TIMEOUT: '2.5s',
      BEDROCK_SUB_AGENT_TIMEOUT: '5m',
      BEDROCK_RECOVERY_INTERVAL: '1h',
      BEDROCK_OUTBOX_POLL: '1m',
      BEDROCK_REQUEST_ID_RETENTION: '48h',
      BEDROCK_SHUTDOWN_GRACE: '20s',
    });
    expect(config.turns).toEqual({ llmRetryBase: 50, cancelAckTimeout: 2500, subAgentTimeout: 300_000 });
    expect([config.recovery.interval, config.outbox.pollInterval, config.requestIds.retention, config.server.shutdownGrace]).toEqual([
      3_600_000, 60_000, 172_800_000, 20_000,
    ]);
  });

  it('refuses a duration without its unit, saying how to write one', () => {
    expect(problems({ BEDROCK_RECOVERY_INTERVAL: '3600000' })).toEqual([
      expect.stringMatching(
        /^BEDROCK_RECOVERY_INTERVAL="3600000" is invalid: expected a duration with its unit \(ms, s, m, h\).*\(write the unit: 500ms, 30s, 5m, 1h\)$/,
      ),
    ]);
    expect(problems({ BEDROCK_OUTBOX_POLL: '0ms' })).toEqual([
      expect.stringMatching(/^BEDROCK_OUTBOX_POLL="0ms" is invalid: .*at least 1ms/),
    ]);
  });

  it('reads the thinking default and the server tool allow-list (each tool once, in a fixed order)', () => {
    const config = readConversationConfig({ BEDROCK_DEFAULT_THINKING: 'off', BEDROCK_SERVER_TOOLS: ' web_fetch , web_search,web_fetch ' });
    expect([config.conversations.defaultThinking, config.conversations.serverTools]).toEqual(['off', ['web_search', 'web_fetch']]);
    expect(problems({ BEDROCK_DEFAULT_THINKING: 'huge' })).toEqual([
      'BEDROCK_DEFAULT_THINKING="huge" is invalid: expected one of off, low, medium, high, xhigh, max',
    ]);
    expect(problems({ BEDROCK_SERVER_TOOLS: 'web_search,code_execution' })).toEqual([
      'BEDROCK_SERVER_TOOLS="web_search,code_execution" is invalid: expected a comma-separated list of web_search, web_fetch (unknown: code_execution)',
    ]);
  });

  it('refuses a model registry override the registry would refuse, at start-up', () => {
    const registry = '{"tiny": {"contextWindow": 8000, "maxOutputTokens": 1024}}';
    expect(readConversationConfig({ BEDROCK_MODELS: registry }).models.registry).toBe(registry);
    expect(problems({ BEDROCK_MODELS: '{"tiny": {"contextWindow": 8000}}' })).toEqual([
      expect.stringMatching(/^BEDROCK_MODELS=.* is invalid: expected a JSON object of model limits \(.*must set maxOutputTokens\)$/),
    ]);
    expect(problems({ BEDROCK_MODELS: '{not json' })).toEqual([expect.stringMatching(/^BEDROCK_MODELS=.*not valid JSON/)]);
  });

  it('names every bad variable in one error', () => {
    expect(
      problems({ BEDROCK_GRPC_PORT: 'x', BEDROCK_TRANSPORT: 'kafka', DATABASE_URL: 'mysql://db/bedrock', BEDROCK_DB_POOL_SIZE: '0' }),
    ).toEqual([
      'BEDROCK_GRPC_PORT="x" is invalid: expected a port 0..65535 (not an integer)',
      'BEDROCK_TRANSPORT="kafka" is invalid: expected one of redis, memory',
      'DATABASE_URL="mysql://db/bedrock" is invalid: expected a postgres/postgresql URL (several hosts: h1:port,h2:port) (scheme mysql: not allowed)',
      'BEDROCK_DB_POOL_SIZE="0" is invalid: expected an integer 1..200 (out of range)',
    ]);
  });

  it('takes a DATABASE_URL with several hosts (db/pool.ts follows the read-write one) and names a bad one', () => {
    const url = 'postgres://bedrock@pg-0:5432,pg-1:5432/bedrock?target_session_attrs=read-write';
    expect(readConversationConfig({ DATABASE_URL: url }).database.url).toBe(url);
    expect(problems({ DATABASE_URL: 'postgres://pg-0,pg-1:99999/bedrock' })).toEqual([
      'DATABASE_URL="postgres://pg-0,pg-1:99999/bedrock" is invalid: expected a postgres/postgresql URL (several hosts: h1:port,h2:port) (bad port in "pg-1:99999")',
    ]);
  });

  it('lets typed overrides from code win over the environment (the embedded mode), and checks them too', () => {
    const env = {
      BEDROCK_TRANSPORT: 'redis',
      BEDROCK_GRPC_PORT: '50051',
      BEDROCK_DEFAULT_MODEL: 'from-env',
      BEDROCK_EVENT_CONCURRENCY: '4',
    };
    const config = readConversationConfig(env, {
      transport: { kind: 'memory' },
      server: { grpcPort: 0, metricsPort: 0, host: '127.0.0.1' },
      recovery: { interval: 250 },
    });
    expect(config.transport.kind).toBe('memory');
    expect(config.server).toMatchObject({ grpcPort: 0, metricsPort: 0, host: '127.0.0.1', shutdownGrace: 10_000 });
    expect(config.recovery).toEqual({ interval: 250, staleAfter: 3000 });
    // What is not overridden still comes from the environment.
    expect([config.models.default, config.events.concurrency]).toEqual(['from-env', 4]);
    expect(() => readConversationConfig({}, { events: { concurrency: 0 } })).toThrow(
      'events.concurrency (BEDROCK_EVENT_CONCURRENCY) is invalid: expected an integer 1..1000 (out of range)',
    );
  });
});
