/**
 * The edge of the API, in front of connect, before a request body is read: a call to a protected
 * service without a bearer token that names a user is refused at once in its protocol's form, its
 * body never read; only admitted requests get `100 Continue`. Health checking and reflection stay
 * open, with the size cap of {@link withReadMaxBytes}. docs/web-bff.md, "The edge: what is checked
 * before a body is read".
 */
import type http2 from 'node:http2';
import type { Socket } from 'node:net';
import type { DescService } from '@bufbuild/protobuf';
import { ConnectError, type ConnectRouter } from '@connectrpc/connect';
import { encodeEnvelope } from '@connectrpc/connect/protocol';
import { codeToHttpStatus, codeToString, endStreamFlag } from '@connectrpc/connect/protocol-connect';
import { trailerFlag } from '@connectrpc/connect/protocol-grpc-web';
import type { NodeHandler, NodeServerRequest, NodeServerResponse } from './node-types.ts';

export type AuthOutcome = { user: string; role?: string } | { error: ConnectError };

/** What the guard established for each request it admitted, for the handlers behind it (no second check). */
const admitted = new WeakMap<NodeServerRequest, { user: string; role?: string }>();

/** The identity the guard admitted `req` with; undefined for a request it did not check. */
export function admittedIdentity(req: NodeServerRequest): { user: string; role?: string } | undefined {
  return admitted.get(req);
}

export interface ApiGuardOptions {
  /** Services whose every call needs an authenticated user. */
  readonly protectedServices: readonly DescService[];
  /** The user an Authorization header names, or the UNAUTHENTICATED error to answer. */
  readonly authenticate: (authorization: string | undefined) => AuthOutcome | Promise<AuthOutcome>;
  /** Called for each call refused here, with `Service/Method` (undefined for a method the service does not have). */
  readonly onRefused?: (method: string | undefined, code: ConnectError['code']) => void;
}

/**
 * Wraps `next` (connect's handler). A call to a protected service (POST or GET) is authenticated
 * from its headers and, without a user, answered by {@link refuse} without its body being read:
 * connect would otherwise buffer up to its read limit (64 MiB) before any interceptor runs.
 * `Expect: 100-continue` is answered only for admitted requests, so a refused client is told
 * before it sends a byte of its body.
 */
export function apiGuard(options: ApiGuardOptions, next: NodeHandler): NodeHandler {
  const prefixes = options.protectedServices.map((s) => `/${s.typeName}/`);
  const methods = new Set(options.protectedServices.flatMap((s) => s.methods.map((m) => `${s.typeName}/${m.name}`)));
  return (req, res) => {
    const path = (req.url ?? '/').split('?', 1)[0]!;
    const admit = () => {
      if (req.method === 'POST') abandonUnreadBody(req, res);
      if (String(req.headers.expect ?? '').toLowerCase() === '100-continue') res.writeContinue();
      next(req, res);
    };
    if ((req.method === 'POST' || req.method === 'GET') && prefixes.some((p) => path.startsWith(p))) {
      const header = req.headers.authorization;
      const decide = (result: AuthOutcome) => {
        if (!('error' in result)) {
          admitted.set(req, result);
          return admit();
        }
        const method = path.slice(1);
        options.onRefused?.(methods.has(method) ? method : undefined, result.error.code);
        refuse(req, res, result.error);
      };
      const result = options.authenticate(Array.isArray(header) ? header[0] : header);
      // A token the conversation service is asked about: the body waits unread meanwhile.
      if (result instanceof Promise) {
        result.then(decide, (err: unknown) => decide({ error: ConnectError.from(err) }));
        return;
      }
      decide(result);
      return;
    }
    admit();
  };
}

/**
 * A copy of `router` whose services and methods read at most `readMaxBytes` per message
 * (connect answers RESOURCE_EXHAUSTED beyond; a declared Content-Length over it is refused
 * before reading).
 */
export function withReadMaxBytes(router: ConnectRouter, readMaxBytes: number): ConnectRouter {
  const capped: ConnectRouter = {
    get handlers() {
      return router.handlers;
    },
    service(service, implementation, options) {
      // eslint-disable-next-line no-restricted-syntax -- a wrapper passing on what it was given
      router.service(service, implementation, { ...options, readMaxBytes });
      return capped;
    },
    rpc(method, impl, options) {
      router.rpc(method, impl, { ...options, readMaxBytes });
      return capped;
    },
  };
  return capped;
}

function isHttp2(req: NodeServerRequest): req is http2.Http2ServerRequest {
  return 'stream' in req && req.stream !== undefined;
}

/** After an answer, how long at most an HTTP/1.1 connection keeps discarding what the client still sends, ms. */
const LINGER_MS = 2000;
const lingering = new WeakSet<Socket>();

/**
 * Closes an HTTP/1.1 connection whose client may still be sending: FIN after the answer, then
 * whatever arrives is read and discarded (node:http dumps it; nothing is kept) until the
 * client closes its side or {@link LINGER_MS} pass, then the socket is destroyed. Destroying
 * it at once, with unread data in the kernel, sends a TCP reset that can overtake the answer
 * (the client would see "connection reset" or EPIPE instead of UNAUTHENTICATED).
 */
function lingerClose(socket: Socket): void {
  if (socket.destroyed || lingering.has(socket)) return;
  lingering.add(socket);
  socket.end();
  const timer = setTimeout(() => socket.destroy(), LINGER_MS);
  timer.unref();
  socket.once('close', () => clearTimeout(timer));
}

/**
 * Once the answer is complete, an HTTP/1.1 request body not read to its end (refused here, or
 * over connect's read limit) is not read any further: the connection is closed gently
 * ({@link lingerClose}), so the rest is not pulled off the wire. On HTTP/2 nothing is needed:
 * node:http2 resets a stream it answered without reading (RST_STREAM NO_ERROR, RFC 9113 §8.1),
 * and an unread stream costs at most its flow-control window until the client, which has its
 * status, ends it.
 */
function abandonUnreadBody(req: NodeServerRequest, res: NodeServerResponse): void {
  if (isHttp2(req)) return;
  // node:http detaches the socket from the request once the answer is written: keep it now.
  const socket = req.socket;
  (res as NodeJS.EventEmitter).once('finish', () => {
    if (!req.complete) lingerClose(socket);
  });
}

const GRPC_WEB = /^application\/grpc-web(-text)?(?:\+|;|$)/;
const GRPC = /^application\/grpc(?:\+|;|$)/;
const CONNECT_STREAM = /^application\/connect\+/;

/**
 * Answers `error` in the protocol the request's content type names, without reading its body:
 * Connect, the code's HTTP status (401 for UNAUTHENTICATED) and a JSON error; gRPC, the status in
 * the trailers (in the headers on HTTP/1.1); gRPC-Web, a trailer frame; Connect streams, an
 * end-of-stream frame.
 */
export function refuse(req: NodeServerRequest, res: NodeServerResponse, error: ConnectError): void {
  const contentType = String(req.headers['content-type'] ?? '')
    .split(';', 1)[0]!
    .trim()
    .toLowerCase();
  const headers: Record<string, string> = {};
  if (!isHttp2(req)) {
    // HTTP/1.1: the connection ends after the answer, its unread body with it. node:http closes
    // a `Connection: close` answer's socket through destroySoon(): close it gently instead.
    headers.connection = 'close';
    const socket = req.socket;
    socket.destroySoon = () => lingerClose(socket);
  }
  let status = 200;
  let body: Uint8Array;
  let trailers: Record<string, string> | undefined;
  const grpcStatus = { 'grpc-status': String(error.code), 'grpc-message': encodeURIComponent(error.rawMessage) };
  const grpcWeb = GRPC_WEB.exec(contentType);
  if (grpcWeb) {
    headers['content-type'] = contentType;
    const trailer = Object.entries(grpcStatus)
      .map(([k, v]) => `${k}: ${v}\r\n`)
      .join('');
    const frame = encodeEnvelope(trailerFlag, new TextEncoder().encode(trailer));
    body = grpcWeb[1] ? new TextEncoder().encode(Buffer.from(frame).toString('base64')) : frame;
  } else if (GRPC.test(contentType)) {
    headers['content-type'] = contentType;
    body = new Uint8Array(0);
    // Trailers after empty headers, as connect answers (grpc-js reads a status only from trailers
    // or from headers that end the stream); HTTP/1.1 has no trailers here, so headers carry it.
    if (isHttp2(req)) trailers = grpcStatus;
    else Object.assign(headers, grpcStatus);
  } else if (CONNECT_STREAM.test(contentType)) {
    headers['content-type'] = contentType;
    const end = JSON.stringify({ error: { code: codeToString(error.code), message: error.rawMessage } });
    body = encodeEnvelope(endStreamFlag, new TextEncoder().encode(end));
  } else {
    // Connect unary (application/json, application/proto, GET) and anything else.
    status = codeToHttpStatus(error.code);
    headers['content-type'] = 'application/json';
    body = new TextEncoder().encode(JSON.stringify({ code: codeToString(error.code), message: error.rawMessage }));
  }
  if (!trailers) headers['content-length'] = String(body.byteLength);
  abandonUnreadBody(req, res);
  res.writeHead(status, headers);
  if (trailers) res.addTrailers(trailers);
  res.end(Buffer.from(body.buffer, body.byteOffset, body.byteLength));
}
