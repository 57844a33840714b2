import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Code, ConnectError, createClient } from '@connectrpc/connect';
import type { Client } from '@connectrpc/connect';
import { createGrpcTransport } from '@connectrpc/connect-node';
import { health as pb } from '@bedrock/contracts';
import { startGrpcServer } from './grpc-server.ts';
import type { GrpcServer } from './grpc-server.ts';
import { createHealth, registerHealth } from './health.ts';
import { createLogger } from './logger.ts';

const S = pb.HealthCheckResponse_ServingStatus;
const logger = createLogger({ service: 'test', level: 'silent' });

describe('createHealth', () => {
  it('starts with the overall status SERVING and notifies only on change', () => {
    const h = createHealth();
    expect(h.get('')).toBe('SERVING');
    expect(h.get('x')).toBeUndefined();
    const seen: string[] = [];
    const stop = h.watch('x', (s) => seen.push(s));
    h.set('x', 'SERVING');
    h.set('x', 'SERVING');
    h.set('x', 'NOT_SERVING');
    stop();
    h.set('x', 'SERVING');
    expect(seen).toEqual(['SERVING', 'NOT_SERVING']);
    expect(h.list()).toEqual({ '': 'SERVING', x: 'SERVING' });
  });

  it('shutdown marks everything NOT_SERVING and freezes it', () => {
    const h = createHealth({ overall: 'SERVING' });
    h.set('db', 'SERVING');
    h.shutdown();
    h.set('db', 'SERVING');
    expect(h.list()).toEqual({ '': 'NOT_SERVING', db: 'NOT_SERVING' });
  });
});

describe('registerHealth over gRPC', () => {
  const h = createHealth({ overall: 'NOT_SERVING' });
  let server: GrpcServer;
  let client: Client<typeof pb.Health>;

  beforeAll(async () => {
    h.set('bedrock.v1.ConversationService', 'SERVING');
    server = await startGrpcServer({ routes: (r) => registerHealth(r, h), port: 0, host: '127.0.0.1', logger });
    client = createClient(pb.Health, createGrpcTransport({ baseUrl: server.url }));
  });
  afterAll(() => server.close(0));

  it('Check answers the overall and per-service status', async () => {
    expect((await client.check({ service: '' })).status).toBe(S.NOT_SERVING);
    expect((await client.check({ service: 'bedrock.v1.ConversationService' })).status).toBe(S.SERVING);
  });

  it('Check on an unknown service fails with NOT_FOUND', async () => {
    const err = await client.check({ service: 'nope' }).catch((e: unknown) => ConnectError.from(e));
    expect(err).toBeInstanceOf(ConnectError);
    expect((err as ConnectError).code).toBe(Code.NotFound);
  });

  it('List returns every status', async () => {
    const res = await client.list({});
    const statuses = Object.fromEntries(Object.entries(res.statuses).map(([k, v]) => [k, v.status]));
    expect(statuses).toEqual({ '': S.NOT_SERVING, 'bedrock.v1.ConversationService': S.SERVING });
  });

  it('Watch sends the current status, then every change, and SERVICE_UNKNOWN for unknown names', async () => {
    const abort = new AbortController();
    const received: pb.HealthCheckResponse_ServingStatus[] = [];
    const iterator = client.watch({ service: 'queue' }, { signal: abort.signal })[Symbol.asyncIterator]();
    const next = async (): Promise<void> => {
      const r = await iterator.next();
      if (!r.done) received.push(r.value.status);
    };
    await next();
    h.set('queue', 'SERVING');
    await next();
    h.set('queue', 'NOT_SERVING');
    h.set('queue', 'SERVING');
    await next();
    await next();
    expect(received).toEqual([S.SERVICE_UNKNOWN, S.SERVING, S.NOT_SERVING, S.SERVING]);
    abort.abort();
    await iterator.return?.();
  });
});
