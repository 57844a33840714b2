/**
 * HTTP/2 client sessions that survive their peer. connect-node's Http2SessionManager pings each connection
 * on a keepalive timer without checking that the session is still alive; on a session the peer just
 * dropped, Node's `ClientHttp2Session.ping` throws ERR_HTTP2_INVALID_SESSION synchronously from the timer,
 * an uncaught exception that ends the process (connectrpc/connect-es#1795; web-bff exited so once).
 * docs/web-bff.md, "Balancing over the conversation replicas".
 */
import type { ClientHttp2Session } from 'node:http2';
import type { Http2SessionManager } from '@connectrpc/connect-node';

type PingCallback = (err: Error | null, duration: number, payload: Buffer) => void;

/** What is read of the manager's state (not part of its typed API; checked at run time). */
interface ManagerState {
  readonly t: string;
  readonly conn?: ClientHttp2Session;
}

const GUARDED = Symbol('bedrock.guardedPing');

/**
 * Makes every session `manager` opens immune to a ping on a dead session; `onError` hears of each one caught.
 * The race: the peer dropped the connection between the timer being armed and the session's `close` being
 * handled (a peer that resets on a PING, a GOAWAY with an error, a transport error).
 */
export function guardSessionManager(manager: Http2SessionManager, onError: (err: Error) => void): Http2SessionManager {
  const m = manager as unknown as { setState?: (state: ManagerState) => void };
  const setState = m.setState;
  // A connect-node without this method (a newer one, reorganised) keeps its own behaviour.
  if (typeof setState !== 'function') return manager;
  m.setState = function (this: unknown, state: ManagerState) {
    if (state && state.t === 'ready' && state.conn) guardPing(state.conn, onError);
    return setState.call(manager, state);
  };
  return manager;
}

/**
 * Wraps `session.ping` (once): no ping on a closed or destroyed session, and no synchronous throw. The
 * failure goes to the ping's callback instead (connect-node then drops the session and the next call
 * connects anew); any other synchronous throw is caught the same way and reported to `onError`.
 */
export function guardPing(session: ClientHttp2Session, onError: (err: Error) => void): void {
  const s = session as ClientHttp2Session & { [GUARDED]?: true };
  if (s[GUARDED]) return;
  s[GUARDED] = true;
  const ping = session.ping.bind(session) as (...args: unknown[]) => boolean;
  const fail = (args: unknown[], err: Error): boolean => {
    const callback = args.find((a): a is PingCallback => typeof a === 'function');
    if (callback) process.nextTick(callback, err, 0, Buffer.alloc(8));
    return false;
  };
  session.ping = ((...args: unknown[]) => {
    if (session.destroyed || session.closed) {
      const err = Object.assign(new Error('HTTP/2 keepalive ping on a closed session: not sent (the session is replaced)'), {
        code: 'ERR_HTTP2_INVALID_SESSION',
      });
      onError(err);
      return fail(args, err);
    }
    try {
      return ping(...args);
    } catch (err) {
      onError(err as Error);
      return fail(args, err as Error);
    }
  }) as ClientHttp2Session['ping'];
}
