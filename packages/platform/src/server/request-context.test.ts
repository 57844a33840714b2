import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { create } from '@bufbuild/protobuf';
import { Code, ConnectError, createClient } from '@connectrpc/connect';
import type { Client } from '@connectrpc/connect';
import { createGrpcTransport } from '@connectrpc/connect-node';
import { trace } from '@opentelemetry/api';
import { health as pb } from '@bedrock/contracts';
import { startGrpcServer } from './grpc-server.ts';
import type { GrpcServer } from './grpc-server.ts';
import { createLogger } from './logger.ts';
import { REQUEST_ID_HEADER, requestContextInterceptor, requestId, requestLogger, requestTraceContext } from './request-context.ts';
import { installTraceContextPropagation } from './trace-context.ts';

const TRACEPARENT = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';

describe('requestContextInterceptor', () => {
  const lines: Record<string, unknown>[] = [];
  const destination = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const line of chunk.toString().split('\n')) if (line) lines.push(JSON.parse(line) as Record<string, unknown>);
      done();
    },
  });
  const logger = createLogger({ service: 'web-bff', level: 'debug', destination });
  const seen: { id: string; traceId: string | undefined }[] = [];
  let server: GrpcServer;
  let client: Client<typeof pb.Health>;

  beforeAll(async () => {
    installTraceContextPropagation();
    server = await startGrpcServer({
      routes: (router) =>
        router.service(pb.Health, {
          check(req, ctx) {
            seen.push({ id: requestId(ctx), traceId: trace.getSpanContext(requestTraceContext(ctx))?.traceId });
            requestLogger(ctx, logger).info({ service_asked: req.service }, 'checking');
            if (req.service === 'broken') throw new ConnectError('database exploded', Code.Internal);
            if (req.service === 'missing') throw new ConnectError('no such service', Code.NotFound);
            return create(pb.HealthCheckResponseSchema, { status: pb.HealthCheckResponse_ServingStatus.SERVING });
          },
          list: () => create(pb.HealthListResponseSchema),
          async *watch() {
            yield create(pb.HealthCheckResponseSchema);
          },
        }),
      interceptors: [requestContextInterceptor(logger)],
      port: 0,
      host: '127.0.0.1',
      logger,
    });
    client = createClient(pb.Health, createGrpcTransport({ baseUrl: server.url }));
  });
  afterAll(() => server.close(0));

  it('keeps a sane caller request id, extracts the trace and logs with both', async () => {
    let echoed: string | null = null;
    await client.check(
      { service: 'a' },
      { headers: { [REQUEST_ID_HEADER]: 'req-42', traceparent: TRACEPARENT }, onHeader: (h) => (echoed = h.get(REQUEST_ID_HEADER)) },
    );
    expect(echoed).toBe('req-42');
    expect(seen.at(-1)).toEqual({ id: 'req-42', traceId: '4bf92f3577b34da6a3ce929d0e0e4736' });
    const mine = lines.filter((l) => l.request_id === 'req-42');
    expect(mine.map((l) => l.msg)).toEqual(['checking', 'rpc finished']);
    expect(mine[0]).toMatchObject({ service: 'web-bff', service_asked: 'a', trace_id: '4bf92f3577b34da6a3ce929d0e0e4736' });
    expect(mine[1]).toMatchObject({ level: 'debug', method: 'grpc.health.v1.Health/Check', code: 'OK' });
  });

  it('replaces a missing or unsafe request id with a UUID', async () => {
    await client.check({ service: 'b' });
    await client.check({ service: 'c' }, { headers: { [REQUEST_ID_HEADER]: 'x'.repeat(500) } });
    const [a, b] = seen.slice(-2);
    expect(a?.id).toMatch(/^[0-9a-f-]{36}$/);
    expect(b?.id).toMatch(/^[0-9a-f-]{36}$/);
    expect(a?.id).not.toBe(b?.id);
    expect(a?.traceId).toBeUndefined();
  });

  it('logs server faults at error with the cause, client errors at debug', async () => {
    await expect(client.check({ service: 'broken' }, { headers: { [REQUEST_ID_HEADER]: 'req-broken' } })).rejects.toThrow(/database exploded/);
    await expect(client.check({ service: 'missing' }, { headers: { [REQUEST_ID_HEADER]: 'req-missing' } })).rejects.toThrow(/no such service/);
    const broken = lines.find((l) => l.request_id === 'req-broken' && l.msg === 'rpc failed');
    expect(broken).toMatchObject({ level: 'error', code: 'Internal', method: 'grpc.health.v1.Health/Check' });
    const missing = lines.find((l) => l.request_id === 'req-missing' && l.msg === 'rpc finished');
    expect(missing).toMatchObject({ level: 'debug', code: 'NotFound', reason: 'no such service' });
  });

  it('logs a server stream when it ends', async () => {
    for await (const _ of client.watch({}, { headers: { [REQUEST_ID_HEADER]: 'req-watch' } })) {
      // drain
    }
    expect(lines.find((l) => l.request_id === 'req-watch')).toMatchObject({ msg: 'rpc finished', code: 'OK', method: 'grpc.health.v1.Health/Watch' });
  });
});
