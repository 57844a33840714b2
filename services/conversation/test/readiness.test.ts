/**
 * The conversation service's /readyz reflects Postgres and Redis: each is taken down behind a
 * TCP proxy (connections reset, new ones refused), /readyz goes 503 naming it while /healthz
 * stays 200, and both come back when the dependency does.
 */
import pg from 'pg';
import { startSwitchProxy } from '@bedrock/testkit/switch-proxy';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createRedisTransport, type Transport } from '@bedrock/platform';
import { createLogger } from '@bedrock/platform/server';
import { createTestDatabase, type TestDatabase } from '@bedrock/testkit/database';
import { readConversationConfig } from '../src/config.ts';
import { createConversationService, type ConversationServiceInstance } from '../src/create-conversation-service.ts';

const REDIS_URL = process.env.REDIS_URL || 'redis://127.0.0.1:6379';

async function until(cond: () => Promise<boolean>, ms = 20_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > deadline) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 100));
  }
}

let db: TestDatabase;
let pgProxy: Awaited<ReturnType<typeof startSwitchProxy>>;
let redisProxy: Awaited<ReturnType<typeof startSwitchProxy>>;
let pool: pg.Pool;
let transport: Transport;
let service: ConversationServiceInstance;

beforeAll(async () => {
  db = await createTestDatabase('readyz');
  const dbUrl = new URL(db.url);
  pgProxy = await startSwitchProxy(Number(dbUrl.port || 5432), dbUrl.hostname);
  const redisUrl = new URL(REDIS_URL);
  redisProxy = await startSwitchProxy(Number(redisUrl.port || 6379), redisUrl.hostname);
  const proxiedDb = new URL(db.url);
  proxiedDb.hostname = '127.0.0.1';
  proxiedDb.port = String(pgProxy.port);
  pool = new pg.Pool({ connectionString: proxiedDb.toString(), max: 4 });
  pool.on('error', () => undefined);
  transport = createRedisTransport({
    redisUrl: `redis://127.0.0.1:${redisProxy.port}`,
    prefix: `test-readyz-${process.pid}`,
    onError: () => undefined,
  });
  const config = readConversationConfig(
    {},
    {
      log: { level: 'silent' },
      server: { grpcPort: 0, metricsPort: 0, host: '127.0.0.1', shutdownGrace: 500 },
      database: { url: proxiedDb.toString() },
      recovery: { interval: 3_600_000 },
    },
  );
  service = createConversationService(config, {
    pool,
    transport,
    servicePeers: [],
    logger: createLogger({ service: 'test', level: 'silent' }),
  });
  await service.start();
}, 60_000);

afterAll(async () => {
  pgProxy?.up();
  redisProxy?.up();
  await service?.stop();
  await transport?.close();
  await pool?.end();
  await pgProxy?.close();
  await redisProxy?.close();
  await db?.drop();
}, 30_000);

interface Readyz {
  status: number;
  body: { status: string; reason?: string; dependencies: Record<string, { status: string; reason?: string }> };
}
async function readyz(): Promise<Readyz> {
  const res = await fetch(`${service.metricsUrl}/readyz`);
  return { status: res.status, body: (await res.json()) as Readyz['body'] };
}

describe('conversation /readyz', () => {
  it('is 200 with Postgres and Redis up', async () => {
    await until(async () => (await readyz()).status === 200);
    expect((await readyz()).body.dependencies).toEqual({ postgres: { status: 'SERVING' }, redis: { status: 'SERVING' } });
  });

  for (const [name, proxy] of [
    ['postgres', () => pgProxy],
    ['redis', () => redisProxy],
  ] as const) {
    it(`is 503 naming ${name} while it is unreachable, then 200 again; /healthz stays 200`, async () => {
      proxy().down();
      await until(async () => (await readyz()).status === 503);
      const down = await readyz();
      expect(down.body.reason).toMatch(new RegExp(`^${name}: `));
      expect((await fetch(`${service.metricsUrl}/healthz`)).status).toBe(200);
      proxy().up();
      await until(async () => (await readyz()).status === 200);
    }, 40_000);
  }
});
