/**
 * One listening socket, HTTP/1.1 or h2c, with graceful close: stop accepting, let calls
 * finish for a grace period, then abort the rest (watch streams end with UNAVAILABLE through
 * the adapter's shutdown signal) and close what remains.
 */
import http from 'node:http';
import http2 from 'node:http2';
import type { AddressInfo, Socket } from 'node:net';
import type { NodeHandler } from './cors.ts';

export interface Listener {
  readonly port: number;
  /** e.g. http://127.0.0.1:8080 */
  readonly url: string;
  close(graceMs: number, onGraceOver: () => void): Promise<void>;
}

/** After the grace period, how long aborted streams get to send their final status, ms. */
const ABORT_FLUSH_MS = 250;

export async function listen(protocol: 'http1' | 'h2c', host: string, port: number, handler: NodeHandler): Promise<Listener> {
  const sessions = new Set<http2.ServerHttp2Session>();
  const sockets = new Set<Socket>();
  let server: http.Server | http2.Http2Server;
  if (protocol === 'h2c') {
    // Many watch streams share few connections: do not cap concurrent streams per connection low.
    const h2 = http2.createServer({ settings: { maxConcurrentStreams: 10_000 } }, handler);
    h2.on('session', (session) => {
      sessions.add(session);
      session.once('close', () => sessions.delete(session));
    });
    server = h2;
  } else {
    const h1 = http.createServer(handler);
    // Watch streams are long-lived; Node's default 5-minute request timeout would cut them.
    h1.requestTimeout = 0;
    server = h1;
  }
  // `Expect: 100-continue` goes to the handler, which sends 100 Continue only to a request it
  // admits (a refused caller learns so before sending its body).
  server.on('checkContinue', handler);
  server.on('connection', (socket: Socket) => {
    // Watch events are small writes that must leave at once; Nagle would hold them for an ACK.
    socket.setNoDelay(true);
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const bound = (server.address() as AddressInfo).port;
  const shownHost = host === '0.0.0.0' || host === '::' ? '127.0.0.1' : host;
  let closing: Promise<void> | undefined;

  async function close(graceMs: number, onGraceOver: () => void): Promise<void> {
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    for (const session of sessions) session.close();
    if (server instanceof http.Server) server.closeIdleConnections();
    if (await raceTimeout(closed, graceMs)) return;
    onGraceOver();
    if (await raceTimeout(closed, ABORT_FLUSH_MS)) return;
    for (const session of sessions) session.destroy();
    for (const socket of sockets) socket.destroy();
    await closed;
  }

  return {
    port: bound,
    url: `http://${shownHost}:${bound}`,
    close(graceMs, onGraceOver) {
      closing ??= close(graceMs, onGraceOver);
      return closing;
    },
  };
}

async function raceTimeout(promise: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<boolean>((resolve) => {
    timer = setTimeout(() => resolve(false), ms);
  });
  try {
    return await Promise.race([promise.then(() => true), timeout]);
  } finally {
    clearTimeout(timer);
  }
}
