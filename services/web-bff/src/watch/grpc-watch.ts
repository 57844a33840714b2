/**
 * WatchConversation over gRPC with the binary codec on HTTP/2 (`application/grpc` or
 * `application/grpc+proto`: gRPC clients and the CLI), served without connect, whose per-stream
 * pipeline costs heap and CPU per delivery (docs/web-bff.md, "Watch streams" and "Scaling"). Here a
 * watch is its HTTP/2 stream, one {@link serveWatch} generator and the frames it writes: the same
 * bytes for every watcher of an event (SharedEvent.grpcFrame).
 */
import http2 from 'node:http2';
import { fromBinary } from '@bufbuild/protobuf';
import { Code, ConnectError } from '@connectrpc/connect';
import { setTrailerStatus } from '@connectrpc/connect/protocol-grpc';
import { ConversationService, WatchConversationRequestSchema } from '@bedrock/contracts';
import type { NodeHandler, NodeServerRequest, NodeServerResponse } from '../http/node-types.ts';
import type { ShutdownSignal } from '../http/shutdown-signal.ts';
import { admittedIdentity, type AuthOutcome } from '../http/api-guard.ts';
import { serveWatch, type LiveWriter, type WatchCall, type WatchDeps } from './watcher.ts';

export const WATCH_PATH = `/${ConversationService.typeName}/${ConversationService.method.watchConversation.name}`;

export interface GrpcWatchOptions {
  /** What serves watches (set once the routes are registered). */
  readonly deps: () => WatchDeps | undefined;
  readonly authenticate: (authorization: string | undefined) => AuthOutcome | Promise<AuthOutcome>;
  readonly shutdown: ShutdownSignal;
  /** Records a finished call: its code name (e.g. 'OK', 'Canceled') and duration. */
  readonly observe: (code: string, seconds: number) => void;
  /** Largest request message, bytes. */
  readonly readMaxBytes: number;
}

const GRPC_TYPES = new Set(['application/grpc', 'application/grpc+proto']);

function isHttp2(req: NodeServerRequest): req is http2.Http2ServerRequest {
  return 'stream' in req && req.stream !== undefined;
}

/**
 * Serves binary gRPC watches itself and hands every other request to `next`, connect: other
 * codecs (Connect, gRPC-Web, JSON), compressed requests, calls with a deadline (`grpc-timeout`),
 * HTTP/1.1, and calls that the API guard in front did not authenticate.
 */
export function grpcWatchFastPath(options: GrpcWatchOptions, next: NodeHandler): NodeHandler {
  return (req, res) => {
    const deps = options.deps();
    if (
      !deps ||
      !isHttp2(req) ||
      req.method !== 'POST' ||
      req.url !== WATCH_PATH ||
      !GRPC_TYPES.has(String(req.headers['content-type'])) ||
      req.headers['grpc-timeout'] !== undefined ||
      (req.headers['grpc-encoding'] !== undefined && req.headers['grpc-encoding'] !== 'identity')
    ) {
      next(req, res);
      return;
    }
    const header = req.headers.authorization;
    const go = (auth: AuthOutcome) => {
      if ('error' in auth) next(req, res);
      else void serve(req, res as http2.Http2ServerResponse, auth.user, deps, options);
    };
    // Normally the guard in front has authenticated the call already.
    const auth = admittedIdentity(req) ?? options.authenticate(Array.isArray(header) ? header[0] : header);
    if (auth instanceof Promise) auth.then(go, () => next(req, res));
    else go(auth);
  };
}

/**
 * The gRPC protocol as connect speaks it, for this one method: response headers with the first
 * message (or trailers-only when the call fails first), length-prefixed messages, then
 * `grpc-status`, `grpc-message` (percent-encoded), `grpc-status-details-bin` (the error's details,
 * e.g. a Rejection) and the error's metadata as trailers. Metrics, the shutdown signal
 * (UNAVAILABLE naming the resume) and the stall watchdog behave as for connect's watches.
 */
async function serve(
  req: http2.Http2ServerRequest,
  res: http2.Http2ServerResponse,
  user: string,
  deps: WatchDeps,
  options: GrpcWatchOptions,
): Promise<void> {
  const started = performance.now();
  const controller = new AbortController();
  const onShutdown = () => controller.abort(options.shutdown.reason);
  const onClose = () => controller.abort(new ConnectError('the client closed the stream', Code.Canceled));
  options.shutdown.addEventListener('abort', onShutdown);
  res.once('close', onClose);
  let headersSent = false;
  /** The metrics code: Canceled unless a status reaches the client. */
  let outcome = 'Canceled';
  let error: ConnectError | undefined;
  try {
    if (options.shutdown.aborted) throw ConnectError.from(options.shutdown.reason);
    const request = parseRequest(await readBody(req, options.readMaxBytes));
    const call: WatchCall = {
      user,
      signal: controller.signal,
      requestHeader: () => requestHeaders(req),
      reset: () => {
        if (!req.stream.destroyed) req.stream.close(http2.constants.NGHTTP2_CANCEL);
        controller.abort(new ConnectError('watch stream reset: the client stopped reading', Code.Aborted));
      },
    };
    const sendHeaders = () => {
      if (headersSent) return;
      res.writeHead(200, { 'content-type': 'application/grpc+proto' });
      headersSent = true;
    };
    // Caught up, the watcher gets new events written straight from its conversation's tail.
    const live: LiveWriter = {
      write(chunk) {
        if (req.stream.destroyed || res.writableEnded) return false;
        sendHeaders();
        return res.write(chunk);
      },
      drained: () => (req.stream.writableNeedDrain ? drained(res, controller.signal) : Promise.resolve()),
    };
    for await (const frame of serveWatch(call, request, deps, (event) => event.grpcFrame(), deps.fanout.push ? live : undefined)) {
      if (controller.signal.aborted) break;
      sendHeaders();
      if (!res.write(frame)) await drained(res, controller.signal);
    }
  } catch (err) {
    error = ConnectError.from(err);
  } finally {
    options.shutdown.removeEventListener('abort', onShutdown);
    res.off('close', onClose);
  }
  if (!req.stream.destroyed && !res.writableEnded) {
    const trailers: Record<string, string> = { 'grpc-status': String(error ? error.code : 0) };
    if (error) {
      error.metadata.forEach((value, key) => (trailers[key] = value));
      // grpc-status, grpc-message and the error's details (a Rejection) in grpc-status-details-bin, as connect writes them.
      setTrailerStatus(new Headers(), error).forEach((value, key) => (trailers[key] = value));
    }
    if (headersSent) {
      res.addTrailers(trailers);
      res.end();
    } else {
      // Trailers-only: the status in the only HEADERS frame.
      res.writeHead(200, { 'content-type': 'application/grpc+proto', ...trailers });
      res.end();
    }
    outcome = error ? Code[error.code] : 'OK';
  }
  options.observe(outcome, (performance.now() - started) / 1000);
}

function parseRequest(body: Buffer) {
  if (body.length < 5 || body.readUInt32BE(1) !== body.length - 5) {
    throw new ConnectError('protocol error: the request is not one length-prefixed message', Code.InvalidArgument);
  }
  if (body[0] !== 0) throw new ConnectError('protocol error: compressed request without grpc-encoding', Code.InvalidArgument);
  try {
    return fromBinary(WatchConversationRequestSchema, body.subarray(5));
  } catch (err) {
    throw new ConnectError(`parse binary: ${err instanceof Error ? err.message : String(err)}`, Code.InvalidArgument);
  }
}

function readBody(req: NodeServerRequest, max: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    // Removed once settled: nothing of the request stays referenced for the life of the watch.
    const settle = (err: ConnectError | Error | undefined) => {
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('error', settle);
      req.off('close', onClose);
      if (err) reject(err);
      else resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks));
    };
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size <= max) chunks.push(chunk);
      else {
        settle(new ConnectError(`message larger than ${max} bytes`, Code.ResourceExhausted));
        req.resume();
      }
    };
    const onEnd = () => settle(undefined);
    const onClose = () => settle(new ConnectError('the client closed the stream', Code.Canceled));
    req.on('data', onData);
    req.once('end', onEnd);
    req.once('error', settle);
    req.once('close', onClose);
  });
}

function requestHeaders(req: NodeServerRequest): Headers {
  const headers = new Headers();
  for (const [name, value] of Object.entries(req.headers)) {
    if (name.startsWith(':') || value === undefined || name === 'authorization') continue;
    headers.set(name, Array.isArray(value) ? value.join(', ') : value);
  }
  return headers;
}

function drained(res: NodeServerResponse, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      res.off('drain', done);
      res.off('close', done);
      signal.removeEventListener('abort', done);
      resolve();
    };
    res.once('drain', done);
    res.once('close', done);
    signal.addEventListener('abort', done, { once: true });
  });
}
