import type { Usage } from './types.ts';

export const ZERO_USAGE: Usage = {
  inputTokens: 0,
  outputTokens: 0,
  cacheCreationInputTokens: 0,
  cacheCreation1hInputTokens: 0,
  cacheReadInputTokens: 0,
  thinkingTokens: 0,
  webSearchRequests: 0,
  webFetchRequests: 0,
  compactionTokens: 0,
};

/** The sum; a count absent from one side (stored before it existed) counts as 0. */
export function addUsage(a: Usage, b: Usage): Usage {
  return {
    inputTokens: a.inputTokens + b.inputTokens,
    outputTokens: a.outputTokens + b.outputTokens,
    cacheCreationInputTokens: a.cacheCreationInputTokens + b.cacheCreationInputTokens,
    cacheCreation1hInputTokens: (a.cacheCreation1hInputTokens ?? 0) + (b.cacheCreation1hInputTokens ?? 0),
    cacheReadInputTokens: a.cacheReadInputTokens + b.cacheReadInputTokens,
    thinkingTokens: (a.thinkingTokens ?? 0) + (b.thinkingTokens ?? 0),
    webSearchRequests: (a.webSearchRequests ?? 0) + (b.webSearchRequests ?? 0),
    webFetchRequests: (a.webFetchRequests ?? 0) + (b.webFetchRequests ?? 0),
    compactionTokens: (a.compactionTokens ?? 0) + (b.compactionTokens ?? 0),
  };
}

const COUNTS = Object.keys(ZERO_USAGE) as (keyof Usage)[];

/** `after` − `before` (the usage one transition added), for every count ZERO_USAGE names; a count absent from one side counts as 0. */
export function subtractUsage(after: Usage, before: Usage): Usage {
  const delta: { -readonly [K in keyof Usage]: Usage[K] } = { ...ZERO_USAGE };
  for (const key of COUNTS) delta[key] = (after[key] ?? 0) - (before[key] ?? 0);
  return delta;
}

/**
 * Tokens a response occupies in the context window (REQ-BED-019: "total tokens from LLM
 * response usage data"). With prompt caching the provider splits the input into uncached,
 * cache-read and cache-creation counts; the window holds all of them plus the output
 * (thinking tokens are part of the output count, so they are not added again). The provider's
 * compaction iterations (counted in, for billing) are left out: the compacted context replaced
 * what they read.
 */
export function contextTokens(usage: Usage): number {
  const all = usage.inputTokens + usage.cacheReadInputTokens + usage.cacheCreationInputTokens + usage.outputTokens;
  return Math.max(0, all - (usage.compactionTokens ?? 0));
}
