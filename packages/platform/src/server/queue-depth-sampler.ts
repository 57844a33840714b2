import type { Queues } from '../interfaces.ts';
import type { Metrics } from './metrics.ts';

export interface QueueDepthSamplerOptions {
  readonly queues: Queues;
  /** Queue names to sample (the ones this service consumes). */
  readonly names: readonly string[];
  readonly metrics: Metrics;
  /** Sampling period, ms. Default 15 000 (one Prometheus scrape interval). */
  readonly intervalMs?: number;
  /** A failed sample (Redis away) is reported here and retried at the next tick. */
  readonly onError?: (err: unknown) => void;
}

export interface QueueDepthSampler {
  /** Takes one sample of every queue now (also done at start and every interval). */
  sample(): Promise<void>;
  stop(): void;
}

const STATES = ['waiting', 'active', 'delayed', 'failed'] as const;

/**
 * Keeps `bedrock_queue_depth{queue, state}` current: samples `Queues.depth` of each named
 * queue at start and then every `intervalMs` (timer unref'd, so it never holds a process
 * open). Every replica of a consumer samples the same queues: aggregate with `max by (queue,
 * state)`, not `sum`.
 */
export function startQueueDepthSampler(options: QueueDepthSamplerOptions): QueueDepthSampler {
  const { queues, names, metrics } = options;
  let running: Promise<void> | null = null;
  const sample = () => {
    running ??= (async () => {
      try {
        for (const queue of names) {
          const depth = await queues.depth(queue);
          for (const state of STATES) metrics.queueDepth.set({ queue, state }, depth[state]);
        }
      } catch (err) {
        options.onError?.(err);
      } finally {
        running = null;
      }
    })();
    return running;
  };
  void sample();
  const timer = setInterval(() => void sample(), options.intervalMs ?? 15_000);
  timer.unref();
  return { sample, stop: () => clearInterval(timer) };
}
