/**
 * The one HTTP listener of every Bedrock server: the gRPC servers (startGrpcServer), the
 * metrics servers (startMetricsServer) and web-bff's two API listeners. It binds a port,
 * speaks h2c (HTTP/2 without TLS, prior knowledge) or HTTP/1.1, applies limits on what a
 * client may send, and closes gracefully: stop accepting, let requests in flight finish for
 * a grace period, give long streams a moment to end with a status, then cut what remains.
 */
import http from 'node:http';
import http2 from 'node:http2';
import type { AddressInfo, Socket } from 'node:net';

export type Http1Handler = (req: http.IncomingMessage, res: http.ServerResponse) => void;
export type H2cHandler = (req: http2.Http2ServerRequest, res: http2.Http2ServerResponse) => void;

/** What a client may send; every field has a default. */
export interface ServeLimits {
  /**
   * Time a client gets to send a request's headers: HTTP/1.1, from the first byte of a request
   * (Node's `headersTimeout`); h2c, from connecting to its HTTP/2 connection preface. A client
   * still short then is disconnected. Default 60000 ms (Node's HTTP/1.1 default).
   */
  readonly headersTimeoutMs?: number;
  /**
   * HTTP/1.1: time to receive a whole request, headers and body; `0` is none (Node's
   * `requestTimeout`). The response may take as long as it takes (watch streams), this bounds
   * only what the client sends. Default 300000 ms (Node's default). Not applied to h2c.
   */
  readonly requestTimeoutMs?: number;
  /**
   * h2c: streams (calls) a client may have open at once on one connection, announced in
   * SETTINGS. Default 10000: many watch streams share few connections, and a balanced
   * transport sends all of a client's calls over one connection per replica.
   */
  readonly maxConcurrentStreams?: number;
  /**
   * Largest header block of a request, bytes. HTTP/1.1: the request line and headers (Node's
   * `maxHeaderSize`; the client gets 431). h2c: the sum of name + value + 32 per header field
   * (RFC 9113's accounting), announced as SETTINGS_MAX_HEADER_LIST_SIZE and enforced here
   * (Node does not) with 431. Default 16 KiB.
   */
  readonly maxHeaderSize?: number;
}

/** Options of {@link serve}; `handler` is typed by `protocol`. */
export type ServeOptions = ServeCommonOptions &
  ({ readonly protocol: 'http1'; readonly handler: Http1Handler } | { readonly protocol: 'h2c'; readonly handler: H2cHandler });

export interface ServeCommonOptions {
  /** Interface to bind. Default `0.0.0.0` (every IPv4 interface; pods are reached by IP). */
  readonly host?: string;
  /** TCP port; `0` picks a free one, reported back as `port`. */
  readonly port: number;
  readonly limits?: ServeLimits;
  /**
   * Requests sent with `Expect: 100-continue`: by default Node answers `100 Continue` at once
   * and then calls `handler`. `true` hands them to `handler` as they are, which then sends
   * `res.writeContinue()` only to a request it admits (web-bff: a refused caller learns so
   * before sending its body).
   */
  readonly handleExpectContinue?: boolean;
  /**
   * Called once by close() when the grace period ends with requests still in flight, before
   * their connections are cut: abort long-lived streams here (a shutdown signal) so they end
   * with a status instead of mid-message. They get {@link ABORT_FLUSH_MS} to do so.
   */
  readonly onGraceOver?: () => void;
}

/** A listening server. */
export interface Served {
  /** The port actually bound (the ephemeral one when `0` was asked). */
  readonly port: number;
  /** Base URL for clients on the same host, e.g. `http://127.0.0.1:50051`. */
  readonly url: string;
  /**
   * Stops accepting connections (h2c: GOAWAY on every connection; HTTP/1.1: idle keep-alive
   * connections close, busy ones after their response) and resolves once every connection has
   * closed, or after `graceMs` (default 10000) plus {@link ABORT_FLUSH_MS} when `onGraceOver`
   * did not end what was still running, by destroying the rest. Safe to call twice (the first
   * call's grace counts). Resolves `true` when everything finished within the grace.
   */
  close(graceMs?: number): Promise<boolean>;
}

export const DEFAULT_GRACE_MS = 10_000;
/** After the grace period, how long aborted streams get to send their final status. */
export const ABORT_FLUSH_MS = 250;

const DEFAULT_LIMITS: Required<ServeLimits> = {
  headersTimeoutMs: 60_000,
  requestTimeoutMs: 300_000,
  maxConcurrentStreams: 10_000,
  maxHeaderSize: 16 * 1024,
};

/** Binds `host:port` and serves `handler`; resolves once the socket listens, rejects if it cannot bind. */
export async function serve(options: ServeOptions): Promise<Served> {
  const host = options.host ?? '0.0.0.0';
  const limits = { ...DEFAULT_LIMITS };
  for (const [key, value] of Object.entries(options.limits ?? {})) if (value !== undefined) limits[key as keyof ServeLimits] = value;
  const sockets = new Set<Socket>();
  const sessions = new Set<http2.ServerHttp2Session>();
  /** HTTP/1.1 responses in flight, which learn at close() that their connection ends with them. */
  const responses = new Set<http.ServerResponse>();
  let draining = false;
  let server: http.Server | http2.Http2Server;

  if (options.protocol === 'h2c') {
    const handler = options.handler;
    const checked: H2cHandler = (req, res) => {
      if (headerListSize(req.rawHeaders) > limits.maxHeaderSize) {
        res.writeHead(431);
        res.end();
        return;
      }
      handler(req, res);
    };
    const h2 = http2.createServer(
      { settings: { maxConcurrentStreams: limits.maxConcurrentStreams, maxHeaderListSize: limits.maxHeaderSize } },
      checked,
    );
    if (options.handleExpectContinue) h2.on('checkContinue', checked);
    h2.on('session', (session: http2.ServerHttp2Session) => {
      sessions.add(session);
      session.once('close', () => sessions.delete(session));
      // A connection accepted just before close() whose session starts after it.
      if (draining) session.close();
      // The client's preface ends with its SETTINGS frame; a connection that never sends it holds a socket for nothing.
      if (limits.headersTimeoutMs > 0) {
        const timer = setTimeout(() => session.destroy(), limits.headersTimeoutMs);
        timer.unref();
        session.once('remoteSettings', () => clearTimeout(timer));
        session.once('close', () => clearTimeout(timer));
      }
    });
    server = h2;
  } else {
    const requestTimeout = limits.requestTimeoutMs;
    // Node refuses a headers timeout longer than the request timeout.
    const headersTimeout = requestTimeout > 0 ? Math.min(limits.headersTimeoutMs, requestTimeout) : limits.headersTimeoutMs;
    const shortest = Math.min(...[headersTimeout, requestTimeout].filter((ms) => ms > 0), 60_000);
    const h1 = http.createServer(
      {
        maxHeaderSize: limits.maxHeaderSize,
        headersTimeout,
        requestTimeout,
        // How often Node checks the two timeouts (default every 30 s): a fraction of the shorter one.
        connectionsCheckingInterval: Math.max(10, Math.min(30_000, Math.floor(shortest / 4))),
      },
      options.handler,
    );
    if (options.handleExpectContinue) h1.on('checkContinue', options.handler);
    // HTTP/1.1 has no GOAWAY: once draining, answer with `Connection: close` and end each
    // keep-alive connection after its response, so idle clients do not hold the close open.
    h1.on('request', (req: http.IncomingMessage, res: http.ServerResponse) => {
      if (draining) res.shouldKeepAlive = false;
      else responses.add(res);
      res.once('close', () => responses.delete(res));
      res.once('finish', () => {
        if (draining) req.socket.end();
      });
    });
    server = h1;
  }
  server.on('connection', (socket: Socket) => {
    // Stream messages are small writes that must leave at once; Nagle would hold them for an ACK.
    socket.setNoDelay(true);
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  });

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const port = (server.address() as AddressInfo).port;

  async function close(graceMs: number): Promise<boolean> {
    draining = true;
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    // GOAWAY: clients stop opening streams on this connection and reconnect elsewhere,
    // while streams already open run to completion.
    for (const session of sessions) session.close();
    if (server instanceof http.Server) server.closeIdleConnections();
    for (const res of responses) if (!res.headersSent) res.shouldKeepAlive = false;
    if (await raceTimeout(closed, graceMs)) return true;
    options.onGraceOver?.();
    if (await raceTimeout(closed, ABORT_FLUSH_MS)) return false;
    for (const session of sessions) session.destroy();
    for (const socket of sockets) socket.destroy();
    await closed;
    return false;
  }

  let closing: Promise<boolean> | undefined;
  return {
    port,
    url: `http://${host === '0.0.0.0' || host === '::' ? '127.0.0.1' : host}:${port}`,
    close(graceMs = DEFAULT_GRACE_MS) {
      closing ??= close(graceMs);
      return closing;
    },
  };
}

/** HTTP/2's size of a header list (RFC 9113 §6.5.2): name + value + 32 per field. */
function headerListSize(rawHeaders: string[]): number {
  let size = 0;
  for (let i = 0; i < rawHeaders.length; i++) size += rawHeaders[i]!.length + (i % 2 === 0 ? 32 : 0);
  return size;
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
