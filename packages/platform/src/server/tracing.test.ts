import { afterEach, describe, expect, it } from '@jest/globals';
import { create } from '@bufbuild/protobuf';
import { createClient } from '@connectrpc/connect';
import { createGrpcTransport } from '@connectrpc/connect-node';
import { context, propagation, ROOT_CONTEXT, SpanKind, trace } from '@opentelemetry/api';
import { InMemorySpanExporter, NodeTracerProvider, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-node';
import { ConversationEventJobSchema, health as pb } from '@bedrock/contracts';
import { createMemoryTransport } from '../index.ts';
import { startGrpcServer } from './grpc-server.ts';
import { createHealth, registerHealth } from './health.ts';
import { createLogger } from './logger.ts';
import { extractTrace, injectTrace, jobTraceLogFields, setTracingEnabled, traceCarrier, traceIdOf } from './spans.ts';
import { otlpTracesUrl, startTracing } from './tracing.ts';

const PARENT = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';

/** An SDK recording into memory, as `startTracing` would register it. */
function recordSpans(): { exporter: InMemorySpanExporter; stop: () => Promise<void> } {
  const exporter = new InMemorySpanExporter();
  const provider = new NodeTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
  provider.register();
  setTracingEnabled(true);
  return {
    exporter,
    stop: async () => {
      await provider.shutdown();
      setTracingEnabled(false);
      trace.disable();
      context.disable();
      propagation.disable();
    },
  };
}

let cleanup: (() => Promise<void>) | undefined;
afterEach(async () => {
  await cleanup?.();
  cleanup = undefined;
});

describe('startTracing', () => {
  it('is off without an OTLP endpoint, and names the traces URL from the OTEL_* variables', async () => {
    const off = await startTracing({ serviceName: 's', env: {} });
    expect(off.enabled).toBe(false);
    await off.shutdown();
    expect(otlpTracesUrl({})).toBeUndefined();
    expect(otlpTracesUrl({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318/' })).toBe('http://c:4318/v1/traces');
    expect(otlpTracesUrl({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://t/x' })).toBe(
      'http://t/x',
    );
    expect(otlpTracesUrl({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_SDK_DISABLED: 'true' })).toBeUndefined();
    expect(otlpTracesUrl({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_TRACES_EXPORTER: 'none' })).toBeUndefined();
  });
});

describe('trace carriers', () => {
  it('with tracing off, keep a valid given context and drop an invalid one', () => {
    expect(traceCarrier({ traceparent: PARENT, tracestate: 'a=b' })).toEqual({ traceparent: PARENT, tracestate: 'a=b' });
    expect(traceCarrier({ traceparent: 'ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01' })).toEqual({});
    expect(traceCarrier()).toEqual({});
    expect(traceIdOf({ traceparent: PARENT })).toBe('4bf92f3577b34da6a3ce929d0e0e4736');
    expect(injectTrace(extractTrace({ traceparent: PARENT }))).toEqual({ traceparent: PARENT });
    expect([jobTraceLogFields({ traceparent: PARENT }), jobTraceLogFields({ traceparent: 'nope' }), jobTraceLogFields(undefined)]).toEqual([
      { trace_id: '4bf92f3577b34da6a3ce929d0e0e4736' },
      {},
      {},
    ]);
  });

  it('with tracing on, name the active span', async () => {
    const rec = recordSpans();
    cleanup = rec.stop;
    const span = trace.getTracer('t').startSpan('x', {}, extractTrace({ traceparent: PARENT }));
    const carrier = context.with(trace.setSpan(ROOT_CONTEXT, span), () => traceCarrier({ traceparent: PARENT }));
    span.end();
    // The logger's mixin writes the active span's ids: a job's are not repeated.
    expect(jobTraceLogFields({ traceparent: PARENT })).toEqual({});
    expect(carrier.traceparent).toBe(`00-4bf92f3577b34da6a3ce929d0e0e4736-${span.spanContext().spanId}-01`);
  });
});

describe('queue spans', () => {
  it('a producer span per job added, parented by the context the job carries; a consumer span parented by it', async () => {
    const rec = recordSpans();
    cleanup = rec.stop;
    const transport = createMemoryTransport();
    let seen: { carrier: Record<string, string>; active?: string } | undefined;
    const done = new Promise<void>((resolve) => {
      transport.queues.consume('conversation-events', ConversationEventJobSchema, async (job) => {
        seen = { carrier: { ...job.data.traceContext }, active: trace.getActiveSpan()?.spanContext().spanId };
        resolve();
      });
    });
    await transport.queues
      .producer('conversation-events', ConversationEventJobSchema)
      .add('j1', create(ConversationEventJobSchema, { conversationId: 'c', traceContext: { traceparent: PARENT } }));
    await done;
    await transport.close();
    const spans = rec.exporter.getFinishedSpans();
    const send = spans.find((s) => s.name === 'send conversation-events')!;
    const processed = spans.find((s) => s.name === 'process conversation-events')!;
    expect([send.kind, send.spanContext().traceId, send.parentSpanContext?.spanId]).toEqual([
      SpanKind.PRODUCER,
      '4bf92f3577b34da6a3ce929d0e0e4736',
      '00f067aa0ba902b7',
    ]);
    expect(send.attributes).toMatchObject({
      'messaging.system': 'memory',
      'messaging.destination.name': 'conversation-events',
      'messaging.message.id': 'j1',
      'messaging.operation.type': 'send',
    });
    // The job carries the producer span; the consumer span is its child and active in the handler.
    expect(seen!.carrier.traceparent).toBe(`00-4bf92f3577b34da6a3ce929d0e0e4736-${send.spanContext().spanId}-01`);
    expect([processed.kind, processed.parentSpanContext?.spanId]).toEqual([SpanKind.CONSUMER, send.spanContext().spanId]);
    expect(seen!.active).toBe(processed.spanContext().spanId);
  });
});

describe('RPC spans', () => {
  it('a server span per call, parented by the caller, with the rpc attributes and the code', async () => {
    const rec = recordSpans();
    cleanup = rec.stop;
    const logger = createLogger({ service: 'test', level: 'silent' });
    const health = createHealth();
    const server = await startGrpcServer({ port: 0, host: '127.0.0.1', logger, routes: (router) => registerHealth(router, health) });
    try {
      const client = createClient(pb.Health, createGrpcTransport({ baseUrl: server.url }));
      await client.check({ service: '' }, { headers: { traceparent: PARENT } });
      await expect(client.check({ service: 'nope' })).rejects.toThrow();
    } finally {
      await server.close();
    }
    const [ok, failed] = rec.exporter.getFinishedSpans().filter((s) => s.kind === SpanKind.SERVER);
    expect([ok!.name, ok!.spanContext().traceId, ok!.parentSpanContext?.spanId]).toEqual([
      'grpc.health.v1.Health/Check',
      '4bf92f3577b34da6a3ce929d0e0e4736',
      '00f067aa0ba902b7',
    ]);
    expect(ok!.attributes).toEqual({ 'rpc.system': 'connect_rpc', 'rpc.service': 'grpc.health.v1.Health', 'rpc.method': 'Check' });
    expect(failed!.attributes['rpc.connect_rpc.error_code']).toBe('not_found');
  });
});
