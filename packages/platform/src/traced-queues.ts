/**
 * Every queue hop traced, once for all services: wraps a {@link Queues} implementation (both transports use
 * it). For a payload type with a `map<string,string> trace_context` field, adding a job makes a PRODUCER span
 * `send <queue>` and processing it a CONSUMER span `process <queue>`, linked through the job's
 * `trace_context`; while tracing is off the jobs pass untouched (docs/observability.md, "Spans").
 */
import type { DescMessage, MessageShape } from '@bufbuild/protobuf';
import { SpanKind, context, trace } from '@opentelemetry/api';
import type { Span } from '@opentelemetry/api';
import type { BulkJob, Producer, Queues } from './interfaces.ts';
import { extractTrace, failSpan, injectTrace, tracer, tracingEnabled } from './server/spans.ts';
import type { TraceCarrier } from './server/spans.ts';

/** The generated name of a schema's trace context map, or undefined when it has none. */
function traceField(schema: DescMessage): string | undefined {
  const field = schema.fields.find((f) => f.name === 'trace_context' && f.fieldKind === 'map');
  return field?.localName;
}

function carrierOf(payload: object, field: string): TraceCarrier | undefined {
  const value = (payload as Record<string, unknown>)[field];
  return value && typeof value === 'object' && Object.keys(value).length > 0 ? (value as TraceCarrier) : undefined;
}

/**
 * The PRODUCER span is parented by the trace context the payload already names (a job written to the
 * outbox under one context and published later under another keeps its own), else by the active context;
 * its own context is written into the job's `trace_context` (W3C, `@opentelemetry/core`'s propagator). The
 * CONSUMER span is parented by the context the job carries and is active while the handler runs (so the
 * handler's spans, log lines and the jobs it adds belong to the same trace). Attributes follow
 * OpenTelemetry's messaging conventions (`messaging.system`, `messaging.operation.type`,
 * `messaging.destination.name`, `messaging.message.id`).
 */
export function tracedQueues(inner: Queues, system: 'bullmq' | 'memory'): Queues {
  const attributes = (queue: string, operation: 'send' | 'process', id: string) => ({
    'messaging.system': system,
    'messaging.operation.type': operation,
    'messaging.operation.name': operation,
    'messaging.destination.name': queue,
    'messaging.message.id': id,
  });

  function send<S extends DescMessage>(
    queue: string,
    field: string,
    jobId: string,
    payload: MessageShape<S>,
  ): { span: Span; payload: MessageShape<S> } {
    const given = carrierOf(payload, field);
    const parent = given ? extractTrace(given) : context.active();
    const span = tracer().startSpan(`send ${queue}`, { kind: SpanKind.PRODUCER, attributes: attributes(queue, 'send', jobId) }, parent);
    const carrier = injectTrace(trace.setSpan(parent, span));
    return { span, payload: { ...payload, [field]: Object.keys(carrier).length > 0 ? carrier : (given ?? {}) } };
  }

  return {
    producer<S extends DescMessage>(queue: string, schema: S): Producer<S> {
      const producer = inner.producer(queue, schema);
      const field = traceField(schema);
      if (field === undefined) return producer;
      return {
        queue: producer.queue,
        remove: (jobId) => producer.remove(jobId),
        async add(jobId, payload, options) {
          if (!tracingEnabled()) return producer.add(jobId, payload, options);
          const sent = send(queue, field, jobId, payload);
          try {
            return await producer.add(jobId, sent.payload, options);
          } catch (err) {
            failSpan(sent.span, err);
            throw err;
          } finally {
            sent.span.end();
          }
        },
        async addBulk(jobs) {
          if (!tracingEnabled()) return producer.addBulk(jobs);
          const spans: Span[] = [];
          const traced = jobs.map((job): BulkJob<S> => {
            const sent = send(queue, field, job.jobId, job.payload);
            spans.push(sent.span);
            return { ...job, payload: sent.payload };
          });
          try {
            await producer.addBulk(traced);
          } catch (err) {
            for (const span of spans) failSpan(span, err);
            throw err;
          } finally {
            for (const span of spans) span.end();
          }
        },
      };
    },
    consume(queue, schema, handler, options) {
      const field = traceField(schema);
      if (field === undefined) return inner.consume(queue, schema, handler, options);
      return inner.consume(
        queue,
        schema,
        async (job, signal) => {
          if (!tracingEnabled()) return handler(job, signal);
          const parent = extractTrace(carrierOf(job.data, field));
          const span = tracer().startSpan(
            `process ${queue}`,
            { kind: SpanKind.CONSUMER, attributes: attributes(queue, 'process', job.id) },
            parent,
          );
          try {
            await context.with(trace.setSpan(parent, span), () => handler(job, signal));
          } catch (err) {
            failSpan(span, err);
            throw err;
          } finally {
            span.end();
          }
        },
        options,
      );
    },
    depth: (queue) => inner.depth(queue),
    jobStatus: (queue, jobId) => inner.jobStatus(queue, jobId),
    removeConversation: (conversationId) => inner.removeConversation(conversationId),
    close: () => inner.close(),
  };
}
