/**
 * What one LLM request can cost at most (docs/conversation.md, "Limits"): the budget a request
 * holds from the moment it is emitted until its response is priced. Pure. An upper bound, not a
 * guess ({@link worstCaseCostMicros}), so a request emitted while any budget is left can take the
 * spend past the budget by at most its own cost.
 */
import type { ModelPrices } from '@bedrock/contracts/models';

/** The gateway's max_uses of each server tool in one request (llm-gateway request-tools.ts). */
export const SERVER_TOOL_MAX_USES = 5;

export interface RequestBounds {
  /** Tokens the prompt can have: the model's context window. */
  readonly contextWindow: number;
  /** max_tokens the request asks for. */
  readonly maxTokens: number;
  /** Server tools the conversation has on. */
  readonly serverTools: readonly ('web_search' | 'web_fetch')[];
}

/**
 * Whole micro-dollars (a price per million tokens is micro-dollars per token), rounded up. The
 * prompt cannot be longer than the model's context window, every prompt token is priced at the
 * dearer of uncached input and cache write, the output cannot pass max_tokens, and each server
 * tool the conversation has on can be used at most SERVER_TOOL_MAX_USES times (the gateway's max_uses).
 */
export function worstCaseCostMicros(prices: ModelPrices, bounds: RequestBounds): number {
  const perPromptToken = Math.max(prices.input, prices.cacheWrite);
  const tools =
    (bounds.serverTools.includes('web_search') ? prices.webSearch : 0) + (bounds.serverTools.includes('web_fetch') ? prices.webFetch : 0);
  const micros = bounds.contextWindow * perPromptToken + bounds.maxTokens * prices.output + SERVER_TOOL_MAX_USES * tools * 1_000_000;
  return Math.ceil(micros);
}
