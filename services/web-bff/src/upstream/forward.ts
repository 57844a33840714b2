/**
 * How web-bff forwards a public call to the conversation service: as the authenticated user
 * (and their role, for admin calls), with the caller's trace context and client name, and the
 * upstream's errors mapped for clients (upstream-errors.ts). Both public services use it.
 */
import { Code, ConnectError, type HandlerContext } from '@connectrpc/connect';
import type { Logger } from '@bedrock/platform/server';
import { USER_KEY } from './call-context.ts';
import type { Upstream } from './conversation-client.ts';
import { clientHeaders } from './client-headers.ts';
import { traceHeaders } from './trace-headers.ts';
import { mapUpstreamError } from './upstream-errors.ts';

export type UpstreamCallOptions = ReturnType<Upstream['options']>;

/** The caller the auth interceptor put in the context; a handler reached without one is a wiring bug. */
export function userOf(ctx: HandlerContext): string {
  const user = ctx.values.get(USER_KEY);
  if (!user) throw new ConnectError('missing bearer token', Code.Unauthenticated);
  return user;
}

/** Calls `fn` with the options of a call as `ctx`'s user (with `role` when given), mapping its errors. */
export function createForwarder(upstream: Upstream, logger: Logger) {
  return async function forward<T>(
    method: string,
    ctx: HandlerContext,
    fn: (opts: UpstreamCallOptions) => Promise<T>,
    role?: string,
  ): Promise<T> {
    const base = upstream.options(userOf(ctx), ctx.signal, role);
    const opts = {
      ...base,
      headers: { ...(base.headers as Record<string, string>), ...traceHeaders(ctx.requestHeader), ...clientHeaders(ctx.requestHeader) },
    };
    try {
      return await fn(opts);
    } catch (err) {
      throw mapUpstreamError(err, logger, method, ctx.signal);
    }
  };
}
