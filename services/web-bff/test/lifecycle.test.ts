/**
 * createWebBff(config, deps) builds web-bff without opening anything; start() opens its
 * listeners (the URLs exist from then on), stop() closes them. A start that fails (a port in
 * use) rejects and leaves nothing open.
 */
import { createServer, type Server } from 'node:net';
import { afterAll, describe, expect, it } from '@jest/globals';
import { createLogger } from '@bedrock/platform/server';
import { createWebBff } from '../src/create-web-bff.ts';
import { testBffConfig } from './support/bff-config.ts';

const logger = createLogger({ service: 'web-bff', level: 'silent' });
// Nothing listens there; these tests make no calls.
function listenOn(port: number): Promise<Server> {
  const server = createServer();
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => resolve(server));
  });
}
const portOf = (server: Server): number => (server.address() as { port: number }).port;
const config = (more: Parameters<typeof testBffConfig>[0] = {}) =>
  testBffConfig({ ...more, upstream: { conversationUrls: ['http://127.0.0.1:9'] } });

describe('createWebBff', () => {
  let blocker: Server | undefined;
  afterAll(() => {
    blocker?.close();
  });

  it('opens nothing until start(); its URLs exist from then on; stop() closes it', async () => {
    const bff = createWebBff(config(), { logger, serviceToken: 't' });
    expect(() => bff.httpUrl).toThrow('web-bff not started');
    expect(() => bff.grpcUrl).toThrow('web-bff not started');
    await bff.start();
    expect(bff.httpUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(bff.grpcUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    const healthz = await fetch(`${bff.metricsUrl}/healthz`);
    expect(healthz.status).toBe(200);
    const metricsUrl = bff.metricsUrl;
    await bff.stop();
    await expect(fetch(`${metricsUrl}/healthz`)).rejects.toThrow();
    await expect(bff.start()).rejects.toThrow('web-bff was stopped');
  });

  it('stop() before start() is a no-op', async () => {
    await expect(createWebBff(config(), { logger, serviceToken: 't' }).stop()).resolves.toBeUndefined();
  });

  it('a start that fails rejects and leaves no listener open', async () => {
    blocker = await listenOn(0);
    const taken = portOf(blocker);
    const free = await listenOn(0);
    const httpPort = portOf(free);
    await new Promise((resolve) => free.close(resolve));
    // The HTTP/1.1 port opens, the h2c one is taken: the first listener must be closed again.
    const bff = createWebBff(config({ server: { httpPort, grpcPort: taken } }), { logger, serviceToken: 't' });
    await expect(bff.start()).rejects.toThrow(/EADDRINUSE/);
    expect(() => bff.httpUrl).toThrow('web-bff not started');
    const again = await listenOn(httpPort);
    await new Promise((resolve) => again.close(resolve));
    await bff.stop();
  });
});
