import http from 'node:http';
import http2 from 'node:http2';
import type { AddressInfo } from 'node:net';
import type { Socket } from 'node:net';
import { Code, ConnectError } from '@connectrpc/connect';
import type { ConnectRouter, Interceptor } from '@connectrpc/connect';
import { connectNodeAdapter } from '@connectrpc/connect-node';
import type { Logger } from './logger.ts';

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
   * `http1`: HTTP/1.1 for browsers without a proxy; Connect unary and server streams and
   * gRPC-Web work, but gRPC (trailers) and bidi streams do not.
   */
  protocol?: 'h2c' | 'http1';
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
  const handler = connectNodeAdapter({
    routes: options.routes,
    interceptors: options.interceptors ?? [],
    readMaxBytes: options.readMaxBytes ?? 4 * 1024 * 1024,
    shutdownSignal: shutdown.signal,
  });

  const sessions = new Set<http2.ServerHttp2Session>();
  const sockets = new Set<Socket>();
  let server: http.Server | http2.Http2Server;
  if (protocol === 'h2c') {
    const h2 = http2.createServer(handler);
    h2.on('session', (session) => {
      sessions.add(session);
      session.once('close', () => sessions.delete(session));
    });
    server = h2;
  } else {
    const h1 = http.createServer(handler);
    h1.on('connection', (socket) => {
      sockets.add(socket);
      socket.once('close', () => sockets.delete(socket));
    });
    server = h1;
  }

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
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    // GOAWAY: clients stop opening streams on this connection and reconnect elsewhere,
    // while streams already open run to completion.
    for (const session of sessions) session.close();
    if (server instanceof http.Server) server.closeIdleConnections();

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
