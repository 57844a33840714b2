import { randomUUID } from 'node:crypto';
import { Code, ConnectError, createContextKey } from '@connectrpc/connect';
import type { HandlerContext, Interceptor } from '@connectrpc/connect';
import { ROOT_CONTEXT, propagation } from '@opentelemetry/api';
import type { Context } from '@opentelemetry/api';
import type { Logger } from './logger.ts';
import { traceLogFields } from './trace-context.ts';

/** Header carrying a caller-chosen request id; echoed on the response. */
export const REQUEST_ID_HEADER = 'x-request-id';

const loggerKey = createContextKey<Logger | undefined>(undefined, { description: 'bedrock request logger' });
const traceKey = createContextKey<Context>(ROOT_CONTEXT, { description: 'bedrock request trace context' });
const requestIdKey = createContextKey<string>('', { description: 'bedrock request id' });

/** Codes that mean the server failed, logged at error; the others are the caller's business. */
const SERVER_FAULTS = new Set([Code.Internal, Code.Unknown, Code.DataLoss, Code.Unimplemented]);

/**
 * A Connect interceptor giving every served call a request id (the caller's `x-request-id`
 * when it is sane, else a random UUID, echoed in the response header), the caller's W3C trace
 * context (`traceparent` header) and a child logger carrying `request_id` (and `trace_id`).
 * Handlers read them with {@link requestLogger}, {@link requestId} and
 * {@link requestTraceContext}. Each call is logged when it ends: `debug` normally, `error`
 * for server faults (INTERNAL, UNKNOWN, DATA_LOSS, UNIMPLEMENTED).
 * Put it before other interceptors so they see the values.
 */
export function requestContextInterceptor(logger: Logger): Interceptor {
  return (next) => async (req) => {
    const given = req.header.get(REQUEST_ID_HEADER);
    // Bounded and printable, because it is copied into every log line of the request.
    const id = given && /^[\w.:/@-]{1,128}$/.test(given) ? given : randomUUID();
    const trace = propagation.extract(ROOT_CONTEXT, req.header, {
      get: (carrier: Headers, key: string) => carrier.get(key) ?? undefined,
      keys: (carrier: Headers) => [...carrier.keys()],
    });
    const method = `${req.service.typeName}/${req.method.name}`;
    const log = logger.child({ request_id: id, ...traceLogFields(trace) });
    req.contextValues.set(requestIdKey, id).set(traceKey, trace).set(loggerKey, log);
    const started = Date.now();
    const done = (err?: unknown): void => {
      if (err === undefined) return log.debug({ method, code: 'OK', ms: Date.now() - started }, 'rpc finished');
      const error = ConnectError.from(err);
      const fields = { method, code: Code[error.code], ms: Date.now() - started };
      if (SERVER_FAULTS.has(error.code)) log.error({ ...fields, err: error.cause ?? error }, 'rpc failed');
      else log.debug({ ...fields, reason: error.rawMessage }, 'rpc finished');
    };
    try {
      const res = await next(req);
      res.header.set(REQUEST_ID_HEADER, id);
      if (!res.stream) {
        done();
        return res;
      }
      const messages = res.message;
      return {
        ...res,
        message: (async function* () {
          // Stays Canceled if the stream is abandoned (client gone) before it ends.
          let failure: unknown = new ConnectError('stream abandoned by the client', Code.Canceled);
          try {
            yield* messages;
            failure = undefined;
          } catch (err) {
            failure = err;
            throw err;
          } finally {
            done(failure);
          }
        })(),
      };
    } catch (err) {
      done(err);
      throw err;
    }
  };
}

/** The request's child logger; `fallback` when the interceptor is not installed. */
export function requestLogger(ctx: HandlerContext, fallback: Logger): Logger {
  return ctx.values.get(loggerKey) ?? fallback;
}

/** The request id ('' when the interceptor is not installed). */
export function requestId(ctx: HandlerContext): string {
  return ctx.values.get(requestIdKey);
}

/**
 * The caller's trace context (ROOT when none), to pass to `injectTraceContext` for the
 * queue payloads or outgoing calls (`{ headers: injectTraceContext(ctx) }`) the request causes.
 */
export function requestTraceContext(ctx: HandlerContext): Context {
  return ctx.values.get(traceKey);
}
