/**
 * The gateway's settings: one schema, nested per concern, read from the environment (and typed
 * overrides from code, e.g. the embedded mode's). docs/llm-gateway.md holds the table generated
 * from it. `readLlmGatewayConfig()` fails fast naming every bad variable, including a malformed
 * BEDROCK_MODELS. Durations are milliseconds and sizes bytes in code; the environment writes them
 * with their unit (`30s`, `5MiB`).
 */
import { z } from '@bedrock/platform/config';
import {
  duration,
  int,
  list,
  oneOf,
  loadConfig,
  logLevelSetting,
  optionalSetting,
  section,
  serverSection,
  serviceTokenFileSetting,
  setting,
  size,
  str,
  transportSection,
  url,
  type ConfigOverrides,
  type SettingType,
} from '@bedrock/platform/config';
import { createModelRegistry, OFFLINE_MODEL_ID } from '@bedrock/contracts/models';
import type { ModelRegistry } from '@bedrock/contracts/models';
import { DEFAULT_IMAGE_LIMITS } from './images.ts';
import type { ImageLimits } from './images.ts';
import { CACHE_TTLS, DEFAULT_CACHE_TTLS } from './cache-breakpoints.ts';
import { DEFAULT_MCP_DEFER_LIMITS } from './mcp-defer.ts';

/** The model used when a job names none and the config names none either (with a key). */
export const DEFAULT_PROVIDER_MODEL = 'claude-sonnet-5-5';

/**
 * BEDROCK_MODELS: JSON overriding or adding models, read into the registry (so a malformed one
 * stops the start); in code, a ModelRegistry.
 */
function modelRegistry(): SettingType<ModelRegistry> {
  return {
    expected: 'a JSON object of models',
    schema: z.unknown().transform((value, ctx): ModelRegistry => {
      if (typeof value === 'string') {
        try {
          return createModelRegistry(value);
        } catch (err) {
          ctx.addIssue({ code: 'custom', message: (err as Error).message });
          return z.NEVER;
        }
      }
      const candidate = value as Partial<ModelRegistry> | null;
      if (candidate && typeof candidate.lookup === 'function' && typeof candidate.list === 'function') return candidate as ModelRegistry;
      ctx.addIssue({ code: 'custom', message: 'not a model registry' });
      return z.NEVER;
    }),
  };
}

/** A size with an upper bound too (the API's limit). */
function sizeAtMost(max: number, options: { min?: number }): SettingType<number> {
  const base = size(options);
  const shown = base.format!(max);
  return { ...base, expected: `${base.expected}, at most ${shown}`, schema: base.schema.pipe(z.number().max(max, `at most ${shown}`)) };
}

export const llmGatewayConfigSchema = section({
  log: section({ level: logLevelSetting }),
  /** The gateway serves only /metrics, /healthz and /readyz (no gRPC port). */
  server: serverSection({}),
  transport: transportSection,
  /** The model provider (the Messages API), or the offline demo model without a key. */
  provider: section({
    /** Unset: the offline demo model answers, from a local server started in-process. */
    apiKey: optionalSetting('ANTHROPIC_API_KEY', str(), {
      doc: 'Provider API key. Unset: the offline demo model answers (a local Messages API server started in-process).',
    }),
    /** Messages API base URL (no `/v1`); unset: the SDK's, https://api.anthropic.com. */
    baseUrl: optionalSetting('ANTHROPIC_BASE_URL', url({ protocols: ['http', 'https'] }), {
      doc: 'Messages API base URL, without /v1 (e.g. a local server from `npm run messages-api -w packages/offline-model`). Default https://api.anthropic.com.',
    }),
    /** Context windows, output limits and thinking forms; unset: the built-in table. */
    models: optionalSetting('BEDROCK_MODELS', modelRegistry(), {
      doc: 'JSON object overriding or adding models: {"id": {"contextWindow": n, "maxOutputTokens": n, "thinking": "adaptive"|"budget"|"none"}} (a new model without thinking gets none).',
    }),
    /** Model for jobs that name none; unset: see {@link defaultModelOf}. */
    defaultModel: optionalSetting('BEDROCK_DEFAULT_MODEL', str(), {
      doc: `Model for jobs that name none; default ${DEFAULT_PROVIDER_MODEL} (${OFFLINE_MODEL_ID} without a key).`,
    }),
    /** `max_tokens` when a job asks for 0, capped by the model's output limit. */
    defaultMaxTokens: setting('BEDROCK_LLM_DEFAULT_MAX_TOKENS', int({ min: 1 }), {
      default: 32_000,
      doc: 'max_tokens when a job asks for the default, capped by the model output limit.',
    }),
    /** Time allowed until the provider's response headers, ms. */
    requestTimeout: setting('BEDROCK_LLM_REQUEST_TIMEOUT', duration({ min: 1 }), {
      default: 60_000,
      doc: 'Time allowed until the provider response headers arrive.',
    }),
    /** Longest silence between bytes of a stream before it is abandoned, ms. */
    idleTimeout: setting('BEDROCK_LLM_IDLE_TIMEOUT', duration({ min: 1 }), {
      default: 120_000,
      doc: 'Longest time without a byte from the provider (pings count) before the stream is abandoned (a retryable network error).',
    }),
  }),
  /** The offline demo model (no API key). */
  offline: section({
    /** Delay between streamed events, ms, so the demo visibly streams. */
    eventDelay: setting('BEDROCK_OFFLINE_EVENT_DELAY', duration(), {
      default: 15,
      doc: 'Offline model: delay between streamed events.',
    }),
  }),
  /** Prompt caching: the TTL of each breakpoint (cache-breakpoints.ts). */
  cache: section({
    tools: setting('BEDROCK_CACHE_TTL_TOOLS', oneOf(CACHE_TTLS), {
      default: DEFAULT_CACHE_TTLS.tools,
      doc: 'Prompt cache lifetime of the breakpoint after the tool definitions: 5m (writes 1.25x input) or 1h (writes 2x).',
    }),
    system: setting('BEDROCK_CACHE_TTL_SYSTEM', oneOf(CACHE_TTLS), {
      default: DEFAULT_CACHE_TTLS.system,
      doc: 'Prompt cache lifetime of the breakpoint after the system prompt: 5m or 1h (never shorter than a later breakpoint: sent as 1h then).',
    }),
    messages: setting('BEDROCK_CACHE_TTL_MESSAGES', oneOf(CACHE_TTLS), {
      default: DEFAULT_CACHE_TTLS.messages,
      doc: 'Prompt cache lifetime of the breakpoints in the history (previous user turn, end of the request): 5m or 1h; 1h by default because users often pause longer than 5 minutes between turns.',
    }),
  }),
  /** MCP tools deferred behind the provider's tool search tool (mcp-defer.ts, docs/mcp.md). */
  mcpDefer: section({
    maxTools: setting('BEDROCK_MCP_DEFER_TOOLS', int({ min: 0 }), {
      default: DEFAULT_MCP_DEFER_LIMITS.maxTools,
      doc: 'MCP tools are deferred (defer_loading, found by the tool search tool) when a request has more than this many of them (0 = always).',
    }),
    maxTokens: setting('BEDROCK_MCP_DEFER_TOKENS', int({ min: 0 }), {
      default: DEFAULT_MCP_DEFER_LIMITS.maxTokens,
      doc: 'MCP tools are deferred when their definitions are estimated at more than this many tokens (about 4 characters a token).',
    }),
  }),
  /** Images sent to the provider. */
  images: section({
    /** Longer edges are downscaled to this, px (0 = only to the API's hard limit). */
    maxEdgePx: setting('BEDROCK_IMAGE_MAX_EDGE_PX', int({ min: 0, max: 8000 }), {
      default: DEFAULT_IMAGE_LIMITS.targetLongEdgePx,
      doc: 'Images with a longer edge are downscaled before sending (0 = only to the API hard limit of 8000 px).',
    }),
    /** Largest base64-encoded image sent, bytes. */
    maxEncodedSize: setting('BEDROCK_IMAGE_MAX_ENCODED_SIZE', sizeAtMost(DEFAULT_IMAGE_LIMITS.maxBase64Bytes, { min: 1024 }), {
      default: DEFAULT_IMAGE_LIMITS.maxBase64Bytes,
      doc: 'Largest image sent, base64-encoded; larger ones are re-encoded smaller or rejected (API limit 5 MiB).',
    }),
  }),
  /** Where each job's history is fetched: the conversation service's internal gRPC API. */
  history: section({
    /** Base URLs (a host name stands for all of its addresses). */
    conversationUrls: setting('BEDROCK_CONVERSATION_URL', list(url({ protocols: ['http', 'https'] }), { min: 1 }), {
      default: ['http://127.0.0.1:50051'],
      doc: "Base URLs of the conversation service's internal gRPC API (h2c for http://), comma-separated, where each request's history is fetched (jobs name the history, they do not carry it); a host name stands for all of its addresses (a Kubernetes headless Service lists every ready pod).",
    }),
    /** How often host names in conversationUrls are resolved again, ms (0 = only after a failure). */
    resolveInterval: setting('BEDROCK_CONVERSATION_RESOLVE_INTERVAL', duration(), {
      default: 10_000,
      doc: 'How often host names in BEDROCK_CONVERSATION_URL are resolved again to follow replicas that come and go (also after a replica fails); 0ms = only then.',
    }),
    /** Deadline of one history fetch, ms. */
    timeout: setting('BEDROCK_HISTORY_TIMEOUT', duration({ min: 1 }), {
      default: 10_000,
      doc: 'Deadline of one history fetch from the conversation service; a fetch that fails or times out is a retryable network error (the state machine retries the request).',
    }),
    /** File of the gateway's own service token, presented to the conversation service. */
    serviceTokenFile: serviceTokenFileSetting,
  }),
  /** The `llm-requests` queue as this replica consumes it. */
  jobs: section({
    /** Requests streamed at once by this replica. */
    concurrency: setting('BEDROCK_LLM_CONCURRENCY', int({ min: 1, max: 1024 }), {
      default: 16,
      doc: 'LLM requests streamed at once by one replica.',
    }),
    /** Queue-wide limit shared by every replica: at most `max` requests started per `window` (ms); `max` 0 = off. */
    rateLimit: section({
      max: setting('BEDROCK_LLM_RATE_LIMIT_MAX', int({ min: 0 }), {
        default: 0,
        doc: 'Queue-wide: at most this many requests start per window, across all replicas (0 = no limit).',
      }),
      window: setting('BEDROCK_LLM_RATE_LIMIT_WINDOW', duration({ min: 1 }), {
        default: 60_000,
        doc: 'The window of BEDROCK_LLM_RATE_LIMIT_MAX.',
      }),
    }),
    /** How long a cancel is remembered (for a job that comes after it), ms. */
    cancelMemory: setting('BEDROCK_LLM_CANCEL_MEMORY', duration(), {
      default: 600_000,
      doc: 'How long a cancel is remembered: a job of a cancelled request that comes later (still queued, or retried) is answered cancelled without calling the provider.',
    }),
  }),
});

export type LlmGatewayConfig = z.output<typeof llmGatewayConfigSchema>;

/** Reads the gateway's settings from `env`; `overrides` (typed values from code) win over it. */
export function readLlmGatewayConfig(
  env: Record<string, string | undefined> = process.env,
  overrides: ConfigOverrides<LlmGatewayConfig> = {},
): LlmGatewayConfig {
  return loadConfig(llmGatewayConfigSchema, env, overrides);
}

/** The model for jobs that name none: the configured one, else the default (the offline model without a key). */
export function defaultModelOf(provider: LlmGatewayConfig['provider']): string {
  return provider.defaultModel ?? (provider.apiKey ? DEFAULT_PROVIDER_MODEL : OFFLINE_MODEL_ID);
}

/** The model registry in use: BEDROCK_MODELS applied to the built-in table. */
export function modelRegistryOf(provider: LlmGatewayConfig['provider']): ModelRegistry {
  return provider.models ?? createModelRegistry();
}

/** The image limits in use: the built-in ones with the two configurable bounds applied. */
export function imageLimitsOf(images: LlmGatewayConfig['images']): ImageLimits {
  return { ...DEFAULT_IMAGE_LIMITS, targetLongEdgePx: images.maxEdgePx, maxBase64Bytes: images.maxEncodedSize };
}

/** The queue-wide rate limit for the consumer, or undefined when off. */
export function rateLimitOf(jobs: LlmGatewayConfig['jobs']): { max: number; durationMs: number } | undefined {
  return jobs.rateLimit.max > 0 ? { max: jobs.rateLimit.max, durationMs: jobs.rateLimit.window } : undefined;
}
