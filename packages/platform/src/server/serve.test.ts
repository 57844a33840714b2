import http from 'node:http';
import http2 from 'node:http2';
import net from 'node:net';
import { afterEach, describe, expect, it } from '@jest/globals';
import { ABORT_FLUSH_MS, serve, type Served } from './serve.ts';

const servers: Served[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close(0)));
});

async function started(served: Promise<Served>): Promise<Served> {
  const s = await served;
  servers.push(s);
  return s;
}

const hello = (_req: unknown, res: http.ServerResponse | http2.Http2ServerResponse): void => {
  res.writeHead(200, { 'content-type': 'text/plain' });
  res.end('hello');
};

interface H2Answer {
  readonly status: number;
  readonly body: string;
}

/** One request over a new h2c connection. */
function h2get(url: string, headers: Record<string, string> = {}): Promise<H2Answer> {
  return new Promise((resolve, reject) => {
    const session = http2.connect(url);
    session.on('error', reject);
    const stream = session.request({ ':path': '/', ...headers });
    let status = 0;
    let body = '';
    stream.on('response', (h) => (status = Number(h[':status'])));
    stream.setEncoding('utf8');
    stream.on('data', (chunk: string) => (body += chunk));
    stream.on('error', reject);
    stream.on('end', () => {
      session.close();
      if (status === 0) reject(new Error('the stream ended without an answer'));
      else resolve({ status, body });
    });
    stream.end();
  });
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

/** Opens a TCP connection, writes `data` and resolves with what came back once the server closes it, and after how long. */
function rawUntilClosed(port: number, data: string): Promise<{ text: string; ms: number }> {
  return new Promise((resolve, reject) => {
    const startedAt = Date.now();
    const socket = net.connect(port, '127.0.0.1', () => socket.write(data));
    let text = '';
    socket.setEncoding('latin1');
    socket.on('data', (chunk: string) => (text += chunk));
    socket.on('error', () => undefined);
    socket.on('close', () => resolve({ text, ms: Date.now() - startedAt }));
    setTimeout(() => reject(new Error('the server kept the connection open')), 5000).unref();
  });
}

async function until(check: () => boolean, ms = 5000): Promise<void> {
  for (const t0 = Date.now(); !check(); await new Promise((resolve) => setTimeout(resolve, 5))) {
    if (Date.now() - t0 > ms) throw new Error('condition not met in time');
  }
}

describe('serve', () => {
  it('serves h2c on an ephemeral port and announces its concurrent-stream limit', async () => {
    const s = await started(serve({ protocol: 'h2c', host: '127.0.0.1', port: 0, handler: hello, limits: { maxConcurrentStreams: 77 } }));
    expect(s.port).toBeGreaterThan(0);
    expect(s.url).toBe(`http://127.0.0.1:${s.port}`);
    expect(await h2get(s.url)).toEqual({ status: 200, body: 'hello' });
    const session = http2.connect(s.url);
    await new Promise((resolve) => session.once('remoteSettings', resolve));
    expect(session.remoteSettings.maxConcurrentStreams).toBe(77);
    session.close();
  });

  it('serves HTTP/1.1, and not HTTP/2, with protocol http1', async () => {
    const s = await started(serve({ protocol: 'http1', host: '127.0.0.1', port: 0, handler: hello }));
    const res = await fetch(s.url);
    expect([res.status, await res.text()]).toEqual([200, 'hello']);
    await expect(h2get(s.url)).rejects.toThrow();
  });

  it('rejects a port that is already taken', async () => {
    const s = await started(serve({ protocol: 'h2c', host: '127.0.0.1', port: 0, handler: hello }));
    await expect(serve({ protocol: 'http1', host: '127.0.0.1', port: s.port, handler: hello })).rejects.toThrow(/EADDRINUSE/);
  });

  describe('close', () => {
    for (const protocol of ['h2c', 'http1'] as const) {
      it(`${protocol}: refuses new connections at once, lets a request in flight finish, and resolves when it has`, async () => {
        let handling = 0;
        const slow = (_req: unknown, res: http.ServerResponse | http2.Http2ServerResponse): void => {
          handling++;
          setTimeout(() => hello(undefined, res), 300);
        };
        let graceOver = 0;
        const s = await serve({ protocol, host: '127.0.0.1', port: 0, handler: slow, onGraceOver: () => graceOver++ });
        const inFlight = protocol === 'h2c' ? h2get(s.url) : fetch(s.url).then(async (r) => ({ status: r.status, body: await r.text() }));
        await until(() => handling === 1);
        const t0 = Date.now();
        const closing = s.close(10_000);
        expect(await canConnect(s.port)).toBe(false);
        expect(await inFlight).toEqual({ status: 200, body: 'hello' });
        expect(await closing).toBe(true);
        // As soon as the request drained, not after the grace period.
        expect(Date.now() - t0).toBeLessThan(3000);
        expect(graceOver).toBe(0);
      });
    }

    it('http1: ends a busy keep-alive connection after its response and closes idle ones at once', async () => {
      let release: (() => void) | undefined;
      const s = await serve({
        protocol: 'http1',
        host: '127.0.0.1',
        port: 0,
        handler: (req, res) => {
          if (req.url === '/slow') release = () => hello(req, res);
          else hello(req, res);
        },
      });
      const agent = new http.Agent({ keepAlive: true, maxSockets: 2 });
      const get = (path: string) =>
        new Promise<http.IncomingMessage>((resolve, reject) => {
          http.get(`${s.url}${path}`, { agent }, resolve).on('error', reject);
        });
      const idle = await get('/');
      idle.resume();
      await new Promise((resolve) => idle.once('end', resolve));
      const busy = get('/slow');
      await until(() => release !== undefined);
      const closing = s.close(10_000);
      release!();
      const res = await busy;
      expect(res.headers.connection).toBe('close');
      res.resume();
      expect(await closing).toBe(true);
      agent.destroy();
    });

    for (const protocol of ['h2c', 'http1'] as const) {
      it(`${protocol}: after the grace, calls onGraceOver once and then cuts a request that still hangs`, async () => {
        let handling = 0;
        let graceOver = 0;
        const s = await serve({
          protocol,
          host: '127.0.0.1',
          port: 0,
          handler: () => handling++, // never answers
          onGraceOver: () => graceOver++,
        });
        const stuck = protocol === 'h2c' ? h2get(s.url) : fetch(s.url);
        const failed = stuck.then(
          () => 'answered',
          () => 'cut',
        );
        await until(() => handling === 1);
        const t0 = Date.now();
        expect(await s.close(200)).toBe(false);
        const ms = Date.now() - t0;
        expect(ms).toBeGreaterThanOrEqual(190 + ABORT_FLUSH_MS);
        expect(ms).toBeLessThan(2000);
        expect(graceOver).toBe(1);
        expect(await failed).toBe('cut');
        // A second close is the same close.
        expect(await s.close(0)).toBe(false);
        expect(graceOver).toBe(1);
      });
    }

    it('h2c: a stream that ends when onGraceOver fires gets its answer, without waiting for the flush', async () => {
      let answer: (() => void) | undefined;
      const s = await serve({
        protocol: 'h2c',
        host: '127.0.0.1',
        port: 0,
        handler: (_req, res) => {
          res.writeHead(200);
          res.write('first ');
          answer = () => res.end('last');
        },
        onGraceOver: () => answer?.(),
      });
      const watch = h2get(s.url);
      await until(() => answer !== undefined);
      const t0 = Date.now();
      expect(await s.close(200)).toBe(false);
      expect(Date.now() - t0).toBeLessThan(200 + ABORT_FLUSH_MS);
      expect(await watch).toEqual({ status: 200, body: 'first last' });
    });
  });

  describe('limits', () => {
    it('http1: a request whose headers never finish is answered 408 and disconnected after headersTimeoutMs', async () => {
      const s = await started(serve({ protocol: 'http1', host: '127.0.0.1', port: 0, handler: hello, limits: { headersTimeoutMs: 300 } }));
      const { text, ms } = await rawUntilClosed(s.port, 'GET / HTTP/1.1\r\nHost: x\r\nX-Slow: ');
      expect(text).toMatch(/^HTTP\/1\.1 408/);
      expect(ms).toBeGreaterThanOrEqual(290);
      expect(ms).toBeLessThan(2000);
    });

    it('h2c: a connection that never sends the HTTP/2 preface is disconnected after headersTimeoutMs', async () => {
      const s = await started(serve({ protocol: 'h2c', host: '127.0.0.1', port: 0, handler: hello, limits: { headersTimeoutMs: 300 } }));
      const { ms } = await rawUntilClosed(s.port, 'PRI * HTTP/2.0\r\n');
      expect(ms).toBeGreaterThanOrEqual(290);
      expect(ms).toBeLessThan(2000);
      // A client that speaks in time is served, and stays connected past the timeout.
      const session = http2.connect(s.url);
      await new Promise((resolve) => setTimeout(resolve, 500));
      expect(session.closed || session.destroyed).toBe(false);
      session.close();
    });

    it('refuses headers larger than maxHeaderSize with 431, on both protocols', async () => {
      const limits = { maxHeaderSize: 4096 };
      const h1 = await started(serve({ protocol: 'http1', host: '127.0.0.1', port: 0, handler: hello, limits }));
      const h2 = await started(serve({ protocol: 'h2c', host: '127.0.0.1', port: 0, handler: hello, limits }));
      expect((await fetch(h1.url, { headers: { 'x-big': 'a'.repeat(3000) } })).status).toBe(200);
      expect((await fetch(h1.url, { headers: { 'x-big': 'a'.repeat(5000) } })).status).toBe(431);
      expect((await h2get(h2.url, { 'x-big': 'a'.repeat(3000) })).status).toBe(200);
      expect((await h2get(h2.url, { 'x-big': 'a'.repeat(5000) })).status).toBe(431);
    });

    it('http1: with handleExpectContinue the handler may refuse a request before its body is sent', async () => {
      const s = await started(
        serve({
          protocol: 'http1',
          host: '127.0.0.1',
          port: 0,
          handleExpectContinue: true,
          handler: (_req, res) => {
            res.writeHead(403);
            res.end();
          },
        }),
      );
      const req = http.request(`${s.url}/`, { method: 'POST', headers: { expect: '100-continue', 'content-length': '5' } });
      let continued = false;
      req.on('continue', () => (continued = true));
      const res = await new Promise<http.IncomingMessage>((resolve, reject) => {
        req.on('response', resolve);
        req.on('error', reject);
        req.flushHeaders();
      });
      expect([res.statusCode, continued]).toEqual([403, false]);
      res.resume();
      req.destroy();
    });
  });
});
