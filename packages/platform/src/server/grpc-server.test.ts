import { execFileSync } from 'node:child_process';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from '@jest/globals';
import { create } from '@bufbuild/protobuf';
import { Code, ConnectError, createClient } from '@connectrpc/connect';
import { createConnectTransport, createGrpcTransport, createGrpcWebTransport } from '@connectrpc/connect-node';
import { health } from '@bedrock/contracts';
import { startGrpcServer } from './grpc-server.ts';
import type { GrpcServer } from './grpc-server.ts';
import { createLogger } from './logger.ts';

const here = path.dirname(fileURLToPath(import.meta.url));
const ROOT = path.resolve(here, '../../../..');
const logger = createLogger({ service: 'test', level: 'silent' });
const SERVING = health.HealthCheckResponse_ServingStatus.SERVING;
const reply = create(health.HealthCheckResponseSchema, { status: SERVING });

/**
 * A Health implementation whose calls take `delayMs` and whose Watch never ends on its own.
 * `onStarted` runs when a Check reaches its handler, so tests close the server only once
 * the call is really in flight (a call still in the network when GOAWAY is sent is refused).
 */
function slowRoutes(delayMs: number, onStarted: () => void = () => undefined) {
  return (router: Parameters<Parameters<typeof startGrpcServer>[0]['routes']>[0]) => {
    router.service(health.Health, {
      async check() {
        onStarted();
        await new Promise((resolve) => setTimeout(resolve, delayMs));
        return reply;
      },
      list: () => create(health.HealthListResponseSchema),
      async *watch(_req, ctx) {
        yield reply;
        await new Promise((resolve) => ctx.signal.addEventListener('abort', resolve));
        throw ctx.signal.reason;
      },
    });
  };
}

async function until(check: () => boolean, ms = 5000): Promise<void> {
  for (const started = Date.now(); !check(); await new Promise((resolve) => setTimeout(resolve, 5))) {
    if (Date.now() - started > ms) throw new Error('condition not met in time');
  }
}

function canConnect(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

const servers: GrpcServer[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close(0)));
});

describe('startGrpcServer', () => {
  it('binds an ephemeral port and serves gRPC, Connect and gRPC-Web over h2c', async () => {
    const server = await startGrpcServer({ routes: slowRoutes(0), port: 0, host: '127.0.0.1', logger });
    servers.push(server);
    expect(server.port).toBeGreaterThan(0);
    expect(server.url).toBe(`http://127.0.0.1:${server.port}`);
    for (const transport of [
      createGrpcTransport({ baseUrl: server.url }),
      createConnectTransport({ baseUrl: server.url, httpVersion: '2' }),
      createGrpcWebTransport({ baseUrl: server.url, httpVersion: '2' }),
    ]) {
      const res = await createClient(health.Health, transport).check({});
      expect(res.status).toBe(SERVING);
    }
  });

  it('serves Connect over HTTP/1.1 with protocol http1', async () => {
    const server = await startGrpcServer({ routes: slowRoutes(0), port: 0, host: '127.0.0.1', logger, protocol: 'http1' });
    servers.push(server);
    const client = createClient(health.Health, createConnectTransport({ baseUrl: server.url, httpVersion: '1.1' }));
    expect((await client.check({})).status).toBe(SERVING);
    const res = await fetch(`${server.url}/grpc.health.v1.Health/Check`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{}',
    });
    expect(await res.json()).toEqual({ status: 'SERVING' });
  });

  it('rejects a port that is already taken', async () => {
    const first = await startGrpcServer({ routes: slowRoutes(0), port: 0, host: '127.0.0.1', logger });
    servers.push(first);
    await expect(startGrpcServer({ routes: slowRoutes(0), port: first.port, host: '127.0.0.1', logger })).rejects.toThrow(/EADDRINUSE/);
  });

  it('lets in-flight calls finish on close and then refuses connections', async () => {
    let handling = 0;
    const server = await startGrpcServer({ routes: slowRoutes(300, () => handling++), port: 0, host: '127.0.0.1', logger });
    const client = createClient(health.Health, createGrpcTransport({ baseUrl: server.url }));
    const inFlight = client.check({});
    await until(() => handling === 1);
    const started = Date.now();
    await server.close(10_000);
    expect((await inFlight).status).toBe(SERVING);
    // Closed as soon as the call drained, not after the whole grace period.
    expect(Date.now() - started).toBeLessThan(5000);
    expect(await canConnect(server.port)).toBe(false);
  });

  it('aborts streams still open when the grace period ends, with UNAVAILABLE', async () => {
    const server = await startGrpcServer({ routes: slowRoutes(0), port: 0, host: '127.0.0.1', logger });
    const client = createClient(health.Health, createGrpcTransport({ baseUrl: server.url }));
    const stream = client.watch({});
    const received: number[] = [];
    // The catch is attached now: the stream fails while close() is still awaited.
    const consumed = (async () => {
      for await (const res of stream) received.push(res.status);
    })().then(
      () => undefined,
      (e: unknown) => ConnectError.from(e),
    );
    await until(() => received.length === 1);
    expect(received).toEqual([SERVING]);
    const started = Date.now();
    await server.close(300);
    const elapsed = Date.now() - started;
    expect(elapsed).toBeGreaterThanOrEqual(290);
    expect(elapsed).toBeLessThan(5000);
    const err = await consumed;
    expect(err?.code).toBe(Code.Unavailable);
  });

  it('serves many calls at once without a MaxListenersExceededWarning (each call listens on the shutdown signal)', async () => {
    // In a child process: Jest gives test files a copy of `process`, which does not see Node's warnings.
    const out = execFileSync(process.execPath, ['--import', 'tsx', path.join(here, 'testdata', 'many-calls-fixture.ts')], {
      cwd: ROOT,
      encoding: 'utf8',
    });
    const { warnings } = JSON.parse(out.trim().split('\n').at(-1)!) as { warnings: string[] };
    expect(warnings.filter((w) => w.startsWith('MaxListenersExceededWarning'))).toEqual([]);
  }, 30_000);
});
