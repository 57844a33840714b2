/**
 * The model registry: each model's context window and output limit, in tokens, the form of extended
 * thinking it takes, and its prices (what a response costs, `costOf`). Pure data and pure functions,
 * shared by the gateway (default `max_tokens`) and the conversation service (the 80% warning and the 90%
 * continuation threshold, REQ-BED-019, REQ-BED-022/023).
 */

/**
 * How a model takes extended thinking: `adaptive` (`thinking: {type: 'adaptive'}` with an
 * effort level, Claude 5 and 4.6 models), `budget` (`thinking: {type: 'enabled',
 * budget_tokens}`, 4.5 models) or `none` (the model cannot think; no thinking is requested).
 */
export type ThinkingForm = 'adaptive' | 'budget' | 'none';

export const THINKING_FORMS: readonly ThinkingForm[] = ['adaptive', 'budget', 'none'];

export interface ModelLimits {
  /** Input plus output tokens the model can attend to. */
  readonly contextWindow: number;
  /** The largest `max_tokens` the model accepts for one response. */
  readonly maxOutputTokens: number;
  /** The form of extended thinking the model takes. */
  readonly thinking: ThinkingForm;
  /**
   * Effort levels (`output_config.effort`) an adaptive model takes; a level it does not take is
   * sent as the nearest one below (`xhigh` as `high`). Empty for budget and non-thinking models.
   */
  readonly efforts: readonly Effort[];
  /** Versions of the provider-run web tools the model takes. */
  readonly webTools: WebToolVersions;
  /** What the provider charges for it; every price 0 when unknown. */
  readonly prices: ModelPrices;
  /**
   * Takes server-side compaction (beta `compact-2026-01-12`): the gateway lets the provider
   * summarise the context instead of the continuation summary. Absent: false.
   */
  readonly compaction?: boolean;
}

export type Effort = 'low' | 'medium' | 'high' | 'xhigh' | 'max';
export const EFFORTS: readonly Effort[] = ['low', 'medium', 'high', 'xhigh', 'max'];

/** The `type` of the web search and web fetch tool definitions sent for a model. */
export interface WebToolVersions {
  readonly webSearch: string;
  readonly webFetch: string;
}

/** The first versions, taken by every model with web tools. */
export const BASIC_WEB_TOOLS: WebToolVersions = { webSearch: 'web_search_20250305', webFetch: 'web_fetch_20250910' };
/** Versions with dynamic filtering (the provider: Claude 4.6 and later models). */
export const FILTERING_WEB_TOOLS: WebToolVersions = { webSearch: 'web_search_20260209', webFetch: 'web_fetch_20260209' };

/**
 * Prices of a model in USD: tokens per million tokens, server tools per use. Any number of
 * decimals may be given; costs are reckoned in whole micro-dollars (`costOf`).
 */
export interface ModelPrices {
  /** Uncached input tokens. */
  readonly input: number;
  /** Output tokens (thinking included). */
  readonly output: number;
  /** Input tokens written to the 5-minute prompt cache (1.25x input). */
  readonly cacheWrite: number;
  /** Input tokens written to the 1-hour prompt cache (2x input). */
  readonly cacheWrite1h: number;
  /** Input tokens read from the prompt cache. */
  readonly cacheRead: number;
  /** One web search (server tool). */
  readonly webSearch: number;
  /** One web fetch (server tool). */
  readonly webFetch: number;
}

export const PRICE_FIELDS = ['input', 'output', 'cacheWrite', 'cacheWrite1h', 'cacheRead', 'webSearch', 'webFetch'] as const;

/** No charge: the offline model, and an unknown model (whose price Bedrock cannot know). */
export const FREE: ModelPrices = { input: 0, output: 0, cacheWrite: 0, cacheWrite1h: 0, cacheRead: 0, webSearch: 0, webFetch: 0 };

/** What one response used, as the provider reports it (the fields costOf reads). */
export interface BilledUsage {
  readonly inputTokens: number;
  readonly outputTokens: number;
  /** Every token written to the prompt cache, 5-minute and 1-hour. */
  readonly cacheCreationInputTokens: number;
  /** Of cacheCreationInputTokens, those written to the 1-hour cache (0 or absent: all 5-minute). */
  readonly cacheCreation1hInputTokens?: number;
  readonly cacheReadInputTokens: number;
  readonly webSearchRequests?: number;
  readonly webFetchRequests?: number;
}

/**
 * The cost of `usage` at `prices` in whole micro-dollars (1 USD = 1,000,000), rounded to the
 * nearest. A price per million tokens is a price in micro-dollars per token, so the sum is
 * exact before the one rounding; prices are first taken to a thousandth of a micro-dollar so
 * that binary fractions (0.3 is not exact in a double) cannot tip the rounding.
 */
export function costOf(usage: BilledUsage, prices: ModelPrices): number {
  const milli = (usd: number) => Math.round(usd * 1000);
  // The 1-hour share can never exceed the total (a provider that reported so is taken at the total).
  const oneHour = Math.min(usage.cacheCreation1hInputTokens ?? 0, usage.cacheCreationInputTokens);
  const fiveMinutes = usage.cacheCreationInputTokens - oneHour;
  const nano =
    usage.inputTokens * milli(prices.input) +
    usage.outputTokens * milli(prices.output) +
    fiveMinutes * milli(prices.cacheWrite) +
    oneHour * milli(prices.cacheWrite1h) +
    usage.cacheReadInputTokens * milli(prices.cacheRead) +
    (usage.webSearchRequests ?? 0) * milli(prices.webSearch * 1_000_000) +
    (usage.webFetchRequests ?? 0) * milli(prices.webFetch * 1_000_000);
  return Math.round(nano / 1000);
}

export interface ModelLookup extends ModelLimits {
  /** False when the model is not in the registry and the conservative fallback was used. */
  readonly known: boolean;
}

/** The offline demo model served by the testkit's local Messages API server. */
export const OFFLINE_MODEL_ID = 'bedrock-offline';

const M = 1_000_000;
const K200 = 200_000;

/** Web search is billed at $10 per 1,000 searches; web fetch costs nothing beyond its tokens. */
const SERVER_TOOLS = { webSearch: 0.01, webFetch: 0 } as const;

/**
 * Prices per million tokens from the input and output rates. The provider prices the prompt
 * cache as multiples of the input rate, the same for every model: a 5-minute write 1.25x, a
 * 1-hour write 2x, a read 0.1x (models.test.ts checks every entry).
 */
function priced(input: number, output: number): ModelPrices {
  // To a millionth of a dollar, so 3 x 0.1 reads 0.3 (not 0.30000000000000004).
  const times = (k: number) => Math.round(input * k * 1e6) / 1e6;
  return { input, output, cacheWrite: times(1.25), cacheWrite1h: times(2), cacheRead: times(0.1), ...SERVER_TOOLS };
}

/**
 * Published Anthropic prices, as read on platform.claude.com (model overview and pricing
 * pages) on 2026-11-26. Standard rates only: no batch discount, and Haiku 5.5's higher rate for
 * prompts over 100,000 tokens is not applied (its base rate is used). Opus 5.5 and Fable 5.1
 * had cache reads at 0.05x and 0.025x input here before: the provider's rate is 0.1x.
 */
const FABLE_5_1 = priced(10, 50);
const OPUS_5_5 = priced(4, 20);
const SONNET_5_5 = priced(2, 10);
const HAIKU_5_5 = priced(0.1, 0.5);
const OPUS_5 = priced(5, 25);
const SONNET_5 = priced(2, 10);
const OPUS_4_5_AND_4_6 = priced(5, 25);
const SONNET_4_5_AND_4_6 = priced(3, 15);
const HAIKU_4_5 = priced(1, 5);

/** Effort levels: the provider's effort page lists `xhigh` for the Claude 5 models, `max` from 4.6 on. */
const WITH_XHIGH: readonly Effort[] = EFFORTS;
const UP_TO_MAX: readonly Effort[] = ['low', 'medium', 'high', 'max'];
const NO_EFFORT: readonly Effort[] = [];

const adaptive = (contextWindow: number, efforts: readonly Effort[], prices: ModelPrices): ModelLimits => ({
  contextWindow,
  maxOutputTokens: 128_000,
  thinking: 'adaptive',
  efforts,
  webTools: FILTERING_WEB_TOOLS,
  prices,
});
const budget = (prices: ModelPrices): ModelLimits => ({
  contextWindow: K200,
  maxOutputTokens: 64_000,
  thinking: 'budget',
  efforts: NO_EFFORT,
  webTools: BASIC_WEB_TOOLS,
  prices,
});

/**
 * Defaults, from the provider's published model pages (context window · max output · prices).
 * Dated ids and aliases are listed separately because the API accepts both.
 */
export const DEFAULT_MODELS: Readonly<Record<string, ModelLimits>> = {
  [OFFLINE_MODEL_ID]: {
    contextWindow: K200,
    maxOutputTokens: 64_000,
    thinking: 'adaptive',
    efforts: WITH_XHIGH,
    webTools: FILTERING_WEB_TOOLS,
    prices: FREE,
  },
  'claude-fable-5-1': adaptive(M, WITH_XHIGH, FABLE_5_1),
  'claude-opus-5-5': adaptive(M, WITH_XHIGH, OPUS_5_5),
  'claude-sonnet-5-5': adaptive(M, WITH_XHIGH, SONNET_5_5),
  'claude-haiku-5-5': adaptive(M, UP_TO_MAX, HAIKU_5_5),
  'claude-opus-5': adaptive(M, WITH_XHIGH, OPUS_5),
  'claude-sonnet-5': adaptive(M, WITH_XHIGH, SONNET_5),
  'claude-opus-4-6': adaptive(M, UP_TO_MAX, OPUS_4_5_AND_4_6),
  'claude-sonnet-4-6': adaptive(M, UP_TO_MAX, SONNET_4_5_AND_4_6),
  'claude-opus-4-5': budget(OPUS_4_5_AND_4_6),
  'claude-opus-4-5-20251101': budget(OPUS_4_5_AND_4_6),
  'claude-sonnet-4-5': budget(SONNET_4_5_AND_4_6),
  'claude-sonnet-4-5-20250929': budget(SONNET_4_5_AND_4_6),
  'claude-haiku-4-5': budget(HAIKU_4_5),
  'claude-haiku-4-5-20251001': budget(HAIKU_4_5),
};

/**
 * Models that take server-side compaction, as the provider lists them (Opus 4.6, Sonnet 4.6;
 * also Opus 4.7 and Mythos Preview, not in this registry), and the offline model. Claude 5
 * models are not listed in the compaction documentation we could read: `BEDROCK_MODELS` can
 * turn it on (`"compaction": true`).
 */
export const COMPACTION_MODELS: ReadonlySet<string> = new Set([OFFLINE_MODEL_ID, 'claude-opus-4-6', 'claude-sonnet-4-6']);

export interface ModelRegistry {
  /**
   * Limits of `model`; an unknown model gets the smallest known limits (REQ-BED-022) and no
   * thinking (its form is not known, and a request the model cannot take would fail).
   */
  lookup(model: string): ModelLookup;
  /** Every known model id with its limits, sorted by id. */
  list(): ReadonlyArray<{ readonly id: string } & ModelLimits>;
  /** The fallback used for unknown models: the smallest known window and output limit, no thinking. */
  readonly fallback: ModelLimits;
}

/** Fields an override entry may set. */
const FIELDS = ['contextWindow', 'maxOutputTokens', 'thinking', 'efforts', 'webTools', 'prices', 'compaction'] as const;

/**
 * A registry from the defaults plus an operator override: a JSON object (or its text)
 * mapping model ids to `{ "contextWindow": n, "maxOutputTokens": n, "thinking": form,
 * "prices": { "input": usd, ... } }`. An override entry replaces a default of the same id; a
 * field (or price) left out keeps the default's value (a new id must give both limits; its
 * `thinking` defaults to `none`, its prices to 0). Throws an Error
 * naming the bad entry when the override is malformed. No I/O and no environment reads here: the
 * services read the override from env `BEDROCK_MODELS` and pass it in.
 */
export function createModelRegistry(override?: string | Readonly<Record<string, unknown>> | null): ModelRegistry {
  const table = new Map<string, ModelLimits>(
    Object.entries(DEFAULT_MODELS).map(([id, limits]) => [id, COMPACTION_MODELS.has(id) ? { ...limits, compaction: true } : limits]),
  );
  for (const [id, limits] of Object.entries(parseOverride(override))) {
    table.set(id, mergeLimits(id, table.get(id), limits));
  }
  let contextWindow = Infinity;
  let maxOutputTokens = Infinity;
  for (const limits of table.values()) {
    contextWindow = Math.min(contextWindow, limits.contextWindow);
    maxOutputTokens = Math.min(maxOutputTokens, limits.maxOutputTokens);
  }
  // The table is never empty: the override can change entries but not remove them.
  const smallest: ModelLimits = {
    contextWindow,
    maxOutputTokens,
    thinking: 'none',
    efforts: NO_EFFORT,
    webTools: BASIC_WEB_TOOLS,
    prices: FREE,
  };
  return {
    fallback: smallest,
    lookup(model) {
      const hit = table.get(model);
      return hit ? { ...hit, known: true } : { ...smallest, known: false };
    },
    list() {
      return [...table.entries()].sort(([a], [b]) => a.localeCompare(b)).map(([id, l]) => ({ id, ...l }));
    },
  };
}

function parseOverride(override: string | Readonly<Record<string, unknown>> | null | undefined): Record<string, unknown> {
  if (override === undefined || override === null) return {};
  let value: unknown = override;
  if (typeof override === 'string') {
    if (override.trim() === '') return {};
    try {
      value = JSON.parse(override);
    } catch (err) {
      throw new Error(`model registry override is not valid JSON: ${(err as Error).message}`);
    }
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new Error(
      'model registry override must be a JSON object of {"model-id": {"contextWindow": n, "maxOutputTokens": n, "thinking": "adaptive" | "budget" | "none"}}',
    );
  }
  return value as Record<string, unknown>;
}

function mergeLimits(id: string, base: ModelLimits | undefined, raw: unknown): ModelLimits {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) {
    throw new Error(`model registry override for "${id}" must be an object`);
  }
  const entry = raw as Record<string, unknown>;
  for (const key of Object.keys(entry)) {
    if (!(FIELDS as readonly string[]).includes(key)) {
      throw new Error(`model registry override for "${id}" has unknown field "${key}"`);
    }
  }
  const pick = (field: 'contextWindow' | 'maxOutputTokens'): number => {
    const v = entry[field] ?? base?.[field];
    if (v === undefined) throw new Error(`model registry override for new model "${id}" must set ${field}`);
    if (typeof v !== 'number' || !Number.isSafeInteger(v) || v <= 0) {
      throw new Error(`model registry override for "${id}": ${field} must be a positive integer, got ${JSON.stringify(v)}`);
    }
    return v;
  };
  const thinking = entry.thinking ?? base?.thinking ?? 'none';
  if (typeof thinking !== 'string' || !(THINKING_FORMS as readonly string[]).includes(thinking)) {
    throw new Error(
      `model registry override for "${id}": thinking must be one of ${THINKING_FORMS.join(', ')}, got ${JSON.stringify(thinking)}`,
    );
  }
  const efforts = entry.efforts ?? base?.efforts ?? (thinking === 'adaptive' ? UP_TO_MAX : NO_EFFORT);
  if (!Array.isArray(efforts) || efforts.some((e) => !(EFFORTS as readonly unknown[]).includes(e))) {
    throw new Error(
      `model registry override for "${id}": efforts must be an array of ${EFFORTS.join(', ')}, got ${JSON.stringify(efforts)}`,
    );
  }
  const webTools = entry.webTools ?? base?.webTools ?? BASIC_WEB_TOOLS;
  const w = webTools as Partial<Record<string, unknown>>;
  if (typeof webTools !== 'object' || webTools === null || typeof w.webSearch !== 'string' || typeof w.webFetch !== 'string') {
    throw new Error(
      `model registry override for "${id}": webTools must be {"webSearch": type, "webFetch": type}, got ${JSON.stringify(webTools)}`,
    );
  }
  const compaction = entry.compaction ?? base?.compaction ?? false;
  if (typeof compaction !== 'boolean') {
    throw new Error(`model registry override for "${id}": compaction must be true or false, got ${JSON.stringify(compaction)}`);
  }
  return {
    contextWindow: pick('contextWindow'),
    maxOutputTokens: pick('maxOutputTokens'),
    thinking: thinking as ThinkingForm,
    efforts: efforts as Effort[],
    webTools: { webSearch: w.webSearch, webFetch: w.webFetch },
    prices: mergePrices(id, base?.prices ?? FREE, entry.prices),
    ...(compaction ? { compaction } : {}),
  };
}

/** `prices` of an override entry: an object of some of PRICE_FIELDS, each a finite number >= 0 (USD); the rest kept. */
function mergePrices(id: string, base: ModelPrices, raw: unknown): ModelPrices {
  if (raw === undefined) return base;
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) {
    throw new Error(`model registry override for "${id}": prices must be an object of ${PRICE_FIELDS.join(', ')} (USD)`);
  }
  const merged: Record<string, number> = { ...base };
  for (const [key, value] of Object.entries(raw as Record<string, unknown>)) {
    if (!(PRICE_FIELDS as readonly string[]).includes(key)) {
      throw new Error(`model registry override for "${id}" has unknown price "${key}" (one of ${PRICE_FIELDS.join(', ')})`);
    }
    if (typeof value !== 'number' || !Number.isFinite(value) || value < 0) {
      throw new Error(`model registry override for "${id}": prices.${key} must be a number >= 0 (USD), got ${JSON.stringify(value)}`);
    }
    merged[key] = value;
  }
  return merged as unknown as ModelPrices;
}
