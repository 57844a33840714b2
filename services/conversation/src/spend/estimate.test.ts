import { describe, expect, it } from '@jest/globals';
import fc from 'fast-check';
import { costOf, createModelRegistry } from '@bedrock/contracts/models';
import { SERVER_TOOL_MAX_USES, worstCaseCostMicros } from './estimate.ts';

describe('worstCaseCostMicros', () => {
  const sonnet = createModelRegistry().lookup('claude-sonnet-5-5');

  it('prices a full context window at the dearer prompt price, max_tokens of output and every server tool use', () => {
    // 200,000 × 2.5 (cache write) + 16,384 × 10 + 5 × $0.01 searches.
    expect(worstCaseCostMicros(sonnet.prices, { contextWindow: 200_000, maxTokens: 16_384, serverTools: ['web_search'] })).toBe(
      500_000 + 163_840 + 50_000,
    );
    expect(
      worstCaseCostMicros(createModelRegistry().lookup('bedrock-offline').prices, {
        contextWindow: 200_000,
        maxTokens: 1,
        serverTools: [],
      }),
    ).toBe(0);
  });

  it('property: no response a request can get costs more than its estimate', () => {
    fc.assert(
      fc.property(
        fc.nat({ max: 200_000 }),
        fc.nat({ max: 200_000 }),
        fc.nat({ max: 200_000 }),
        fc.nat({ max: 16_384 }),
        fc.nat({ max: SERVER_TOOL_MAX_USES }),
        (input, cacheWrite, cacheRead, output, searches) => {
          // The prompt's tokens together fit the window.
          const scale = Math.max(1, (input + cacheWrite + cacheRead) / 200_000);
          const usage = {
            inputTokens: Math.floor(input / scale),
            cacheCreationInputTokens: Math.floor(cacheWrite / scale),
            cacheReadInputTokens: Math.floor(cacheRead / scale),
            outputTokens: output,
            webSearchRequests: searches,
            webFetchRequests: 0,
          };
          const bound = worstCaseCostMicros(sonnet.prices, { contextWindow: 200_000, maxTokens: 16_384, serverTools: ['web_search'] });
          expect(costOf(usage, sonnet.prices)).toBeLessThanOrEqual(bound);
        },
      ),
    );
  });
});
