import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import { afterEach, describe, expect, it, jest } from '@jest/globals';
import { createClient } from '@connectrpc/connect';
import { createConnectTransport } from '@connectrpc/connect-node';
import { health as pb } from '@bedrock/contracts';
import { connectHandler } from './connect-handler.ts';
import { createHealth, registerHealth } from './health.ts';
import { createLogger } from './logger.ts';

function capture() {
  const lines: Array<Record<string, unknown>> = [];
  const destination = new Writable({
    write(chunk: Buffer, _enc, done) {
      lines.push(JSON.parse(chunk.toString()) as Record<string, unknown>);
      done();
    },
  });
  return { logger: createLogger({ service: 'test', level: 'debug', destination }), lines };
}

const servers: http.Server[] = [];
afterEach(async () => {
  for (const s of servers.splice(0)) {
    s.closeAllConnections();
    await new Promise((r) => s.close(r));
  }
});

async function serve(handler: http.RequestListener): Promise<string> {
  const server = http.createServer(handler);
  servers.push(server);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

describe('connectHandler', () => {
  it('serves routes like connectNodeAdapter', async () => {
    const { logger } = capture();
    const handler = connectHandler({ logger, routes: (r) => registerHealth(r, createHealth()) });
    const url = await serve(handler);
    const client = createClient(pb.Health, createConnectTransport({ baseUrl: url, httpVersion: '1.1' }));
    expect((await client.check({})).status).toBe(pb.HealthCheckResponse_ServingStatus.SERVING);
    const res = await fetch(`${url}/nope`);
    expect(res.status).toBe(404);
  });

  it('logs an answer that could not be written through the logger, never console.error with a stack', async () => {
    const { logger, lines } = capture();
    const consoleError = jest.spyOn(console, 'error').mockImplementation(() => undefined);
    try {
      const handler = connectHandler({ logger, routes: (r) => registerHealth(r, createHealth()) });
      // The response breaks when the answer is written (as a reset stream or a dead socket does).
      const url = await serve((req, res) => {
        const broken = new Proxy(res, {
          get(target, prop) {
            if (prop === 'writeHead') {
              return () => {
                throw new Error('write EPIPE');
              };
            }
            const value = Reflect.get(target, prop, target) as unknown;
            return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
          },
        });
        handler(req, broken);
        setTimeout(() => res.destroy(), 50);
      });
      const client = createClient(pb.Health, createConnectTransport({ baseUrl: url, httpVersion: '1.1' }));
      await client.check({}).catch(() => undefined);
      await new Promise((r) => setTimeout(r, 20));
      expect(consoleError).not.toHaveBeenCalled();
      expect(lines).toContainEqual(
        expect.objectContaining({
          level: 'warn',
          method: 'grpc.health.v1.Health/Check',
          err: '[internal] write EPIPE',
          msg: 'the answer of a call could not be written (the client reset or left)',
        }),
      );
    } finally {
      consoleError.mockRestore();
    }
  });
});
