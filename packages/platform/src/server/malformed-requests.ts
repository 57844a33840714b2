/**
 * A request body that does not parse is the caller's mistake: INVALID_ARGUMENT naming the message type and
 * what was wrong ("request body is not a valid bedrock.v1.SendMessageRequest: premature EOF (protobuf
 * binary)"), on every protocol (Connect, gRPC, gRPC-Web). connect-es itself reports a protobuf body that
 * does not parse as INTERNAL ("parse binary: ..."), before any interceptor runs and with no option to change
 * that, so {@link withMalformedRequestErrors} wraps the routes instead (docs/web-bff.md, "The edge").
 */
import { Code, ConnectError, createContextKey, createContextValues, type ConnectRouter } from '@connectrpc/connect';
import type { DescMethod, DescService } from '@bufbuild/protobuf';
import {
  encodeEnvelope,
  type UniversalHandler,
  type UniversalServerRequest,
  type UniversalServerResponse,
} from '@connectrpc/connect/protocol';
import { codeFromString, codeToHttpStatus, codeToString, endStreamFlag } from '@connectrpc/connect/protocol-connect';
import { setTrailerStatus } from '@connectrpc/connect/protocol-grpc';
import { trailerFlag, trailerParse, trailerSerialize } from '@connectrpc/connect/protocol-grpc-web';

interface CallState {
  started: boolean;
}

const CALL_STATE = createContextKey<CallState | undefined>(undefined, { description: 'the implementation of the call has been invoked' });

/** Error answers larger than this are passed on untouched (a parse error answer is far smaller). */
const MAX_ERROR_BODY_BYTES = 64 * 1024;

const BINARY_PREFIX = 'parse binary: ';
const JSON_ERROR = /^cannot decode (?:message|field) \S+ from JSON(?::\s*)?/;

/**
 * The INVALID_ARGUMENT message for connect's own parse error of a `typeName` request, or
 * undefined when the error is something else.
 */
export function malformedRequestMessage(code: Code, message: string, typeName: string): string | undefined {
  if (code === Code.Internal && message.startsWith(BINARY_PREFIX)) {
    return `request body is not a valid ${typeName}: ${message.slice(BINARY_PREFIX.length)} (protobuf binary)`;
  }
  if (code === Code.InvalidArgument && JSON_ERROR.test(message)) {
    const detail = message.startsWith(`cannot decode message ${typeName} from JSON`) ? message.replace(JSON_ERROR, '') : message;
    return `request body is not a valid ${typeName}: ${detail || 'not valid JSON'} (JSON)`;
  }
  return undefined;
}

/**
 * Wraps a `routes` function (the option of `connectNodeAdapter` and `startGrpcServer`) so that
 * request bodies that do not parse answer INVALID_ARGUMENT on every protocol:
 *
 * - each implementation marks the call as started when connect calls it, so an error answered
 *   before that (nothing of the service ran) can only come from reading the request;
 * - such an answer, if it is connect's parse error (of a unary or server-streaming request; a
 *   JSON body's comes as INVALID_ARGUMENT in connect's own words), is rewritten in the protocol's
 *   own form (Connect JSON error with HTTP 400, gRPC trailers, gRPC-Web trailer frame, Connect
 *   end-of-stream frame). These answers are a few hundred bytes, already in memory.
 * - for client-streaming and bidi methods, a later message that does not parse surfaces in
 *   the implementation's input iterable and is converted there.
 *
 * Errors thrown by implementations (even one passing on a "parse binary" error of a call it
 * made) are never touched: the call had started.
 */
export function withMalformedRequestErrors(routes: (router: ConnectRouter) => void): (router: ConnectRouter) => void {
  return (router) => {
    const first = router.handlers.length;
    const proxy: ConnectRouter = {
      get handlers() {
        return router.handlers;
      },
      service(service, implementation, options) {
        router.service(service, markStarted(service, implementation) as typeof implementation, options);
        return proxy;
      },
      rpc(method, impl, options) {
        router.rpc(method, wrapImpl(method, impl as unknown as AnyImpl) as unknown as typeof impl, options);
        return proxy;
      },
    };
    routes(proxy);
    for (let i = first; i < router.handlers.length; i++) router.handlers[i] = rewriteParseErrors(router.handlers[i]!);
  };
}

type AnyImpl = (input: unknown, ctx: { values: { get: (key: typeof CALL_STATE) => CallState | undefined } }) => unknown;

function markStarted(service: DescService, implementation: object): object {
  const impl = implementation as Record<string, unknown>;
  const wrapped: Record<string, unknown> = {};
  for (const method of service.methods) {
    const fn = impl[method.localName];
    // Left out: connect answers UNIMPLEMENTED for it as before.
    if (typeof fn === 'function') wrapped[method.localName] = wrapImpl(method, (fn as AnyImpl).bind(implementation));
  }
  return wrapped;
}

function wrapImpl(method: DescMethod, fn: AnyImpl): AnyImpl {
  const streamingInput = method.methodKind === 'client_streaming' || method.methodKind === 'bidi_streaming';
  return (input, ctx) => {
    const state = ctx.values.get(CALL_STATE);
    if (state) state.started = true;
    return fn(streamingInput ? convertInputErrors(input as AsyncIterable<unknown>, method.input.typeName) : input, ctx);
  };
}

/** A later message of a client stream that does not parse: the same INVALID_ARGUMENT. */
async function* convertInputErrors(input: AsyncIterable<unknown>, typeName: string): AsyncIterable<unknown> {
  try {
    yield* input;
  } catch (err) {
    if (err instanceof ConnectError) {
      const message = malformedRequestMessage(err.code, err.rawMessage, typeName);
      if (message) throw new ConnectError(message, Code.InvalidArgument, undefined, undefined, err);
    }
    throw err;
  }
}

function rewriteParseErrors(handler: UniversalHandler): UniversalHandler {
  const typeName = handler.method.input.typeName;
  const wrapped = async (req: UniversalServerRequest): Promise<UniversalServerResponse> => {
    const state: CallState = { started: false };
    const contextValues = req.contextValues ?? createContextValues();
    contextValues.set(CALL_STATE, state);
    const res = await handler({ ...req, contextValues });
    // Once the implementation ran, every answer is the service's own.
    if (state.started) return res;
    return rewriteAnswer(res, typeName);
  };
  return Object.assign(wrapped, {
    protocolNames: handler.protocolNames,
    service: handler.service,
    method: handler.method,
    requestPath: handler.requestPath,
    allowedMethods: handler.allowedMethods,
    supportedContentType: handler.supportedContentType,
  });
}

async function rewriteAnswer(res: UniversalServerResponse, typeName: string): Promise<UniversalServerResponse> {
  const contentType = res.header?.get('content-type') ?? '';
  if (/^application\/grpc(?:[+;]|$)/i.test(contentType)) {
    // gRPC: an error before the first message is already in the trailers when the handler returns.
    if (res.trailer) fixGrpcTrailer(res.trailer, typeName);
    return res;
  }
  if (!res.body) return res;
  const body = await readSmall(res.body);
  if (body.complete) {
    const fixed = /^application\/grpc-web/i.test(contentType)
      ? fixGrpcWebBody(body.bytes, typeName)
      : /^application\/connect\+/i.test(contentType)
        ? fixEndStreamBody(body.bytes, typeName)
        : res.status >= 400 && /^application\/json/i.test(contentType)
          ? fixUnaryErrorBody(body.bytes, typeName)
          : undefined;
    if (fixed) {
      const header = new Headers(res.header);
      if (header.has('content-length')) header.set('content-length', String(fixed.bytes.byteLength));
      return { ...res, status: fixed.status ?? res.status, header, body: once(fixed.bytes) };
    }
    return { ...res, body: once(body.bytes) };
  }
  return { ...res, body: body.rest };
}

function fixGrpcTrailer(trailer: Headers, typeName: string): void {
  const status = Number(trailer.get('grpc-status'));
  const raw = trailer.get('grpc-message') ?? '';
  let message: string;
  try {
    message = decodeURIComponent(raw);
  } catch {
    message = raw;
  }
  const fixed = malformedRequestMessage(status as Code, message, typeName);
  if (fixed) setTrailerStatus(trailer, new ConnectError(fixed, Code.InvalidArgument));
}

interface Fixed {
  readonly bytes: Uint8Array;
  readonly status?: number;
}

/** One uncompressed envelope with `flags`, or undefined. */
function singleEnvelope(bytes: Uint8Array, flags: number): Uint8Array | undefined {
  if (bytes.byteLength < 5 || bytes[0] !== flags) return undefined;
  const length = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength).getUint32(1);
  if (bytes.byteLength !== 5 + length) return undefined;
  return bytes.subarray(5);
}

function fixGrpcWebBody(bytes: Uint8Array, typeName: string): Fixed | undefined {
  const data = singleEnvelope(bytes, trailerFlag);
  if (!data) return undefined;
  const trailer = trailerParse(data);
  const before = trailer.get('grpc-message');
  fixGrpcTrailer(trailer, typeName);
  if (trailer.get('grpc-message') === before) return undefined;
  return { bytes: encodeEnvelope(trailerFlag, trailerSerialize(trailer)) };
}

interface JsonError {
  code?: unknown;
  message?: unknown;
  details?: unknown;
}

/** The JSON error with its code and message replaced, or undefined if it is not a parse error. */
function fixJsonError(error: JsonError | undefined, typeName: string): JsonError | undefined {
  if (!error || typeof error.code !== 'string') return undefined;
  const code = codeFromString(error.code);
  if (code === undefined) return undefined;
  const message = malformedRequestMessage(code, typeof error.message === 'string' ? error.message : '', typeName);
  return message ? { ...error, code: codeToString(Code.InvalidArgument), message } : undefined;
}

function fixEndStreamBody(bytes: Uint8Array, typeName: string): Fixed | undefined {
  const data = singleEnvelope(bytes, endStreamFlag);
  if (!data) return undefined;
  const end = parseJson<{ error?: JsonError; metadata?: unknown }>(data);
  const error = fixJsonError(end?.error, typeName);
  if (!error) return undefined;
  return { bytes: encodeEnvelope(endStreamFlag, new TextEncoder().encode(JSON.stringify({ ...end, error }))) };
}

function fixUnaryErrorBody(bytes: Uint8Array, typeName: string): Fixed | undefined {
  const error = fixJsonError(parseJson<JsonError>(bytes), typeName);
  if (!error) return undefined;
  return { bytes: new TextEncoder().encode(JSON.stringify(error)), status: codeToHttpStatus(Code.InvalidArgument) };
}

function parseJson<T>(bytes: Uint8Array): T | undefined {
  try {
    const value: unknown = JSON.parse(new TextDecoder().decode(bytes));
    return typeof value === 'object' && value !== null ? (value as T) : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Reads a body of at most {@link MAX_ERROR_BODY_BYTES}. `complete` with the bytes if it all
 * came; otherwise `rest` yields everything read so far and then the remainder, unchanged.
 */
async function readSmall(
  body: AsyncIterable<Uint8Array>,
): Promise<{ complete: true; bytes: Uint8Array } | { complete: false; rest: AsyncIterable<Uint8Array> }> {
  const it = body[Symbol.asyncIterator]();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const next = await it.next();
    if (next.done) break;
    chunks.push(next.value);
    size += next.value.byteLength;
    if (size > MAX_ERROR_BODY_BYTES) {
      return {
        complete: false,
        rest: {
          [Symbol.asyncIterator]: () => {
            let i = 0;
            return {
              next: () => (i < chunks.length ? Promise.resolve({ done: false, value: chunks[i++]! }) : it.next()),
              throw: (e: unknown) => it.throw?.(e) ?? Promise.reject(e),
              return: (v: unknown) => it.return?.(v) ?? Promise.resolve({ done: true as const, value: undefined }),
            };
          },
        },
      };
    }
  }
  const bytes = new Uint8Array(size);
  let offset = 0;
  for (const c of chunks) {
    bytes.set(c, offset);
    offset += c.byteLength;
  }
  return { complete: true, bytes };
}

function once(bytes: Uint8Array): AsyncIterable<Uint8Array> {
  return (async function* () {
    yield bytes;
  })();
}
