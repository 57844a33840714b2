import http2 from 'node:http2';
import net, { type AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from '@jest/globals';
import { Code, ConnectError, createClient } from '@connectrpc/connect';
import { health as pb } from '@bedrock/contracts';
import { createBalancedTransport, classifyCallFailure, type BalancedTransport } from './balanced-transport.ts';
import { startGrpcServer, type GrpcServer } from './grpc-server.ts';
import { createLogger } from './logger.ts';

const logger = createLogger({ service: 'test', level: 'silent' });
const SERVING = pb.HealthCheckResponse_ServingStatus.SERVING;

interface Replica {
  readonly server: GrpcServer;
  readonly calls: { n: number };
}

async function replica(port = 0): Promise<Replica> {
  const calls = { n: 0 };
  const server = await startGrpcServer({
    port,
    host: '127.0.0.1',
    logger,
    routes: (router) =>
      router.service(pb.Health, {
        check: (req) => {
          calls.n++;
          if (req.service === 'fail') throw new ConnectError('no such service', Code.NotFound);
          return { status: SERVING };
        },
      }),
  });
  return { server, calls };
}

/** An h2c server that takes each request and then drops the connection: the call reached it and broke. */
async function breaking(): Promise<{ url: string; hits: { n: number }; close(): Promise<void> }> {
  const hits = { n: 0 };
  const server = http2.createServer();
  server.on('stream', (stream) => {
    hits.n++;
    stream.session?.destroy();
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;
  return { url: `http://127.0.0.1:${port}`, hits, close: () => new Promise<void>((r) => server.close(() => r())) };
}

/** A port nothing listens on. */
function freePortForTest(): Promise<number> {
  return new Promise((resolve) => {
    const s = net.createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address() as AddressInfo;
      s.close(() => resolve(port));
    });
  });
}

const cleanup: Array<() => unknown> = [];
afterEach(async () => {
  while (cleanup.length > 0) await cleanup.pop()!();
});

function balanced(options: Parameters<typeof createBalancedTransport>[0]): BalancedTransport {
  const t = createBalancedTransport(options);
  cleanup.push(() => t.close());
  return t;
}

describe('createBalancedTransport', () => {
  it('spreads calls over every replica, round robin', async () => {
    const a = await replica();
    const b = await replica();
    cleanup.push(
      () => a.server.close(0),
      () => b.server.close(0),
    );
    const t = balanced({ name: 'test', targets: [a.server.url, b.server.url], logger });
    const client = createClient(pb.Health, t);
    for (let i = 0; i < 10; i++) expect((await client.check({})).status).toBe(SERVING);
    expect([a.calls.n, b.calls.n]).toEqual([5, 5]);
    expect(t.endpoints().map((e) => e.up)).toEqual([true, true]);
  });

  it('moves off a replica that stopped at once: no call fails, the dead one is marked down', async () => {
    const a = await replica();
    const b = await replica();
    cleanup.push(() => b.server.close(0));
    const t = balanced({ name: 'test', targets: [a.server.url, b.server.url], logger });
    const client = createClient(pb.Health, t);
    await client.check({});
    await client.check({});
    await a.server.close(0);
    const before = b.calls.n;
    // Check is neither read-only nor idempotent as declared: it is retried because it never reached the dead replica.
    for (let i = 0; i < 6; i++) expect((await client.check({})).status).toBe(SERVING);
    expect(b.calls.n - before).toBe(6);
    expect(t.endpoints().find((e) => e.address === a.server.url)?.up).toBe(false);
  });

  it('comes back to a replica once it answers again', async () => {
    const a = await replica();
    const port = Number(new URL(a.server.url).port);
    const b = await replica();
    cleanup.push(() => b.server.close(0));
    const t = balanced({ name: 'test', targets: [a.server.url, b.server.url], logger, downMs: 50, maxDownMs: 50 });
    const client = createClient(pb.Health, t);
    await a.server.close(0);
    for (let i = 0; i < 4; i++) await client.check({});
    const again = await replica(port);
    cleanup.push(() => again.server.close(0));
    await new Promise((r) => setTimeout(r, 80));
    for (let i = 0; i < 6; i++) await client.check({});
    expect(again.calls.n).toBeGreaterThanOrEqual(2);
    expect(t.endpoints().every((e) => e.up)).toBe(true);
  });

  it('a call that reached a replica and broke is retried elsewhere only when it is safe to repeat', async () => {
    const bad = await breaking();
    const good = await replica();
    cleanup.push(
      () => bad.close(),
      () => good.server.close(0),
    );
    const unsafe = createClient(pb.Health, balanced({ name: 'test', targets: [bad.url, good.server.url], logger }));
    const err = await unsafe.check({}).then(
      () => undefined,
      (e: unknown) => ConnectError.from(e),
    );
    expect(bad.hits.n).toBe(1);
    expect(err?.code).toBe(Code.Unavailable);
    expect(err?.rawMessage).toMatch(/^test replica http:\/\/127\.0\.0\.1:\d+ is unreachable/);
    expect(good.calls.n).toBe(0);

    const safe = createClient(
      pb.Health,
      balanced({
        name: 'test',
        targets: [bad.url, good.server.url],
        logger,
        retrySafe: (m, input) => m.name === 'Check' && !(input as { service?: string }).service,
      }),
    );
    expect((await safe.check({})).status).toBe(SERVING);
    expect(bad.hits.n).toBe(2);
    expect(good.calls.n).toBe(1);
  });

  it("passes the service's own answers on untouched and keeps the replica", async () => {
    const a = await replica();
    cleanup.push(() => a.server.close(0));
    const t = balanced({ name: 'test', targets: [a.server.url], logger });
    const err = await createClient(pb.Health, t)
      .check({ service: 'fail' })
      .catch((e: unknown) => ConnectError.from(e));
    expect([(err as ConnectError).code, (err as ConnectError).rawMessage]).toEqual([Code.NotFound, 'no such service']);
    expect(t.endpoints()[0]?.up).toBe(true);
  });

  it('with every replica gone, answers UNAVAILABLE naming the replica', async () => {
    const port = await freePortForTest();
    const t = balanced({ name: 'test', targets: [`http://127.0.0.1:${port}`], logger });
    const err = await createClient(pb.Health, t)
      .check({})
      .catch((e: unknown) => ConnectError.from(e));
    expect((err as ConnectError).code).toBe(Code.Unavailable);
    expect((err as ConnectError).rawMessage).toContain(`test replica http://127.0.0.1:${port} is unreachable`);
  });

  it('resolves a host name to every address and follows changes', async () => {
    const a = await replica();
    const b = await replica();
    cleanup.push(
      () => a.server.close(0),
      () => b.server.close(0),
    );
    // Both replicas on one port would need two addresses; here the name resolves to loopback
    // addresses, one of them serving.
    const port = Number(new URL(a.server.url).port);
    let answer = ['127.0.0.1'];
    const t = balanced({
      name: 'test',
      targets: [`http://replicas.test:${port}`],
      logger,
      lookup: async () => answer,
      resolveIntervalMs: 0,
    });
    const client = createClient(pb.Health, t);
    await client.check({});
    expect(t.endpoints().map((e) => e.address)).toEqual([`http://127.0.0.1:${port}`]);
    answer = ['127.0.0.1', '127.0.0.2'];
    await t.refresh();
    expect(
      t
        .endpoints()
        .map((e) => e.address)
        .sort(),
    ).toEqual([`http://127.0.0.1:${port}`, `http://127.0.0.2:${port}`]);
    // 127.0.0.2 has nothing on that port: calls still all succeed, through 127.0.0.1.
    for (let i = 0; i < 4; i++) await client.check({});
    expect(a.calls.n).toBe(5);
    answer = [];
    await t.refresh();
    expect(t.endpoints()).toEqual([]);
    const err = await client.check({}).catch((e: unknown) => ConnectError.from(e));
    expect((err as ConnectError).code).toBe(Code.Unavailable);
  });

  it('keeps the known replicas when resolution fails', async () => {
    const a = await replica();
    cleanup.push(() => a.server.close(0));
    const port = Number(new URL(a.server.url).port);
    let fail = false;
    const t = balanced({
      name: 'test',
      targets: [`http://replicas.test:${port}`],
      logger,
      resolveIntervalMs: 0,
      lookup: async () => {
        if (fail) throw Object.assign(new Error('getaddrinfo EAI_AGAIN replicas.test'), { code: 'EAI_AGAIN' });
        return ['127.0.0.1'];
      },
    });
    await createClient(pb.Health, t).check({});
    fail = true;
    await t.refresh();
    expect(t.endpoints().map((e) => e.address)).toEqual([`http://127.0.0.1:${port}`]);
    expect((await createClient(pb.Health, t).check({})).status).toBe(SERVING);
  });
});

describe('classifyCallFailure', () => {
  it('tells calls that never left from broken ones and answers', () => {
    const refused = new ConnectError(
      'connect ECONNREFUSED',
      Code.Unavailable,
      undefined,
      undefined,
      Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:1'), { code: 'ECONNREFUSED', syscall: 'connect' }),
    );
    expect(classifyCallFailure(refused)).toBe('not-sent');
    expect(classifyCallFailure(new ConnectError('http/2 stream closed with error code REFUSED_STREAM (0x7)', Code.Unavailable))).toBe(
      'not-sent',
    );
    const reset = new ConnectError(
      'read ECONNRESET',
      Code.Aborted,
      undefined,
      undefined,
      Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' }),
    );
    expect(classifyCallFailure(reset)).toBe('broken');
    expect(classifyCallFailure(new ConnectError('busy', Code.FailedPrecondition))).toBe('answered');
    expect(classifyCallFailure(new ConnectError('the operation timed out', Code.DeadlineExceeded))).toBe('timeout');
  });
});
