/** BEDROCK_RETRY_FOR: how long the CLI retries a change (src/retry.ts; the policy itself is @bedrock/agent-view/retry). */
import { describe, expect, it } from '@jest/globals';
import { DEFAULT_RETRY_POLICY } from '@bedrock/agent-view/retry';
import { retryPolicyFromEnv } from '../src/retry.ts';

describe('BEDROCK_RETRY_FOR (the CLI)', () => {
  it('defaults to 30 s; takes durations; 0 turns retries off; a bad value is a usage error', () => {
    expect(retryPolicyFromEnv({})).toEqual(DEFAULT_RETRY_POLICY);
    expect(retryPolicyFromEnv({ BEDROCK_RETRY_FOR: '2s' })).toMatchObject({ budgetMs: 2000, attempts: 6 });
    expect(retryPolicyFromEnv({ BEDROCK_RETRY_FOR: '2m' })).toMatchObject({ budgetMs: 120_000, attempts: 25 });
    expect(retryPolicyFromEnv({ BEDROCK_RETRY_FOR: '500ms' }).budgetMs).toBe(500);
    expect(retryPolicyFromEnv({ BEDROCK_RETRY_FOR: '0' }).attempts).toBe(1);
    expect(() => retryPolicyFromEnv({ BEDROCK_RETRY_FOR: 'soon' })).toThrow(/BEDROCK_RETRY_FOR=soon/);
  });
});
