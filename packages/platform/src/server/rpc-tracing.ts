import { Code, ConnectError } from '@connectrpc/connect';
import type { Interceptor } from '@connectrpc/connect';
import { ROOT_CONTEXT, SpanKind, SpanStatusCode, context, propagation, trace } from '@opentelemetry/api';
import type { Context, Span } from '@opentelemetry/api';
import { tracer, tracingEnabled } from './spans.ts';

/** Codes that mean the server failed (OpenTelemetry's RPC conventions): the span is marked ERROR. */
const SERVER_FAULTS = new Set([Code.Unknown, Code.DeadlineExceeded, Code.Unimplemented, Code.Internal, Code.Unavailable, Code.DataLoss]);

const headerGetter = {
  get: (carrier: Headers, key: string) => carrier.get(key) ?? undefined,
  keys: (carrier: Headers) => [...carrier.keys()],
};

/**
 * A server span for every call served (installed by `connectHandler`, so by every server):
 * named `<package.Service>/<Method>`, kind SERVER, parented by the caller's `traceparent`,
 * with `rpc.system` (`connect_rpc`), `rpc.service`, `rpc.method` and, when the call fails,
 * `rpc.connect_rpc.error_code` (the Connect code, e.g. `not_found`); server faults (UNKNOWN,
 * DEADLINE_EXCEEDED, UNIMPLEMENTED, INTERNAL, UNAVAILABLE, DATA_LOSS) set status ERROR. The
 * span is active while the handler runs (and while a streamed answer is produced). Does
 * nothing while tracing is off.
 */
export function rpcTracingInterceptor(): Interceptor {
  return (next) => async (req) => {
    if (!tracingEnabled()) return next(req);
    const parent = propagation.extract(ROOT_CONTEXT, req.header, headerGetter);
    const span = tracer().startSpan(
      `${req.service.typeName}/${req.method.name}`,
      {
        kind: SpanKind.SERVER,
        attributes: { 'rpc.system': 'connect_rpc', 'rpc.service': req.service.typeName, 'rpc.method': req.method.name },
      },
      parent,
    );
    const ctx = trace.setSpan(parent, span);
    try {
      const res = await context.with(ctx, () => next(req));
      if (!res.stream) {
        end(span);
        return res;
      }
      return { ...res, message: streamIn(ctx, span, res.message) };
    } catch (err) {
      end(span, err);
      throw err;
    }
  };
}

/** Produces the streamed answer inside the span's context; ends the span with the stream (Canceled when abandoned). */
async function* streamIn<T>(ctx: Context, span: Span, messages: AsyncIterable<T>): AsyncGenerator<T> {
  const it = messages[Symbol.asyncIterator]();
  let failure: unknown = new ConnectError('stream abandoned by the client', Code.Canceled);
  try {
    for (;;) {
      const step = await context.with(ctx, () => it.next());
      if (step.done) break;
      yield step.value;
    }
    failure = undefined;
  } catch (err) {
    failure = err;
    throw err;
  } finally {
    if (failure !== undefined) await it.return?.().catch(() => undefined);
    end(span, failure);
  }
}

function end(span: Span, err?: unknown): void {
  if (err !== undefined) {
    const error = ConnectError.from(err);
    const code = Code[error.code].replace(/([a-z])([A-Z])/g, '$1_$2').toLowerCase();
    span.setAttribute('rpc.connect_rpc.error_code', code);
    if (SERVER_FAULTS.has(error.code)) {
      span.recordException(error);
      span.setAttribute('error.type', code);
      span.setStatus({ code: SpanStatusCode.ERROR, message: error.rawMessage });
    }
  }
  span.end();
}
