import { setMaxListeners } from 'node:events';
import { Code, ConnectError } from '@connectrpc/connect';
import type { ConnectRouter, Interceptor } from '@connectrpc/connect';
import { connectHandler } from './connect-handler.ts';
import type { Logger } from './logger.ts';
import { withMalformedRequestErrors } from './malformed-requests.ts';
import { serve, type ServeLimits } from './serve.ts';

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
   * `http1`: HTTP/1.1 only; Connect unary and server streams and gRPC-Web work, but gRPC
   * (trailers) and bidi streams do not.
   */
  protocol?: 'h2c' | 'http1';
  /** Connect interceptors applied to every call (logging, metrics, auth). Default none. */
  interceptors?: Interceptor[];
  /** Largest request message accepted, in bytes. Default 4 MiB, gRPC's usual limit. */
  readMaxBytes?: number;
  /** Header size, timeouts and concurrent streams a client gets; defaults of {@link serve}. */
  limits?: ServeLimits;
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

/**
 * Serves Connect routes over the gRPC, Connect and gRPC-Web protocols on one port, through
 * {@link serve}. Resolves once the socket listens.
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
  const server = await serve({
    protocol,
    host,
    port: options.port,
    handler,
    ...(options.limits ? { limits: options.limits } : {}),
    onGraceOver: () => shutdown.abort(new ConnectError('server is shutting down', Code.Unavailable)),
  });
  const { port, url } = server;
  logger.info({ port, host, protocol }, 'grpc server listening');

  let closing: Promise<void> | undefined;
  async function close(graceMs: number | undefined): Promise<void> {
    const started = Date.now();
    const drained = await server.close(graceMs);
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
