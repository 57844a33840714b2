import { startSwitchProxy } from '@bedrock/testkit/switch-proxy';
import { afterAll, describe, expect, it } from '@jest/globals';
import { createRedisTransport } from '../redis/redis-transport.ts';
import { createHealth } from './health.ts';
import { startMetricsServer } from './metrics-server.ts';
import { createMetrics } from './metrics.ts';
import { createReadiness, postgresCheck, redisCheck, type DependencyCheck } from './readiness.ts';

const until = async (cond: () => Promise<boolean>, ms = 15_000): Promise<void> => {
  const deadline = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > deadline) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 50));
  }
};

describe('createReadiness', () => {
  it('reports each dependency, keeps an outcome for cacheMs and runs one check at a time', async () => {
    let now = 0;
    let calls = 0;
    const failure: { message?: string } = {};
    const dep: DependencyCheck = {
      name: 'store',
      check: async () => {
        calls++;
        if (failure.message) throw new Error(failure.message);
      },
    };
    const readiness = createReadiness({ checks: [dep], cacheMs: 1_000, now: () => now });
    expect(await readiness.check()).toEqual({ store: { status: 'SERVING' } });
    failure.message = 'connection refused';
    now = 500;
    expect(await readiness.check()).toEqual({ store: { status: 'SERVING' } });
    expect(calls).toBe(1);
    now = 1_500;
    expect(await readiness.check()).toEqual({ store: { status: 'NOT_SERVING', reason: 'connection refused' } });
    expect(calls).toBe(2);
  });

  it('answers "timed out" after timeoutMs and never starts a second check while one hangs', async () => {
    let calls = 0;
    let release: (() => void) | undefined;
    const readiness = createReadiness({
      timeoutMs: 50,
      checks: [{ name: 'slow', check: () => (calls++, new Promise<void>((resolve) => (release = resolve))) }],
    });
    expect(await readiness.check()).toEqual({ slow: { status: 'NOT_SERVING', reason: 'timed out after 50 ms' } });
    expect(await readiness.check()).toEqual({ slow: { status: 'NOT_SERVING', reason: 'timed out after 50 ms' } });
    expect(calls).toBe(1);
    release?.();
    expect(await readiness.check()).toEqual({ slow: { status: 'SERVING' } });
  });

  it('postgresCheck reports a pool that cannot query', async () => {
    const readiness = createReadiness({
      checks: [postgresCheck({ query: () => Promise.reject(new Error('connect ECONNREFUSED 127.0.0.1:1')) })],
    });
    expect(await readiness.check()).toEqual({ postgres: { status: 'NOT_SERVING', reason: 'connect ECONNREFUSED 127.0.0.1:1' } });
  });
});

describe('/readyz with dependencies', () => {
  const closers: (() => Promise<void>)[] = [];
  afterAll(async () => {
    for (const close of closers.reverse()) await close();
  });

  it('goes 503 naming Redis while it is unreachable and 200 again when it is back; /healthz stays 200', async () => {
    const proxy = await startSwitchProxy(Number(new URL(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379').port || 6379));
    closers.push(proxy.close);
    const transport = createRedisTransport({
      redisUrl: `redis://127.0.0.1:${proxy.port}`,
      prefix: `readyz-test-${process.pid}`,
      onError: () => undefined,
    });
    closers.push(() => transport.close());
    const health = createHealth();
    const server = await startMetricsServer({
      port: 0,
      host: '127.0.0.1',
      registry: createMetrics('readyz-test').registry,
      health,
      readiness: createReadiness({ checks: [redisCheck(() => transport)], cacheMs: 100, timeoutMs: 500 }),
    });
    closers.push(() => server.close());
    const readyz = async (): Promise<{
      status: number;
      body: { status: string; reason?: string; dependencies?: Record<string, unknown> };
    }> => {
      const res = await fetch(`${server.url}/readyz`);
      return { status: res.status, body: (await res.json()) as never };
    };

    await until(async () => (await readyz()).status === 200);
    expect((await readyz()).body).toMatchObject({ status: 'SERVING', dependencies: { redis: { status: 'SERVING' } } });

    proxy.down();
    await until(async () => (await readyz()).status === 503);
    const down = await readyz();
    expect(down.body.status).toBe('NOT_SERVING');
    expect(down.body.reason).toMatch(/^redis: /);
    expect((await fetch(`${server.url}/healthz`)).status).toBe(200);

    proxy.up();
    await until(async () => (await readyz()).status === 200);

    // Draining the process wins over healthy dependencies.
    health.shutdown();
    const draining = await readyz();
    expect(draining.status).toBe(503);
    expect(draining.body.reason).toMatch(/^process: NOT_SERVING/);
  });
});
