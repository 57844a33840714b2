/**
 * connect-node's request handler (`connectNodeAdapter`) with two changes: a call whose answer could not be
 * written (the client reset the stream or went away, a write failed) goes to the structured logger with the
 * method, not to connect-node's `console.error` with a raw stack trace; and every call gets a server span
 * (rpc-tracing.ts) before the given interceptors. Everything else is connect-node's own code path.
 */
import { Code, ConnectError, createConnectRouter } from '@connectrpc/connect';
import { uResponseNotFound } from '@connectrpc/connect/protocol';
import {
  compressionBrotli,
  compressionGzip,
  universalRequestFromNodeRequest,
  universalResponseToNodeResponse,
  type ConnectNodeAdapterOptions,
  type connectNodeAdapter,
} from '@connectrpc/connect-node';
import type { Logger } from './logger.ts';
import { rpcTracingInterceptor } from './rpc-tracing.ts';

type NodeHandler = ReturnType<typeof connectNodeAdapter>;

export interface ConnectHandlerOptions extends ConnectNodeAdapterOptions {
  readonly logger: Logger;
}

/** Like `connectNodeAdapter(options)`: its router, its universal request and response conversions, the same defaults. */
export function connectHandler(options: ConnectHandlerOptions): NodeHandler {
  const { logger, ...adapter } = options;
  // Every served call gets a server span first (a no-op while tracing is off).
  const interceptors = [rpcTracingInterceptor(), ...(adapter.interceptors ?? [])];
  const routerOptions = { ...adapter, interceptors, acceptCompression: adapter.acceptCompression ?? [compressionGzip, compressionBrotli] };
  const router = createConnectRouter(routerOptions);
  adapter.routes(router);
  const prefix = adapter.requestPathPrefix ?? '';
  const paths = new Map(router.handlers.map((h) => [prefix + h.requestPath, h]));
  const fallback: NodeHandler =
    adapter.fallback ??
    ((_req, res) => {
      res.writeHead(uResponseNotFound.status);
      res.end();
    });
  return (req, res) => {
    const handler = paths.get(req.url?.split('?', 2)[0] ?? '');
    if (!handler) return fallback(req, res);
    const uReq = universalRequestFromNodeRequest(req, res, undefined, adapter.contextValues?.(req));
    handler(uReq)
      .then((uRes) => universalResponseToNodeResponse(uRes, res))
      .catch((reason: unknown) => {
        const method = `${handler.service.typeName}/${handler.method.name}`;
        // The client went away (connect-node stays silent about these too).
        if (ConnectError.from(reason).code === Code.Aborted)
          return logger.debug({ method, err: errText(reason) }, 'call ended: the client went away');
        logger.warn({ method, err: errText(reason) }, 'the answer of a call could not be written (the client reset or left)');
      });
  };
}

function errText(reason: unknown): string {
  return reason instanceof Error ? reason.message : String(reason);
}
