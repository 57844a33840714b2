/**
 * The model registry: each model's context window and output limit, in tokens, and the form
 * of extended thinking it takes.
 *
 * Pure data and pure functions, shared by the gateway (default `max_tokens`) and the
 * conversation service (the 80% warning and the 90% continuation threshold, REQ-BED-019,
 * REQ-BED-022/023). No I/O and no environment reads: the operator's override (env
 * `BEDROCK_MODELS` in the services) is passed in as an argument.
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
}

export interface ModelLookup extends ModelLimits {
  /** False when the model is not in the registry and the conservative fallback was used. */
  readonly known: boolean;
}

/** The offline demo model served by the testkit's local Messages API server. */
export const OFFLINE_MODEL_ID = 'bedrock-offline';

const M = 1_000_000;
const K200 = 200_000;

/**
 * Defaults, from the provider's published model pages (context window · max output).
 * Dated ids and aliases are listed separately because the API accepts both.
 */
export const DEFAULT_MODELS: Readonly<Record<string, ModelLimits>> = {
  [OFFLINE_MODEL_ID]: { contextWindow: K200, maxOutputTokens: 64_000, thinking: 'adaptive' },
  'claude-fable-5-1': { contextWindow: M, maxOutputTokens: 128_000, thinking: 'adaptive' },
  'claude-opus-5-5': { contextWindow: M, maxOutputTokens: 128_000, thinking: 'adaptive' },
  'claude-sonnet-5-5': { contextWindow: M, maxOutputTokens: 128_000, thinking: 'adaptive' },
  'claude-haiku-5-5': { contextWindow: M, maxOutputTokens: 128_000, thinking: 'adaptive' },
  'claude-opus-5': { contextWindow: M, maxOutputTokens: 128_000, thinking: 'adaptive' },
  'claude-sonnet-5': { contextWindow: M, maxOutputTokens: 128_000, thinking: 'adaptive' },
  'claude-opus-4-6': { contextWindow: M, maxOutputTokens: 128_000, thinking: 'adaptive' },
  'claude-sonnet-4-6': { contextWindow: M, maxOutputTokens: 128_000, thinking: 'adaptive' },
  'claude-opus-4-5': { contextWindow: K200, maxOutputTokens: 64_000, thinking: 'budget' },
  'claude-opus-4-5-20251101': { contextWindow: K200, maxOutputTokens: 64_000, thinking: 'budget' },
  'claude-sonnet-4-5': { contextWindow: K200, maxOutputTokens: 64_000, thinking: 'budget' },
  'claude-sonnet-4-5-20250929': { contextWindow: K200, maxOutputTokens: 64_000, thinking: 'budget' },
  'claude-haiku-4-5': { contextWindow: K200, maxOutputTokens: 64_000, thinking: 'budget' },
  'claude-haiku-4-5-20251001': { contextWindow: K200, maxOutputTokens: 64_000, thinking: 'budget' },
};

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
const FIELDS = ['contextWindow', 'maxOutputTokens', 'thinking'] as const;

/**
 * A registry from the defaults plus an operator override: a JSON object (or its text)
 * mapping model ids to `{ "contextWindow": n, "maxOutputTokens": n, "thinking": form }`. An
 * override entry replaces a default of the same id; a field left out keeps the default's
 * value (a new id must give both limits; its `thinking` defaults to `none`). Throws an Error
 * naming the bad entry when the override is malformed.
 */
export function createModelRegistry(override?: string | Readonly<Record<string, unknown>> | null): ModelRegistry {
  const table = new Map<string, ModelLimits>(Object.entries(DEFAULT_MODELS));
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
  const smallest: ModelLimits = { contextWindow, maxOutputTokens, thinking: 'none' };
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
  return { contextWindow: pick('contextWindow'), maxOutputTokens: pick('maxOutputTokens'), thinking: thinking as ThinkingForm };
}
