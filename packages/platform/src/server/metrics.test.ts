import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { create, fromBinary, toBinary } from '@bufbuild/protobuf';
import { Code, ConnectError, createClient } from '@connectrpc/connect';
import grpc from '@grpc/grpc-js';
import { createGrpcTransport } from '@connectrpc/connect-node';
import { health as pb } from '@bedrock/contracts';
import { startGrpcServer } from './grpc-server.ts';
import type { GrpcServer } from './grpc-server.ts';
import { createHealth, registerHealth } from './health.ts';
import { createLogger } from './logger.ts';
import { METRIC } from './metric-names.ts';
import type { JobOutcome, TokenKind } from './metric-names.ts';
import { startMetricsServer } from './metrics-server.ts';
import type { MetricsServer } from './metrics-server.ts';
import { createMetrics, rpcMetricsInterceptor } from './metrics.ts';

const logger = createLogger({ service: 'test', level: 'silent' });

/** Parses Prometheus text into a lookup by metric name and labels (in any order). */
function samples(text: string): {
  get(name: string, labels: Record<string, string>): number | undefined;
  has(name: string, labels: Record<string, string>): boolean;
} {
  const key = (name: string, labels: Record<string, string>): string =>
    `${name}{${Object.entries(labels)
      .sort(([a], [b]) => a.localeCompare(b))
      .map(([k, v]) => `${k}="${v}"`)
      .join(',')}}`;
  const out = new Map<string, number>();
  for (const line of text.split('\n')) {
    const match = /^(\w+)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!match) continue;
    const labels = Object.fromEntries([...(match[2] ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)].map((m) => [m[1], m[2]]));
    out.set(key(match[1] as string, labels as Record<string, string>), Number(match[3]));
  }
  return { get: (name, labels) => out.get(key(name, labels)), has: (name, labels) => out.has(key(name, labels)) };
}

describe('metrics over HTTP', () => {
  const metrics = createMetrics('tool-runner');
  const health = createHealth({ overall: 'NOT_SERVING' });
  let server: MetricsServer;

  beforeAll(async () => {
    server = await startMetricsServer({ port: 0, host: '127.0.0.1', registry: metrics.registry, health });
  });
  afterAll(() => server.close());

  it('serves the shared families with the service label and process metrics', async () => {
    const outcome: JobOutcome = 'completed';
    const kind: TokenKind = 'cache_read';
    metrics.jobsTotal.inc({ queue: 'tool-exec', outcome });
    metrics.jobsTotal.inc({ queue: 'tool-exec', outcome });
    metrics.queueDepth.set({ queue: 'tool-exec', state: 'waiting' }, 7);
    metrics.llmTokensTotal.inc({ model: 'claude-x', kind }, 120);
    metrics.toolDurationSeconds.observe({ tool: 'bash', outcome: 'ok' }, 0.3);

    const res = await fetch(`${server.url}/metrics`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
    const text = await res.text();
    const s = samples(text);
    expect(s.get(METRIC.jobsTotal, { queue: 'tool-exec', outcome: 'completed', service: 'tool-runner' })).toBe(2);
    expect(s.get(METRIC.queueDepth, { queue: 'tool-exec', state: 'waiting', service: 'tool-runner' })).toBe(7);
    expect(s.get(METRIC.llmTokensTotal, { model: 'claude-x', kind: 'cache_read', service: 'tool-runner' })).toBe(120);
    expect(s.get(`${METRIC.toolDurationSeconds}_bucket`, { le: '0.5', tool: 'bash', outcome: 'ok', service: 'tool-runner' })).toBe(1);
    expect(s.get(`${METRIC.toolDurationSeconds}_bucket`, { le: '0.25', tool: 'bash', outcome: 'ok', service: 'tool-runner' })).toBe(0);
    expect(text).toContain('process_cpu_user_seconds_total{service="tool-runner"}');
    expect(text).toContain(`# TYPE ${METRIC.transitionsTotal} counter`);
  });

  it('/healthz is liveness and /readyz mirrors the health holder', async () => {
    expect((await fetch(`${server.url}/healthz`)).status).toBe(200);
    const notReady = await fetch(`${server.url}/readyz`);
    expect(notReady.status).toBe(503);
    expect(await notReady.json()).toEqual({ service: '', status: 'NOT_SERVING', services: { '': 'NOT_SERVING' } });
    health.set('', 'SERVING');
    health.set('postgres', 'NOT_SERVING');
    expect((await fetch(`${server.url}/readyz`)).status).toBe(200);
    expect((await fetch(`${server.url}/readyz?service=postgres`)).status).toBe(503);
    expect((await fetch(`${server.url}/readyz?service=nope`)).status).toBe(404);
    health.shutdown();
    expect((await fetch(`${server.url}/readyz`)).status).toBe(503);
    expect((await fetch(`${server.url}/healthz`)).status).toBe(200);
  });

  it('answers 404 for other paths and 405 for other methods', async () => {
    expect((await fetch(`${server.url}/`)).status).toBe(404);
    const post = await fetch(`${server.url}/metrics`, { method: 'POST' });
    expect(post.status).toBe(405);
    expect(post.headers.get('allow')).toBe('GET, HEAD');
  });

  it('keeps registries of two services apart', async () => {
    const other = createMetrics('llm-gateway');
    other.jobsTotal.inc({ queue: 'llm-requests', outcome: 'failed' });
    const text = await other.registry.metrics();
    expect(text).toContain('service="llm-gateway"');
    expect(text).not.toContain('tool-exec');
  });
});

describe('rpcMetricsInterceptor', () => {
  const metrics = createMetrics('web-bff');
  const health = createHealth();
  let server: GrpcServer;

  beforeAll(async () => {
    server = await startGrpcServer({
      routes: (r) => registerHealth(r, health),
      interceptors: [rpcMetricsInterceptor(metrics)],
      port: 0,
      host: '127.0.0.1',
      logger,
    });
  });
  afterAll(() => server.close(0));

  it('records unary calls by method and code, and streams when they end', async () => {
    const client = createClient(pb.Health, createGrpcTransport({ baseUrl: server.url }));
    await client.check({});
    await client.check({});
    const err = await client.check({ service: 'nope' }).catch((e: unknown) => ConnectError.from(e));
    expect((err as ConnectError).code).toBe(Code.NotFound);

    // A grpc-js client cancels the watch after the first message (RST_STREAM CANCEL).
    const grpcClient = new grpc.Client(`127.0.0.1:${server.port}`, grpc.credentials.createInsecure());
    const cancelled = await new Promise<grpc.ServiceError>((resolve) => {
      const call = grpcClient.makeServerStreamRequest(
        '/grpc.health.v1.Health/Watch',
        (req: pb.HealthCheckRequest) => Buffer.from(toBinary(pb.HealthCheckRequestSchema, req)),
        (bytes: Buffer) => fromBinary(pb.HealthCheckResponseSchema, bytes),
        create(pb.HealthCheckRequestSchema),
      );
      call.on('data', () => call.cancel());
      call.on('error', resolve);
    });
    grpcClient.close();
    expect(cancelled.code).toBe(grpc.status.CANCELLED);
    // The server sees the cancel asynchronously.
    let s = samples(await metrics.registry.metrics());
    const watchCount = `${METRIC.rpcServerSeconds}_count`;
    const watchLabels = { method: 'grpc.health.v1.Health/Watch', code: 'Canceled', service: 'web-bff' };
    for (let i = 0; i < 50 && !s.has(watchCount, watchLabels); i++) {
      await new Promise((resolve) => setTimeout(resolve, 20));
      s = samples(await metrics.registry.metrics());
    }
    expect(s.get(`${METRIC.rpcServerSeconds}_count`, { method: 'grpc.health.v1.Health/Check', code: 'OK', service: 'web-bff' })).toBe(2);
    expect(s.get(`${METRIC.rpcServerSeconds}_count`, { method: 'grpc.health.v1.Health/Check', code: 'NotFound', service: 'web-bff' })).toBe(
      1,
    );
    expect(s.get(watchCount, watchLabels)).toBe(1);
  });
});
