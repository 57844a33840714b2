/**
 * One set of job metrics for every queue worker (the llm-gateway and the tool-runner had one hand-rolled
 * copy each): per job, `bedrock_queue_wait_seconds`, `bedrock_jobs_started_total` and
 * `bedrock_jobs_in_flight` at its start, `bedrock_jobs_total` and `bedrock_job_duration_seconds` by outcome
 * at its end (docs/observability.md, "The job metrics").
 */
import type { Job, JobHandler } from '../interfaces.ts';
import type { JobOutcome } from './metric-names.ts';
import type { Metrics } from './metrics.ts';

/** A queue handler that says how its job ended (`completed` when it returns nothing). */
export type InstrumentedJobHandler<T> = (job: Job<T>, signal: AbortSignal) => Promise<JobOutcome | void>;

/**
 * Wraps `handler` of `queue` with the job metrics above. Without `metrics` (a worker built
 * without a registry) the handler runs unmeasured. The in-flight gauge of `queue` is exported
 * (at 0) from the moment the wrapper is made. The outcome is what the handler returns
 * (`completed` when it returns nothing; a worker returns e.g. `cancelled` or `interrupted`). A
 * handler that throws is `retried` when the consumer's signal had aborted (the job is handed back
 * to the queue on shutdown) and `failed` otherwise (the queue retries it with backoff); the error
 * is rethrown either way.
 */
export function instrumentJob<T>(metrics: Metrics | undefined, queue: string, handler: InstrumentedJobHandler<T>): JobHandler<T> {
  if (!metrics) {
    return async (job, signal) => {
      await handler(job, signal);
    };
  }
  metrics.jobsInFlight.inc({ queue }, 0);
  return async (job, signal) => {
    const started = performance.now();
    metrics.queueWaitSeconds.observe({ queue }, Math.max(0, Date.now() - job.readyAt) / 1000);
    metrics.jobsStartedTotal.inc({ queue });
    metrics.jobsInFlight.inc({ queue });
    let outcome: JobOutcome = 'completed';
    try {
      outcome = (await handler(job, signal)) ?? 'completed';
    } catch (err) {
      outcome = signal.aborted ? 'retried' : 'failed';
      throw err;
    } finally {
      metrics.jobsInFlight.dec({ queue });
      metrics.jobsTotal.inc({ queue, outcome });
      metrics.jobDurationSeconds.observe({ queue, outcome }, (performance.now() - started) / 1000);
      if (outcome !== 'failed' && outcome !== 'retried')
        metrics.jobLatencySeconds.observe({ queue }, Math.max(0, Date.now() - job.readyAt) / 1000);
    }
  };
}
