/**
 * The queue side of the gateway: consumes `llm-requests`, runs each request, appends its
 * text deltas to the conversation's notification stream, and enqueues the result on
 * `conversation-events` under a deterministic id (`llm-result/<request id>`), so a
 * redelivered job cannot answer twice. Cancels from the cancel bus abort the matching HTTP
 * stream at once and are answered with an aborted LlmErrorEvent, never partial content.
 */
import { randomBytes } from 'node:crypto';
import { setMaxListeners } from 'node:events';
import type Anthropic from '@anthropic-ai/sdk';
import { create } from '@bufbuild/protobuf';
import {
  ConversationEventJobSchema,
  ErrorKind,
  LlmRequestJobSchema,
  QUEUE_CONVERSATION_EVENTS,
  QUEUE_LLM_REQUESTS,
  StopReason,
  llmResultEventId,
  llmRunKey,
  type CancelSignal,
  type LlmRequestJob,
  type TokenDeltaKind,
} from '@bedrock/contracts';
import { createLiveOutput, createRunRegistry, followCancels } from '@bedrock/platform';
import type { Consumer, Job, Transport } from '@bedrock/platform';
import {
  failSpan,
  inSpan,
  instrumentJob,
  jobTraceLogFields,
  SpanKind,
  startQueueDepthSampler,
  traceCarrier,
} from '@bedrock/platform/server';
import type { JobOutcome, LlmOutcome as LlmOutcomeLabel, Logger, Metrics, Span } from '@bedrock/platform/server';
import type { HistorySource } from './history-source.ts';
import { runLlmJob, type LlmOutcome, type RunOptions } from './run-llm-request.ts';

/** What token deltas are merged by: the same block, the same kind (never thinking with text). */
interface DeltaTag {
  readonly blockIndex: number;
  readonly kind: TokenDeltaKind;
}

export interface LlmWorkerOptions {
  readonly transport: Transport;
  readonly client: Anthropic;
  /** Where each job's history is fetched (jobs are claim checks: conversation id and position). */
  readonly history: HistorySource;
  readonly runOptions: RunOptions;
  readonly concurrency: number;
  readonly limiter?: { readonly max: number; readonly durationMs: number };
  /** How long a cancel for a request not started yet is remembered, ms. */
  readonly cancelMemoryMs: number;
  readonly logger: Logger;
  readonly metrics?: Metrics;
  /** Test and benchmark hook: a delta reached the notification stream. */
  readonly onDeltaAppended?: (requestId: string, blockIndex: number, text: string) => void;
  /** Test and benchmark hook: the first stream event of a request arrived from the provider. */
  readonly onFirstEvent?: (requestId: string) => void;
}

export interface LlmWorker {
  /** Requests being streamed now. */
  readonly inFlight: number;
  /** Stops taking jobs; running ones get `graceMs` to finish, then are aborted and handed back. */
  close(graceMs: number): Promise<void>;
}

/** The id of the result event of a request: deterministic, so the queue drops duplicates. */
export const resultEventId = llmResultEventId;

const OUTCOME_LABEL: Partial<Record<ErrorKind, LlmOutcomeLabel>> = {
  [ErrorKind.CANCELLED]: 'cancelled',
  [ErrorKind.AUTH]: 'auth',
  [ErrorKind.RATE_LIMIT]: 'rate_limit',
  [ErrorKind.NETWORK]: 'network',
  [ErrorKind.SERVER]: 'server',
  [ErrorKind.INVALID_REQUEST]: 'invalid_request',
};

export async function startLlmWorker(options: LlmWorkerOptions): Promise<LlmWorker> {
  const { transport, logger, metrics } = options;
  // Heartbeats in the run ledger say "this request is still being answered" (a request may be
  // repeated, so there is no claim): recovery then waits for it instead of calling it lost.
  const owner = `llm-gateway#${randomBytes(6).toString('hex')}`;
  const results = transport.queues.producer(QUEUE_CONVERSATION_EVENTS, ConversationEventJobSchema);
  // The requests streaming here, by request id (platform's run registry). Every cancel is
  // remembered for `cancelMemoryMs`: one that comes before its job (or for another replica's
  // job) answers the job cancelled without calling the provider.
  const runs = createRunRegistry<LlmOutcome>({ earlyCancelTtlMs: options.cancelMemoryMs });

  const unsubscribe = await followCancels(transport.cancels, 'llmRequestId', runs, (signal: CancelSignal, found) => {
    if (found > 0)
      logger.info(
        { request_id: signal.target.value, conversation_id: signal.conversationId, found },
        'cancel: aborting the provider stream',
      );
  });

  async function handle(job: Job<LlmRequestJob>, shutdown: AbortSignal): Promise<JobOutcome> {
    const data = job.data;
    const log = logger.child({
      request_id: data.requestId,
      conversation_id: data.conversationId,
      job_id: job.id,
      attempt: data.attempt,
      ...jobTraceLogFields(data.traceContext),
    });
    const runKey = llmRunKey(data.requestId);
    const markAlive = () =>
      void transport.runs.markAlive(runKey, owner).catch((err: unknown) => log.debug({ err }, 'request heartbeat failed'));
    markAlive();
    const beat = setInterval(markAlive, transport.runs.heartbeatMs);
    // A consumer may hand every job the same shutdown signal, and the run registry puts one
    // listener per running job on it: expected, not a leak (each is removed when its job ends).
    setMaxListeners(options.concurrency + 10, shutdown);
    const model = data.model || options.runOptions.defaultModel;
    const started = performance.now();
    // Token deltas, live (platform's live-output rules: merged while an append is in flight,
    // no pause between appends, no size cap: max_tokens bounds them).
    const publisher = createLiveOutput<DeltaTag>({
      streams: transport.streams,
      conversationId: data.conversationId,
      sequence: data.notifySequence,
      kind: (text, tag) => ({ case: 'tokenDelta', value: { requestId: data.requestId, blockIndex: tag.blockIndex, kind: tag.kind, text } }),
      sameTag: (a, b) => a.blockIndex === b.blockIndex && a.kind === b.kind,
      onError: (err) => log.warn({ err }, 'token delta not appended (dropped)'),
      onAppended: options.onDeltaAppended && ((text, tag) => options.onDeltaAppended!(data.requestId, tag.blockIndex, text)),
    });
    // Alive until the result is on its way (not only while the stream runs).
    try {
      // The model call runs in the registry (a cancel or the shutdown signal aborts it); a job
      // redelivered to this replica while its request still streams joins that call (and leaves
      // the call's metrics to the job that made it).
      const joined = runs.has(data.requestId);
      const outcome = await runs.run(
        { id: data.requestId, conversationId: data.conversationId },
        async (run) => {
          metrics?.activeStreams.inc({ kind: 'llm' });
          try {
            // One model call: the `chat <model>` span of the GenAI conventions.
            return await inSpan(`chat ${model}`, { kind: SpanKind.CLIENT, attributes: chatAttributes(model) }, async (span) => {
              const got = await runLlmJob(data, {
                client: options.client,
                history: options.history,
                onHistoryError: (err) =>
                  log.warn({ err, history_through: data.historyThrough }, 'history not fetched from the conversation service'),
                options: options.runOptions,
                signal: run.signal,
                onDelta: (blockIndex, text, kind) => publisher.push(text, { blockIndex, kind }),
                onFirstEvent: () => {
                  metrics?.llmTimeToFirstTokenSeconds.observe({ model }, (performance.now() - started) / 1000);
                  options.onFirstEvent?.(data.requestId);
                },
                onWarning: (msg, fields) => log.warn(fields, msg),
              });
              recordChatOutcome(span, got);
              return got;
            });
          } finally {
            metrics?.activeStreams.dec({ kind: 'llm' });
          }
        },
        { signal: shutdown },
      );
      // Aborted by our own shutdown, not by a cancel: hand the job back for another replica.
      if (shutdown.aborted && !runs.cancelled(data.requestId)) throw new Error('gateway shutting down: request handed back to the queue');

      await publisher.flush();
      const label: LlmOutcomeLabel = outcome.case === 'llmResponse' ? 'ok' : (OUTCOME_LABEL[outcome.value.kind] ?? 'unknown');
      if (!joined) metrics?.llmRequestSeconds.observe({ model, outcome: label }, (performance.now() - started) / 1000);
      if (outcome.case === 'llmResponse') {
        const u = outcome.value.usage;
        if (u && !joined) {
          metrics?.llmTokensTotal.inc({ model, kind: 'input' }, Number(u.inputTokens));
          metrics?.llmTokensTotal.inc({ model, kind: 'output' }, Number(u.outputTokens));
          metrics?.llmTokensTotal.inc({ model, kind: 'cache_read' }, Number(u.cacheReadInputTokens));
          metrics?.llmTokensTotal.inc({ model, kind: 'cache_creation' }, Number(u.cacheCreationInputTokens));
          // Of cache_creation, the 1-hour writes (priced 2x input; the rest 1.25x).
          metrics?.llmTokensTotal.inc({ model, kind: 'cache_creation_1h' }, Number(u.cacheCreation1hInputTokens));
        }
        const r = outcome.value;
        log.info(
          {
            stop_reason: StopReason[r.stopReason],
            blocks: r.content.length,
            max_tokens: r.maxTokens,
            ...(r.cutToolNames.length > 0 ? { cut_tools: [...r.cutToolNames] } : {}),
            ...(r.stopExplanation ? { stop_explanation: r.stopExplanation } : {}),
            ms: Math.round(performance.now() - started),
            ...(joined ? { joined } : {}),
          },
          'llm response',
        );
      } else {
        const e = outcome.value;
        log[e.aborted ? 'info' : 'warn'](
          { kind: ErrorKind[e.kind], retryable: e.retryable, http_status: e.httpStatus, provider_request_id: e.providerRequestId },
          e.message,
        );
      }
      await results.add(
        resultEventId(data.requestId),
        create(ConversationEventJobSchema, {
          eventId: resultEventId(data.requestId),
          conversationId: data.conversationId,
          event: outcome,
          // Under the job's consumer span (the job's own context with tracing off).
          traceContext: traceCarrier(data.traceContext),
        }),
      );
      return outcome.case === 'llmError' && outcome.value.aborted ? 'cancelled' : 'completed';
    } finally {
      clearInterval(beat);
    }
  }

  // Jobs started, in flight and finished by outcome (`retried` = handed back on shutdown), their
  // duration and queue wait: platform's job metrics, the same as the tool-runner's.
  const measured = instrumentJob(metrics, QUEUE_LLM_REQUESTS, handle);
  const consumer: Consumer = transport.queues.consume(QUEUE_LLM_REQUESTS, LlmRequestJobSchema, measured, {
    concurrency: options.concurrency,
    ...(options.limiter ? { limiter: options.limiter } : {}),
  });

  const sampler = metrics
    ? startQueueDepthSampler({
        queues: transport.queues,
        names: [QUEUE_LLM_REQUESTS],
        metrics,
        onError: (err) => logger.debug({ err }, 'queue depth sample failed'),
      })
    : undefined;

  return {
    get inFlight() {
      return runs.size;
    },
    async close(graceMs) {
      sampler?.stop();
      await consumer.close(graceMs);
      await unsubscribe();
    },
  };
}

/** Request attributes of a `chat <model>` span (OpenTelemetry GenAI client spans). */
function chatAttributes(model: string): Record<string, string> {
  return { 'gen_ai.operation.name': 'chat', 'gen_ai.system': 'anthropic', 'gen_ai.request.model': model };
}

/** Response attributes of a `chat <model>` span; an error outcome marks it failed with its kind. */
function recordChatOutcome(span: Span, outcome: LlmOutcome): void {
  if (outcome.case === 'llmResponse') {
    const r = outcome.value;
    if (r.model) span.setAttribute('gen_ai.response.model', r.model);
    span.setAttribute('gen_ai.response.finish_reasons', [(StopReason[r.stopReason] ?? 'unknown').toLowerCase()]);
    if (r.usage) {
      span.setAttribute('gen_ai.usage.input_tokens', Number(r.usage.inputTokens));
      span.setAttribute('gen_ai.usage.output_tokens', Number(r.usage.outputTokens));
    }
  } else if (outcome.case === 'llmError') {
    const e = outcome.value;
    failSpan(span, Object.assign(new Error(e.message), { name: ErrorKind[e.kind] ?? 'unknown' }));
  }
}
