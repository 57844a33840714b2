import { setMaxListeners } from 'node:events';
import http from 'node:http';
import http2 from 'node:http2';
import type { AddressInfo } from 'node:net';
import net from 'node:net';
import type { Socket } from 'node:net';
import { Code, ConnectError } from '@connectrpc/connect';
import type { ConnectRouter, Interceptor } from '@connectrpc/connect';
import { connectHandler } from './connect-handler.ts';
import type { Logger } from './logger.ts';
import { withMalformedRequestErrors } from './malformed-requests.ts';

/** Options of {@link startGrpcServer}. */
export interface GrpcServerOptions {
  /** Registers the Connect services, e.g. `(router) => { router.service(Svc, impl) }`. */
  routes: (router: ConnectRouter) => void;
  /** Interface to bind. Default `0.0.0.0` (every IPv4 interface; pods are reached by IP). */
  host?: string;
  /** TCP port; `0` picks a free ephemeral port, reported back as `port`. */
  port: number;
  logger: Logger;
  /**
   * `h2c` (default): HTTP/2 without TLS, which gRPC clients speak with prior knowledge
   * (grpc-js insecure, grpc-go, `buf curl --http2-prior-knowledge`) and which carries the
   * Connect and gRPC-Web protocols too, including bidi streams.
   * `http1`: HTTP/1.1 only, for browsers without a proxy; Connect unary and server streams
   * and gRPC-Web work, but gRPC (trailers) and bidi streams do not.
   * `auto`: both on one port, told apart by the HTTP/2 connection preface, so browsers
   * (HTTP/1.1) and gRPC clients (h2c) share the web-bff port.
   */
  protocol?: 'h2c' | 'http1' | 'auto';
  /** Connect interceptors applied to every call (logging, metrics, auth). Default none. */
  interceptors?: Interceptor[];
  /** Largest request message accepted, in bytes. Default 4 MiB, gRPC's usual limit. */
  readMaxBytes?: number;
}

/** A running server. */
export interface GrpcServer {
  /** The port actually bound (the ephemeral one when `0` was asked). */
  readonly port: number;
  /** Base URL for clients in the same host, e.g. `http://127.0.0.1:50051`. */
  readonly url: string;
  /**
   * Stops accepting connections and lets calls in flight finish for up to `graceMs`
   * (default 10000 ms). Calls still running then see their `ctx.signal` aborted with
   * UNAVAILABLE, and the remaining connections are closed. Safe to call twice.
   */
  close(graceMs?: number): Promise<void>;
}

const DEFAULT_GRACE_MS = 10_000;
/** After the grace period, how long aborted handlers get to send their final status. */
const ABORT_FLUSH_MS = 250;

/**
 * Serves Connect routes over the gRPC, Connect and gRPC-Web protocols on one port.
 * Resolves once the socket listens.
 */
export async function startGrpcServer(options: GrpcServerOptions): Promise<GrpcServer> {
  const { logger } = options;
  const host = options.host ?? '0.0.0.0';
  const protocol = options.protocol ?? 'h2c';
  // Aborted when the grace period ends, so long-lived streams (watches) end with a status
  // instead of being cut mid-message.
  const shutdown = new AbortController();
  // connect links every call's context to this signal for as long as the call runs: one
  // listener per call in flight, not a leak (more than 10 concurrent calls is normal load).
  setMaxListeners(0, shutdown.signal);
  const handler = connectHandler({
    logger,
    // A request body that does not parse answers INVALID_ARGUMENT (connect says INTERNAL).
    routes: withMalformedRequestErrors(options.routes),
    interceptors: options.interceptors ?? [],
    readMaxBytes: options.readMaxBytes ?? 4 * 1024 * 1024,
    shutdownSignal: shutdown.signal,
  });

  const sessions = new Set<http2.ServerHttp2Session>();
  const sockets = new Set<Socket>();
  const track = (socket: Socket): void => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  };
  const h2 = protocol === 'http1' ? undefined : http2.createServer(handler);
  let draining = false;
  h2?.on('session', (session) => {
    sessions.add(session);
    session.once('close', () => sessions.delete(session));
    // A connection accepted just before close() whose preface arrives after it.
    if (draining) session.close();
  });
  const h1 = protocol === 'h2c' ? undefined : http.createServer(handler);
  // HTTP/1.1 has no GOAWAY: once draining, answer with `Connection: close` and end each
  // keep-alive connection after its response, so idle clients do not hold the close open.
  h1?.on('request', (req: http.IncomingMessage, res: http.ServerResponse) => {
    if (draining) res.shouldKeepAlive = false;
    res.once('finish', () => {
      if (draining) req.socket.end();
    });
  });
  // The listening server: one of the two, or for `auto` a TCP server that hands each
  // connection to the right one by its first bytes.
  const server: net.Server = h2 && h1 ? net.createServer((socket) => dispatch(socket, h2, h1)) : ((h2 ?? h1) as net.Server);
  server.on('connection', track);

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const port = (server.address() as AddressInfo).port;
  const url = `http://${host === '0.0.0.0' || host === '::' ? '127.0.0.1' : host}:${port}`;
  logger.info({ port, host, protocol }, 'grpc server listening');

  let closing: Promise<void> | undefined;
  async function close(graceMs = DEFAULT_GRACE_MS): Promise<void> {
    const started = Date.now();
    draining = true;
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    // GOAWAY: clients stop opening streams on this connection and reconnect elsewhere,
    // while streams already open run to completion.
    for (const session of sessions) session.close();
    h1?.closeIdleConnections();

    const drained = await raceTimeout(closed, graceMs);
    if (!drained) {
      shutdown.abort(new ConnectError('server is shutting down', Code.Unavailable));
      const flushed = await raceTimeout(closed, ABORT_FLUSH_MS);
      if (!flushed) {
        for (const session of sessions) session.destroy();
        for (const socket of sockets) socket.destroy();
        await closed;
      }
    }
    logger.info({ port, drained, ms: Date.now() - started }, 'grpc server closed');
  }

  return {
    port,
    url,
    close(graceMs) {
      closing ??= close(graceMs);
      return closing;
    },
  };
}

/** Every HTTP/2 connection starts with this preface (RFC 9113 §3.4); no HTTP/1 method is `PRI`. */
const H2_PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n');

/** Reads enough of the first bytes to tell HTTP/2 prior knowledge from HTTP/1.1, then hands over. */
function dispatch(socket: Socket, h2: http2.Http2Server, h1: http.Server): void {
  let head = Buffer.alloc(0);
  const onData = (chunk: Buffer): void => {
    head = Buffer.concat([head, chunk]);
    const n = Math.min(head.length, H2_PREFACE.length);
    const isH2 = head.subarray(0, n).equals(H2_PREFACE.subarray(0, n));
    if (isH2 && head.length < H2_PREFACE.length) return;
    socket.off('data', onData);
    socket.pause();
    socket.unshift(head);
    if (isH2) {
      // The HTTP/2 session reads what is buffered on the next tick, then the handle directly;
      // resuming here would emit the preface to nobody.
      h2.emit('connection', socket);
    } else {
      h1.emit('connection', socket);
      socket.resume();
    }
  };
  socket.on('data', onData);
}

/** Resolves true if `promise` settles within `ms`, false otherwise. */
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
