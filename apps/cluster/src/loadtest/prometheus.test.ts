import { describe, expect, it } from '@jest/globals';
import { addBuckets, bucketDelta, histogramBuckets, observations, quantile } from './prometheus.ts';

const TEXT = `# HELP bedrock_job_latency_seconds x
# TYPE bedrock_job_latency_seconds histogram
bedrock_job_latency_seconds_bucket{le="0.01",queue="conversation-events",service="conversation"} 50
bedrock_job_latency_seconds_bucket{le="0.02",queue="conversation-events",service="conversation"} 90
bedrock_job_latency_seconds_bucket{le="0.05",queue="conversation-events",service="conversation"} 100
bedrock_job_latency_seconds_bucket{le="+Inf",queue="conversation-events",service="conversation"} 100
bedrock_job_latency_seconds_bucket{le="0.01",queue="other",service="conversation"} 7
bedrock_job_latency_seconds_bucket{le="+Inf",queue="other",service="conversation"} 7
bedrock_job_latency_seconds_sum{queue="conversation-events",service="conversation"} 1.2
`;

describe('histograms from the Prometheus text format', () => {
  it('reads the buckets of one family and label set', () => {
    const b = histogramBuckets(TEXT, 'bedrock_job_latency_seconds', { queue: 'conversation-events' });
    expect([...b]).toEqual([
      [0.01, 50],
      [0.02, 90],
      [0.05, 100],
      [Infinity, 100],
    ]);
    expect(observations(histogramBuckets(TEXT, 'bedrock_job_latency_seconds', { queue: 'other' }))).toBe(7);
    expect(observations(histogramBuckets(TEXT, 'bedrock_queue_wait_seconds'))).toBe(0);
  });

  it('interpolates a quantile inside its bucket as histogram_quantile does', () => {
    const b = histogramBuckets(TEXT, 'bedrock_job_latency_seconds', { queue: 'conversation-events' });
    expect(quantile(b, 0.5)).toBeCloseTo(0.01, 6); // the 50th of 100 is the last of the first bucket
    expect(quantile(b, 0.7)).toBeCloseTo(0.015, 6); // 20 of the 40 in (0.01, 0.02]
    expect(quantile(b, 0.99)).toBeCloseTo(0.047, 6); // 9 of the 10 in (0.02, 0.05]
    expect(quantile(new Map(), 0.99)).toBeUndefined();
  });

  it('sums replicas and takes what was observed between two scrapes', () => {
    const a = new Map([
      [0.01, 1],
      [Infinity, 2],
    ]);
    const sum = addBuckets(a, a);
    expect([...sum]).toEqual([
      [0.01, 2],
      [Infinity, 4],
    ]);
    expect([...bucketDelta(sum, a)]).toEqual([
      [0.01, 1],
      [Infinity, 2],
    ]);
  });
});
