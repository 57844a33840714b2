/**
 * The gateway's configuration, read from the environment (docs/llm-gateway.md lists every
 * variable with its default). `readLlmGatewayConfig()` fails fast naming every bad variable,
 * including a malformed BEDROCK_MODELS.
 */
import { commonEnv, duration, int, oneOf, optional, readEnv, setting, str, url, urlList } from '@bedrock/platform/server';
import type { LogLevel } from '@bedrock/platform/server';
import { createModelRegistry, OFFLINE_MODEL_ID } from '@bedrock/contracts/models';
import type { ModelRegistry } from '@bedrock/contracts/models';
import { DEFAULT_IMAGE_LIMITS } from './images.ts';
import type { ImageLimits } from './images.ts';

export interface LlmGatewayConfig {
  /** Provider key. Unset: the offline demo model answers, from a local server started in-process. */
  readonly apiKey: string | undefined;
  /** Messages API base URL (no `/v1`). Default: the SDK's, https://api.anthropic.com. */
  readonly baseUrl: string | undefined;
  /** `redis` (distributed) or `memory` (in-process, for embedding and tests). Default `redis`. */
  readonly transport: 'redis' | 'memory';
  /** Requests streamed at once by this replica. Default 16. */
  readonly concurrency: number;
  /** Queue-wide limit shared by every replica: at most `max` requests started per `durationMs`. `max` 0 = off (default). */
  readonly limiter: { readonly max: number; readonly durationMs: number } | undefined;
  /** Context windows, output limits and thinking forms (defaults plus BEDROCK_MODELS). */
  readonly registry: ModelRegistry;
  /** Model used when a job names none. Default `claude-sonnet-5-5`; `bedrock-offline` when offline. */
  readonly defaultModel: string;
  /** `max_tokens` when a job asks for 0, capped by the model's output limit. Default 32 000. */
  readonly defaultMaxTokens: number;
  /** Time allowed until the provider's response headers, ms. Default 60 s. */
  readonly requestTimeoutMs: number;
  /** Longest silence between stream events before the stream is abandoned, ms. Default 120 s. */
  readonly idleTimeoutMs: number;
  readonly imageLimits: ImageLimits;
  /** Offline model: delay between streamed events, ms, so the demo visibly streams. Default 15. */
  readonly offlineEventDelayMs: number;
  /** A cancel that arrives before its job starts is remembered this long, ms. Default 10 min. */
  readonly cancelMemoryMs: number;
  /** Port of /metrics, /healthz, /readyz (0 = any free port). Default 9464. */
  readonly metricsPort: number;
  /** Interface of the metrics server. Default `0.0.0.0`. */
  readonly host: string;
  /** How long running requests may finish after SIGTERM before they are handed back, ms. Default 10 s. */
  readonly shutdownGraceMs: number;
  readonly logLevel: LogLevel;
  /** Conversation service gRPC URLs, where each job's history is fetched. Default http://127.0.0.1:50051. */
  readonly conversationUrls: readonly URL[];
  /** How often host names in conversationUrls are resolved again, ms. Default 10 s. */
  readonly conversationResolveMs: number;
  /** Deadline of one history fetch, ms. Default 10 s. */
  readonly historyTimeoutMs: number;
  /** File of the gateway's own service token, presented to the conversation service. */
  readonly serviceTokenFile: string | undefined;
}

export const llmGatewayEnv = {
  logLevel: commonEnv.logLevel,
  host: commonEnv.host,
  metricsPort: commonEnv.metricsPort,
  shutdownGraceMs: commonEnv.shutdownGraceMs,
  // The gateway serves no internal endpoint; it calls the conversation service for histories.
  serviceTokenFile: commonEnv.serviceTokenFile,
  conversationUrls: setting({
    name: 'BEDROCK_CONVERSATION_URL',
    parse: urlList({ protocols: ['http', 'https'] }),
    default: [new URL('http://127.0.0.1:50051')],
    doc: "Base URLs of the conversation service's internal gRPC API (h2c for http://), comma-separated, where each request's history is fetched (jobs name the history, they do not carry it); a host name stands for all of its addresses (a Kubernetes headless Service lists every ready pod).",
  }),
  conversationResolveMs: setting({
    name: 'BEDROCK_CONVERSATION_RESOLVE_INTERVAL',
    parse: duration(),
    default: 10_000,
    doc: 'How often host names in BEDROCK_CONVERSATION_URL are resolved again to follow replicas that come and go (also after a replica fails); 0 = only then.',
  }),
  historyTimeoutMs: setting({
    name: 'BEDROCK_HISTORY_TIMEOUT',
    parse: duration(),
    default: 10_000,
    doc: 'Deadline of one history fetch from the conversation service; a fetch that fails or times out is a retryable network error (the state machine retries the request).',
  }),
  apiKey: setting({
    name: 'ANTHROPIC_API_KEY',
    parse: optional(str()),
    default: undefined,
    doc: 'Provider API key. Unset: the offline demo model answers (a local Messages API server started in-process).',
  }),
  baseUrl: setting({
    name: 'ANTHROPIC_BASE_URL',
    parse: optional(url({ protocols: ['http', 'https'] })),
    default: undefined,
    doc: 'Messages API base URL, without /v1 (e.g. a local server from `npm run messages-api -w packages/offline-model`). Default https://api.anthropic.com.',
  }),
  transport: setting({
    name: 'BEDROCK_TRANSPORT',
    parse: oneOf(['redis', 'memory'] as const),
    default: 'redis',
    doc: 'Queues and streams: Redis (distributed, see REDIS_URL) or in-process.',
  }),
  concurrency: setting({
    name: 'BEDROCK_LLM_CONCURRENCY',
    parse: int({ min: 1, max: 1024 }),
    default: 16,
    doc: 'LLM requests streamed at once by one replica.',
  }),
  limiterMax: setting({
    name: 'BEDROCK_LLM_RATE_LIMIT_MAX',
    parse: int({ min: 0 }),
    default: 0,
    doc: 'Queue-wide: at most this many requests start per window, across all replicas (0 = no limit).',
  }),
  limiterWindowMs: setting({
    name: 'BEDROCK_LLM_RATE_LIMIT_WINDOW',
    parse: duration(),
    default: 60_000,
    doc: 'The window of BEDROCK_LLM_RATE_LIMIT_MAX.',
  }),
  models: setting({
    name: 'BEDROCK_MODELS',
    parse: optional(str()),
    default: undefined,
    doc: 'JSON object overriding or adding models: {"id": {"contextWindow": n, "maxOutputTokens": n, "thinking": "adaptive"|"budget"|"none"}} (a new model without thinking gets none).',
  }),
  defaultModel: setting({
    name: 'BEDROCK_DEFAULT_MODEL',
    parse: optional(str()),
    default: undefined,
    doc: 'Model for jobs that name none; default claude-sonnet-5-5 (bedrock-offline without a key).',
  }),
  defaultMaxTokens: setting({
    name: 'BEDROCK_LLM_DEFAULT_MAX_TOKENS',
    parse: int({ min: 1 }),
    default: 32_000,
    doc: 'max_tokens when a job asks for the default, capped by the model output limit.',
  }),
  requestTimeoutMs: setting({
    name: 'BEDROCK_LLM_REQUEST_TIMEOUT',
    parse: duration(),
    default: 60_000,
    doc: 'Time allowed until the provider response headers arrive.',
  }),
  idleTimeoutMs: setting({
    name: 'BEDROCK_LLM_IDLE_TIMEOUT',
    parse: duration(),
    default: 120_000,
    doc: 'Longest time without a byte from the provider (pings count) before the stream is abandoned (a retryable network error).',
  }),
  imageMaxEdgePx: setting({
    name: 'BEDROCK_IMAGE_MAX_EDGE_PX',
    parse: int({ min: 0, max: 8000 }),
    default: DEFAULT_IMAGE_LIMITS.targetLongEdgePx,
    doc: 'Images with a longer edge are downscaled before sending (0 = only to the API hard limit of 8000 px).',
  }),
  imageMaxBytes: setting({
    name: 'BEDROCK_IMAGE_MAX_BYTES',
    parse: int({ min: 1024, max: DEFAULT_IMAGE_LIMITS.maxBase64Bytes }),
    default: DEFAULT_IMAGE_LIMITS.maxBase64Bytes,
    doc: 'Largest base64-encoded image sent; larger ones are re-encoded smaller or rejected (API limit 5 MiB).',
  }),
  offlineEventDelayMs: setting({
    name: 'BEDROCK_OFFLINE_EVENT_DELAY',
    parse: duration(),
    default: 15,
    doc: 'Offline model: delay between streamed events.',
  }),
  cancelMemoryMs: setting({
    name: 'BEDROCK_LLM_CANCEL_MEMORY',
    parse: duration(),
    default: 600_000,
    doc: 'How long a cancel for a request not yet started is remembered.',
  }),
};

export function readLlmGatewayConfig(env: Record<string, string | undefined> = process.env): LlmGatewayConfig {
  const v = readEnv(llmGatewayEnv, env);
  let registry: ModelRegistry;
  try {
    registry = createModelRegistry(v.models);
  } catch (err) {
    throw new Error(`BEDROCK_MODELS: ${(err as Error).message}`);
  }
  return {
    apiKey: v.apiKey,
    baseUrl: v.baseUrl?.href.replace(/\/$/, ''),
    transport: v.transport,
    concurrency: v.concurrency,
    limiter: v.limiterMax > 0 ? { max: v.limiterMax, durationMs: v.limiterWindowMs } : undefined,
    registry,
    defaultModel: v.defaultModel ?? (v.apiKey ? 'claude-sonnet-5-5' : OFFLINE_MODEL_ID),
    defaultMaxTokens: v.defaultMaxTokens,
    requestTimeoutMs: v.requestTimeoutMs,
    idleTimeoutMs: v.idleTimeoutMs,
    imageLimits: { ...DEFAULT_IMAGE_LIMITS, targetLongEdgePx: v.imageMaxEdgePx, maxBase64Bytes: v.imageMaxBytes },
    offlineEventDelayMs: v.offlineEventDelayMs,
    cancelMemoryMs: v.cancelMemoryMs,
    metricsPort: v.metricsPort,
    host: v.host,
    shutdownGraceMs: v.shutdownGraceMs,
    logLevel: v.logLevel,
    conversationUrls: v.conversationUrls,
    conversationResolveMs: v.conversationResolveMs,
    historyTimeoutMs: v.historyTimeoutMs,
    serviceTokenFile: v.serviceTokenFile,
  };
}
