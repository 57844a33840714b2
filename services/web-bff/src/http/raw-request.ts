/**
 * The Node request and response behind a Connect call, for transport-level actions
 * (resetting a stalled watch stream), which Connect's handler context does not expose.
 */
import http2 from 'node:http2';
import { createContextKey, createContextValues, type ContextValues } from '@connectrpc/connect';
import type { NodeHandler, NodeServerRequest, NodeServerResponse } from './node-types.ts';

export interface RawExchange {
  readonly req: NodeServerRequest;
  readonly res: NodeServerResponse | undefined;
}

export const RAW_EXCHANGE = createContextKey<RawExchange | undefined>(undefined, { description: 'node request and response' });

/**
 * Wraps the Connect handler so that its `contextValues` can find the response of a request:
 * returns the handler to serve with and the `contextValues` option to give the adapter.
 */
export function exposeExchange(): { wrap(handler: NodeHandler): NodeHandler; contextValues(req: NodeServerRequest): ContextValues } {
  const responses = new WeakMap<NodeServerRequest, NodeServerResponse>();
  return {
    wrap: (handler) => (req, res) => {
      responses.set(req, res);
      handler(req, res);
    },
    contextValues: (req) => createContextValues().set(RAW_EXCHANGE, { req, res: responses.get(req) }),
  };
}

/**
 * Resets the HTTP/2 stream (RST_STREAM CANCEL), or closes the HTTP/1.1 connection, and wakes
 * the adapter's pending write: connect-node waits for 'drain' or 'error' on the response
 * only, and a reset stream emits neither, which would leave the handler suspended forever.
 */
export function resetExchange({ req, res }: RawExchange): void {
  if ('stream' in req && req.stream) {
    if (!req.stream.destroyed) req.stream.close(http2.constants.NGHTTP2_CANCEL);
  } else {
    req.socket.destroy();
  }
  // The code makes connect-node treat it as a client hang-up (Code.Aborted) rather than log it.
  const err = Object.assign(new Error('watch stream reset: the client stopped reading'), { code: 'ERR_STREAM_DESTROYED' });
  const emitter = res as unknown as NodeJS.EventEmitter | undefined;
  if (emitter && emitter.listenerCount('error') > 0) emitter.emit('error', err);
}
