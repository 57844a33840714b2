/**
 * Tracing on OpenTelemetry (docs/observability.md, "Tracing"). {@link startTracing} starts the
 * OpenTelemetry SDK for Node with an OTLP/HTTP exporter, configured only by the standard
 * `OTEL_*` variables, and only when an OTLP endpoint is set: otherwise nothing is started and
 * the OpenTelemetry API stays a no-op. Spans and trace carriers: spans.ts.
 */
import { context, propagation, trace } from '@opentelemetry/api';
import type { NodeTracerProvider } from '@opentelemetry/sdk-trace-node';
import { setTracingEnabled } from './spans.ts';

/** A started (or not started) tracing SDK. */
export interface Tracing {
  /** Whether spans are recorded and exported (an OTLP endpoint is set). */
  readonly enabled: boolean;
  /** Exports the spans still buffered and stops the SDK; the API is a no-op again afterwards. */
  shutdown(): Promise<void>;
}

export interface TracingOptions {
  /** `service.name` of the spans unless `OTEL_SERVICE_NAME` says otherwise, e.g. `conversation`. */
  readonly serviceName: string;
  /** Where the `OTEL_*` variables are read. Default `process.env`. */
  readonly env?: Record<string, string | undefined>;
}

let running: NodeTracerProvider | undefined;

/**
 * The OTLP/HTTP traces URL the `OTEL_*` variables name: `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` as
 * given, else `OTEL_EXPORTER_OTLP_ENDPOINT` + `/v1/traces`; undefined when neither is set or
 * `OTEL_SDK_DISABLED=true` or `OTEL_TRACES_EXPORTER=none`.
 */
export function otlpTracesUrl(env: Record<string, string | undefined> = process.env): string | undefined {
  if (env.OTEL_SDK_DISABLED?.trim().toLowerCase() === 'true') return undefined;
  if (env.OTEL_TRACES_EXPORTER?.trim().toLowerCase() === 'none') return undefined;
  const traces = env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?.trim();
  if (traces) return traces;
  const base = env.OTEL_EXPORTER_OTLP_ENDPOINT?.trim();
  if (base) return `${base.replace(/\/+$/, '')}/v1/traces`;
  return undefined;
}

/**
 * Starts tracing for this process when an OTLP endpoint is configured: the Node tracer provider
 * (AsyncLocalStorage context, W3C propagator, sampler from `OTEL_TRACES_SAMPLER` /
 * `OTEL_TRACES_SAMPLER_ARG`, default parent-based always-on), a batch span processor
 * (`OTEL_BSP_*`) and the OTLP/HTTP (JSON) exporter (`OTEL_EXPORTER_OTLP_*` headers and
 * timeout). `service.name` is `OTEL_SERVICE_NAME` or `serviceName`; `OTEL_RESOURCE_ATTRIBUTES`
 * adds attributes. Call once per process (the embedded mode calls it once for all four
 * services); a second call while one runs returns a handle that does nothing. The SDK's modules
 * are loaded only when tracing is on (they take about 50 ms to load).
 */
export async function startTracing(options: TracingOptions): Promise<Tracing> {
  const env = options.env ?? process.env;
  const url = otlpTracesUrl(env);
  if (!url || running) return { enabled: running !== undefined && url !== undefined, shutdown: async () => undefined };
  // Loaded only when tracing is on: the SDK and the exporter take about 50 ms to load.
  const [
    { OTLPTraceExporter },
    { defaultResource, detectResources, envDetector, resourceFromAttributes },
    { BatchSpanProcessor, NodeTracerProvider },
  ] = await Promise.all([
    import('@opentelemetry/exporter-trace-otlp-http'),
    import('@opentelemetry/resources'),
    import('@opentelemetry/sdk-trace-node'),
  ]);
  if (running) return { enabled: true, shutdown: async () => undefined };
  const resource = defaultResource()
    .merge(resourceFromAttributes({ 'service.name': options.serviceName }))
    .merge(detectResources({ detectors: [envDetector] }));
  const provider = new NodeTracerProvider({ resource, spanProcessors: [new BatchSpanProcessor(new OTLPTraceExporter({ url }))] });
  provider.register();
  running = provider;
  setTracingEnabled(true);
  let stopped: Promise<void> | undefined;
  return {
    enabled: true,
    shutdown: () =>
      (stopped ??= provider.shutdown().finally(() => {
        if (running !== provider) return;
        running = undefined;
        setTracingEnabled(false);
        trace.disable();
        context.disable();
        propagation.disable();
      })),
  };
}
