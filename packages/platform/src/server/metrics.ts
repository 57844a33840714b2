import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { Code, ConnectError } from '@connectrpc/connect';
import type { Interceptor } from '@connectrpc/connect';
import { METRIC } from './metric-names.ts';

/**
 * Buckets for things users wait on, in seconds: 5 ms … 10 min. Wide because the same
 * histograms hold a 5 ms `think` and a 10-minute `npm test`.
 */
export const DURATION_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600];
/** Finer buckets for the milliseconds of the hot path (an event's arrival → its effects), 1 ms … 10 s. */
export const LATENCY_BUCKETS = [0.001, 0.002, 0.003, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.03, 0.05, 0.075, 0.1, 0.2, 0.5, 1, 2.5, 10];

/** A service's registry and the shared metric families (names in {@link METRIC}). */
export interface Metrics {
  /** Holds the families below plus Node's process metrics (`process_*`, `nodejs_*`). */
  readonly registry: Registry;
  readonly queueDepth: Gauge<'queue' | 'state'>;
  readonly queueWaitSeconds: Histogram<'queue'>;
  readonly jobsStartedTotal: Counter<'queue'>;
  /** Label `outcome` takes a {@link JobOutcome}. */
  readonly jobsTotal: Counter<'queue' | 'outcome'>;
  readonly jobDurationSeconds: Histogram<'queue' | 'outcome'>;
  readonly jobLatencySeconds: Histogram<'queue'>;
  readonly jobsInFlight: Gauge<'queue'>;
  /** Label `result` takes a {@link TransitionResult}. */
  readonly transitionsTotal: Counter<'state' | 'event' | 'result'>;
  /** Label `kind` takes a {@link TokenKind}. */
  readonly llmTokensTotal: Counter<'model' | 'kind'>;
  /** Label `outcome` takes an {@link LlmOutcome}. */
  readonly llmRequestSeconds: Histogram<'model' | 'outcome'>;
  readonly llmTimeToFirstTokenSeconds: Histogram<'model'>;
  /** Label `outcome` takes a {@link ToolOutcome}. */
  readonly toolDurationSeconds: Histogram<'tool' | 'outcome'>;
  readonly activeStreams: Gauge<'kind'>;
  readonly rpcServerSeconds: Histogram<'method' | 'code'>;
  readonly writeBatchSize: Histogram;
}

/**
 * Creates a fresh registry for `service` (e.g. `tool-runner`): every series gets the label
 * `service`, Node's default process metrics are collected, and the shared families are
 * registered up front so their names are fixed here rather than at call sites. A family
 * nobody records into exports no series.
 */
export function createMetrics(service: string): Metrics {
  const registry = new Registry();
  registry.setDefaultLabels({ service });
  collectDefaultMetrics({ register: registry });
  const registers = [registry];
  return {
    registry,
    queueDepth: new Gauge({ name: METRIC.queueDepth, help: 'Jobs in a queue by state.', labelNames: ['queue', 'state'], registers }),
    queueWaitSeconds: new Histogram({
      name: METRIC.queueWaitSeconds,
      help: 'Seconds from enqueue to a worker picking the job up.',
      labelNames: ['queue'],
      buckets: DURATION_BUCKETS,
      registers,
    }),
    jobsStartedTotal: new Counter({
      name: METRIC.jobsStartedTotal,
      help: 'Jobs a worker started.',
      labelNames: ['queue'],
      registers,
    }),
    jobsTotal: new Counter({
      name: METRIC.jobsTotal,
      help: 'Jobs finished by a worker, by outcome.',
      labelNames: ['queue', 'outcome'],
      registers,
    }),
    jobDurationSeconds: new Histogram({
      name: METRIC.jobDurationSeconds,
      help: 'Seconds a worker spent on one job.',
      labelNames: ['queue', 'outcome'],
      buckets: DURATION_BUCKETS,
      registers,
    }),
    jobLatencySeconds: new Histogram({
      name: METRIC.jobLatencySeconds,
      help: 'Seconds from a job being ready to its handler finishing (wait + work).',
      labelNames: ['queue'],
      buckets: LATENCY_BUCKETS,
      registers,
    }),
    jobsInFlight: new Gauge({ name: METRIC.jobsInFlight, help: 'Jobs a worker is running now.', labelNames: ['queue'], registers }),
    transitionsTotal: new Counter({
      name: METRIC.transitionsTotal,
      help: 'State-machine transitions by previous state, event and result.',
      labelNames: ['state', 'event', 'result'],
      registers,
    }),
    llmTokensTotal: new Counter({
      name: METRIC.llmTokensTotal,
      help: 'LLM tokens by model and kind.',
      labelNames: ['model', 'kind'],
      registers,
    }),
    llmRequestSeconds: new Histogram({
      name: METRIC.llmRequestSeconds,
      help: 'Seconds from sending an LLM request to its end.',
      labelNames: ['model', 'outcome'],
      buckets: DURATION_BUCKETS,
      registers,
    }),
    llmTimeToFirstTokenSeconds: new Histogram({
      name: METRIC.llmTimeToFirstTokenSeconds,
      help: 'Seconds from sending an LLM request to its first streamed token.',
      labelNames: ['model'],
      buckets: DURATION_BUCKETS,
      registers,
    }),
    toolDurationSeconds: new Histogram({
      name: METRIC.toolDurationSeconds,
      help: 'Seconds one tool call ran.',
      labelNames: ['tool', 'outcome'],
      buckets: DURATION_BUCKETS,
      registers,
    }),
    activeStreams: new Gauge({ name: METRIC.activeStreams, help: 'Open long-lived streams by kind.', labelNames: ['kind'], registers }),
    rpcServerSeconds: new Histogram({
      name: METRIC.rpcServerSeconds,
      help: 'Seconds a served RPC took (streams: until they end), by method and gRPC code.',
      labelNames: ['method', 'code'],
      buckets: DURATION_BUCKETS,
      registers,
    }),
    writeBatchSize: new Histogram({
      name: METRIC.writeBatchSize,
      help: 'Applied events written per statement (group commit).',
      buckets: [1, 2, 4, 8, 16, 32, 64],
      registers,
    }),
  };
}

/** gRPC code name as grpc-go and grpcurl print it: `OK`, `NotFound`, `Unavailable`, ... */
function codeName(err: unknown): string {
  return Code[ConnectError.from(err).code] ?? 'Unknown';
}

/**
 * A Connect interceptor recording {@link METRIC.rpcServerSeconds} for every served call.
 * Pass it in `startGrpcServer({ interceptors: [rpcMetricsInterceptor(metrics)] })`.
 */
export function rpcMetricsInterceptor(metrics: Metrics): Interceptor {
  return (next) => async (req) => {
    const method = `${req.service.typeName}/${req.method.name}`;
    const stop = metrics.rpcServerSeconds.startTimer({ method });
    try {
      const res = await next(req);
      if (!res.stream) {
        stop({ code: 'OK' });
        return res;
      }
      const messages = res.message;
      return {
        ...res,
        message: (async function* () {
          // Stays Canceled if the stream is abandoned (client gone) before it ends.
          let code = 'Canceled';
          try {
            yield* messages;
            code = 'OK';
          } catch (err) {
            code = codeName(err);
            throw err;
          } finally {
            stop({ code });
          }
        })(),
      };
    } catch (err) {
      stop({ code: codeName(err) });
      throw err;
    }
  };
}
