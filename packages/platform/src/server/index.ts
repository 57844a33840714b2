/**
 * Server plumbing shared by every Bedrock service: one HTTP listener (serve) under the
 * gRPC/Connect server, the metrics server and web-bff's listeners, health checking,
 * reflection, Prometheus metrics, structured logs, tracing on
 * OpenTelemetry (RPC and queue spans, trace context in queue payloads) and graceful shutdown.
 * See docs/observability.md and docs/configuration.md.
 */
export * from './serve.ts';
export * from './serve-service.ts';
export * from './grpc-server.ts';
export * from './connect-handler.ts';
export * from './malformed-requests.ts';
export * from './health.ts';
export * from './logger.ts';
export * from './reflection.ts';
export * from './metric-names.ts';
export * from './metrics.ts';
export * from './metrics-server.ts';
export * from './readiness.ts';
export * from './tracing.ts';
export * from './spans.ts';
export * from './rpc-tracing.ts';
export * from './shutdown.ts';
export * from './process-errors.ts';
export * from './queue-depth-sampler.ts';
export * from './job-metrics.ts';
export * from './token-entries.ts';
export * from './service-auth.ts';
export * from './balanced-transport.ts';
export * from './guarded-session.ts';
export * from './free-port.ts';
export * from './secret-box.ts';
