import { describe, expect, it } from '@jest/globals';
import { ConfigError } from '@bedrock/platform/config';
import { createModelRegistry } from '@bedrock/contracts/models';
import { defaultModelOf, imageLimitsOf, modelRegistryOf, rateLimitOf, readLlmGatewayConfig } from './config.ts';
import { DEFAULT_IMAGE_LIMITS } from './images.ts';

/** The problems of a config that does not load. */
function problems(env: Record<string, string>): readonly string[] {
  try {
    readLlmGatewayConfig(env);
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as ConfigError).problems;
  }
  throw new Error('the config loaded');
}

describe('gateway config', () => {
  it('has the documented defaults, nested per concern', () => {
    const config = readLlmGatewayConfig({});
    expect(config.log.level).toBe('info');
    expect(config.server).toEqual({ host: '0.0.0.0', metricsPort: 9464, shutdownGrace: 10_000 });
    expect(config.transport.kind).toBe('redis');
    expect(config.provider).toEqual({ defaultMaxTokens: 32_000, requestTimeout: 60_000, idleTimeout: 120_000 });
    expect(config.offline.eventDelay).toBe(15);
    expect(config.images).toEqual({ maxEdgePx: DEFAULT_IMAGE_LIMITS.targetLongEdgePx, maxEncodedSize: 5 * 1024 * 1024 });
    expect(config.history).toEqual({ conversationUrls: ['http://127.0.0.1:50051'], resolveInterval: 10_000, timeout: 10_000 });
    expect(config.jobs).toEqual({ concurrency: 16, rateLimit: { max: 0, window: 60_000 }, cancelMemory: 600_000 });
    expect(rateLimitOf(config.jobs)).toBeUndefined();
    expect(imageLimitsOf(config.images)).toEqual(DEFAULT_IMAGE_LIMITS);
  });

  it('reads durations and sizes with their units, and lists of URLs', () => {
    const config = readLlmGatewayConfig({
      BEDROCK_LLM_REQUEST_TIMEOUT: '1.5s',
      BEDROCK_LLM_IDLE_TIMEOUT: '5m',
      BEDROCK_OFFLINE_EVENT_DELAY: '0ms',
      BEDROCK_HISTORY_TIMEOUT: '250ms',
      BEDROCK_LLM_CANCEL_MEMORY: '1h',
      BEDROCK_IMAGE_MAX_ENCODED_SIZE: '512KiB',
      BEDROCK_CONVERSATION_URL: 'http://a:50051, https://b:50051',
      BEDROCK_LLM_RATE_LIMIT_MAX: '50',
      BEDROCK_LLM_RATE_LIMIT_WINDOW: '10s',
    });
    expect(config.provider.requestTimeout).toBe(1500);
    expect(config.provider.idleTimeout).toBe(300_000);
    expect(config.offline.eventDelay).toBe(0);
    expect(config.history.timeout).toBe(250);
    expect(config.jobs.cancelMemory).toBe(3_600_000);
    expect(config.images.maxEncodedSize).toBe(512 * 1024);
    expect(imageLimitsOf(config.images).maxBase64Bytes).toBe(512 * 1024);
    expect(config.history.conversationUrls).toEqual(['http://a:50051', 'https://b:50051']);
    expect(rateLimitOf(config.jobs)).toEqual({ max: 50, durationMs: 10_000 });
  });

  it('rejects a bare number for a duration or a size, naming the variable and the unit to write', () => {
    const found = problems({ BEDROCK_LLM_IDLE_TIMEOUT: '120000', BEDROCK_IMAGE_MAX_ENCODED_SIZE: '5000' });
    expect(found).toHaveLength(2);
    expect(found[0]).toMatch(
      /^BEDROCK_LLM_IDLE_TIMEOUT="120000" is invalid: expected a duration with its unit .*write the unit: 500ms, 30s/,
    );
    expect(found[1]).toMatch(/^BEDROCK_IMAGE_MAX_ENCODED_SIZE="5000" is invalid: expected a size with its unit .*write the unit/);
  });

  it('names every bad variable at once', () => {
    const found = problems({
      BEDROCK_LLM_CONCURRENCY: '0',
      BEDROCK_CONVERSATION_URL: 'ftp://conversation:50051',
      BEDROCK_IMAGE_MAX_ENCODED_SIZE: '6MiB',
      BEDROCK_HISTORY_TIMEOUT: '0s',
      BEDROCK_TRANSPORT: 'kafka',
    });
    expect(found).toHaveLength(5);
    expect(found.join('\n')).toMatch(/BEDROCK_LLM_CONCURRENCY="0" is invalid: expected an integer 1..1024/);
    expect(found.join('\n')).toMatch(/BEDROCK_CONVERSATION_URL="ftp:\/\/conversation:50051" is invalid: .*scheme ftp: not allowed/);
    expect(found.join('\n')).toMatch(/BEDROCK_IMAGE_MAX_ENCODED_SIZE="6MiB" is invalid: .*\(at most 5MiB\)/);
    expect(found.join('\n')).toMatch(/BEDROCK_HISTORY_TIMEOUT="0s" is invalid: .*\(at least 1ms\)/);
    expect(found.join('\n')).toMatch(/BEDROCK_TRANSPORT="kafka" is invalid: expected one of redis, memory/);
  });

  it('fails fast on a malformed BEDROCK_MODELS and applies a valid one', () => {
    expect(problems({ BEDROCK_MODELS: '{"x": {"contextWindow": 0, "maxOutputTokens": 1}}' })).toEqual([
      expect.stringMatching(/^BEDROCK_MODELS=.* is invalid: expected a JSON object of models \(.*positive integer/),
    ]);
    expect(problems({ BEDROCK_MODELS: '{"claude-opus-5": {"thinking": "lots"}}' })).toEqual([
      expect.stringMatching(/^BEDROCK_MODELS=.*thinking must be one of adaptive, budget, none/),
    ]);
    expect(problems({ BEDROCK_MODELS: 'not json' })).toEqual([expect.stringMatching(/^BEDROCK_MODELS="not json" is invalid/)]);
    const config = readLlmGatewayConfig({
      BEDROCK_MODELS: '{"my-model": {"contextWindow": 32000, "maxOutputTokens": 4096}}',
      ANTHROPIC_API_KEY: 'k',
    });
    const registry = modelRegistryOf(config.provider);
    // A model given without prices costs nothing (prices are the conversation service's concern: spend).
    expect(registry.lookup('my-model')).toMatchObject({
      contextWindow: 32000,
      maxOutputTokens: 4096,
      thinking: 'none',
      known: true,
      prices: { input: 0, output: 0, cacheWrite: 0, cacheRead: 0, webSearch: 0, webFetch: 0 },
    });
    // The smallest model is the fallback for unknown ones.
    expect(registry.lookup('unknown').contextWindow).toBe(32000);
    expect(
      modelRegistryOf(
        readLlmGatewayConfig({ BEDROCK_MODELS: '{"my-model": {"contextWindow": 32000, "maxOutputTokens": 8192, "thinking": "budget"}}' })
          .provider,
      ).lookup('my-model').thinking,
    ).toBe('budget');
    // Unset: the built-in table.
    expect(modelRegistryOf(readLlmGatewayConfig({}).provider).list()).toEqual(createModelRegistry().list());
  });

  it('defaults the model to the offline one without a key, else to the provider default', () => {
    expect(defaultModelOf(readLlmGatewayConfig({}).provider)).toBe('bedrock-offline');
    expect(defaultModelOf(readLlmGatewayConfig({ ANTHROPIC_API_KEY: 'k' }).provider)).toBe('claude-sonnet-5-5');
    expect(defaultModelOf(readLlmGatewayConfig({ BEDROCK_DEFAULT_MODEL: 'claude-haiku-4-5' }).provider)).toBe('claude-haiku-4-5');
  });

  it('lets typed overrides from code win over the environment, which still applies to the rest', () => {
    const registry = createModelRegistry('{"code-model": {"contextWindow": 1000, "maxOutputTokens": 100}}');
    const config = readLlmGatewayConfig(
      {
        BEDROCK_TRANSPORT: 'redis',
        BEDROCK_METRICS_PORT: '9999',
        BEDROCK_CONVERSATION_URL: 'http://elsewhere:50051',
        BEDROCK_LLM_IDLE_TIMEOUT: '1m',
        REDIS_URL: 'redis://cache:6379',
      },
      {
        transport: { kind: 'memory' },
        server: { metricsPort: 0 },
        history: { conversationUrls: ['http://127.0.0.1:40000'] },
        provider: { models: registry },
        offline: { eventDelay: 0 },
      },
    );
    expect(config.transport.kind).toBe('memory');
    expect(config.transport.redis.url).toBe('redis://cache:6379');
    expect(config.server).toEqual({ host: '0.0.0.0', metricsPort: 0, shutdownGrace: 10_000 });
    expect(config.history.conversationUrls).toEqual(['http://127.0.0.1:40000']);
    expect(config.provider.idleTimeout).toBe(60_000);
    expect(modelRegistryOf(config.provider).lookup('code-model').known).toBe(true);
    expect(config.offline.eventDelay).toBe(0);
  });

  it('checks overrides from code too', () => {
    expect(() => readLlmGatewayConfig({}, { jobs: { concurrency: 0 } })).toThrow(
      /jobs\.concurrency \(BEDROCK_LLM_CONCURRENCY\) is invalid/,
    );
    expect(() => readLlmGatewayConfig({}, { history: { conversationUrls: [] } })).toThrow(/BEDROCK_CONVERSATION_URL/);
  });
});
