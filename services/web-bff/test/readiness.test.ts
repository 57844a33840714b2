/**
 * web-bff's /readyz reflects what it needs to work: the conversation service (its gRPC
 * health, through the same balanced transport as the API) and, with the redis transport,
 * Redis (the watch streams). Each is taken down behind a TCP proxy: /readyz goes 503 naming
 * it, /healthz stays 200, and both come back.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createHealth, createLogger, registerHealth, startGrpcServer, type GrpcServer } from '@bedrock/platform/server';
import { createWebBff, type WebBff } from '../src/create-web-bff.ts';
import { testBffConfig } from './support/bff-config.ts';
import { startTcpProxy, type TcpProxy } from './support/tcp-proxy.ts';

const logger = createLogger({ service: 'test', level: 'silent' });

async function until(cond: () => Promise<boolean>, ms = 15_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > deadline) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 100));
  }
}

let conversation: GrpcServer;
let conversationProxy: TcpProxy;
let redisProxy: TcpProxy;
let bff: WebBff;
const redisUrl = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';

beforeAll(async () => {
  // A stand-in conversation service that answers health checking only.
  const health = createHealth();
  conversation = await startGrpcServer({ host: '127.0.0.1', port: 0, logger, routes: (router) => registerHealth(router, health) });
  conversationProxy = await startTcpProxy(conversation.port);
  redisProxy = await startTcpProxy(Number(new URL(redisUrl).port || 6379));
  bff = createWebBff(
    testBffConfig({
      server: { shutdownGrace: 100 },
      transport: { kind: 'redis', redis: { url: redisProxy.url.replace('http:', 'redis:') } },
      upstream: { conversationUrls: [conversationProxy.url] },
    }),
    { logger, serviceToken: 'test-token' },
  );
  await bff.start();
});

afterAll(async () => {
  await bff?.stop();
  await conversationProxy?.close();
  await redisProxy?.close();
  await conversation?.close(0);
});

interface Readyz {
  status: number;
  body: { status: string; reason?: string; dependencies: Record<string, { status: string; reason?: string }> };
}
async function readyz(): Promise<Readyz> {
  const res = await fetch(`${bff.metricsUrl}/readyz`);
  return { status: res.status, body: (await res.json()) as Readyz['body'] };
}

describe('web-bff /readyz', () => {
  it('is 200 with both dependencies up', async () => {
    await until(async () => (await readyz()).status === 200);
    expect((await readyz()).body).toMatchObject({
      status: 'SERVING',
      dependencies: { conversation: { status: 'SERVING' }, redis: { status: 'SERVING' } },
    });
  });

  it('is 503 naming the conversation service while it is unreachable, then 200 again', async () => {
    conversationProxy.refuse(true);
    conversationProxy.reset();
    await until(async () => (await readyz()).status === 503);
    const down = await readyz();
    expect(down.body.reason).toMatch(/^conversation: /);
    expect(down.body.dependencies.redis).toEqual({ status: 'SERVING' });
    expect((await fetch(`${bff.metricsUrl}/healthz`)).status).toBe(200);
    conversationProxy.refuse(false);
    await until(async () => (await readyz()).status === 200);
  });

  it('is 503 naming Redis while it is unreachable, then 200 again', async () => {
    redisProxy.refuse(true);
    redisProxy.reset();
    await until(async () => (await readyz()).status === 503);
    const down = await readyz();
    expect(down.body.reason).toMatch(/^redis: /);
    expect(down.body.dependencies.conversation).toEqual({ status: 'SERVING' });
    expect((await fetch(`${bff.metricsUrl}/healthz`)).status).toBe(200);
    redisProxy.refuse(false);
    await until(async () => (await readyz()).status === 200);
  });
});
