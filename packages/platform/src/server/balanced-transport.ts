/**
 * Client-side load balancing for calls to an internal gRPC service with several replicas: one connect-node
 * gRPC transport (one HTTP/2 connection) per replica address, calls spread over them round robin, and a
 * replica that fails taken out of rotation at once. This is the gRPC "round_robin over a DNS resolver"
 * policy, for connect-node (docs/web-bff.md, "Balancing over the conversation replicas").
 */
import { lookup as dnsLookup } from 'node:dns/promises';
import { isIP } from 'node:net';
import type { ClientSessionOptions, SecureClientSessionOptions } from 'node:http2';
import type { DescMessage, DescMethod, DescMethodStreaming, DescMethodUnary, MessageInitShape } from '@bufbuild/protobuf';
import { MethodOptions_IdempotencyLevel } from '@bufbuild/protobuf/wkt';
import { Code, ConnectError, type ContextValues, type StreamResponse, type Transport, type UnaryResponse } from '@connectrpc/connect';
import { createGrpcTransport, Http2SessionManager, type GrpcTransportOptions, type Http2SessionOptions } from '@connectrpc/connect-node';
import type { Logger } from './logger.ts';
import { guardSessionManager } from './guarded-session.ts';

/** Request headers as a transport takes them. */
type CallHeaders = Parameters<Transport['unary']>[3];

export interface BalancedTransportOptions {
  /** What is called, for log lines and error messages, e.g. `conversation`. */
  readonly name: string;
  /**
   * Base URLs (http:// is h2c); each host name is resolved to all of its addresses (a Kubernetes headless
   * Service lists every ready pod), again periodically and after each failure, so replicas that come and go
   * are followed. A single ClusterIP address behind one long-lived HTTP/2 connection would pin every call to
   * one pod.
   */
  readonly targets: readonly (string | URL)[];
  /** Options of each replica's transport (interceptors, size limits, ...). */
  readonly transport?: Omit<GrpcTransportOptions, 'baseUrl' | 'sessionManager' | 'nodeOptions' | keyof Http2SessionOptions>;
  /** Keepalive of each replica's HTTP/2 connection. */
  readonly session?: Http2SessionOptions;
  /** How often host names are resolved again, ms. Default 10 s; 0 = only at start and after failures. */
  readonly resolveIntervalMs?: number;
  /** How long a replica that failed is skipped, ms; doubles while it keeps failing. Default 1 s. */
  readonly downMs?: number;
  /** Ceiling of that back-off, ms. Default 30 s. */
  readonly maxDownMs?: number;
  /**
   * May this call be sent again after it reached a replica whose connection then broke?
   * `input` is the request message (undefined for client streams). Default: methods declared
   * `idempotency_level = NO_SIDE_EFFECTS` or `IDEMPOTENT`.
   */
  readonly retrySafe?: (method: DescMethod, input: unknown) => boolean;
  /** Resolves a host name to its addresses (tests). Default: `dns.lookup` with `all: true`. */
  readonly lookup?: (hostname: string) => Promise<string[]>;
  readonly logger?: Logger;
}

export interface EndpointState {
  /** e.g. `http://10.0.0.7:50051`. */
  readonly address: string;
  /** In rotation (false while skipped after a failure). */
  readonly up: boolean;
  /** Calls started on it (including retries). */
  readonly calls: number;
}

export interface BalancedTransport extends Transport {
  /** The replicas known now. */
  endpoints(): EndpointState[];
  /** Resolves the host names again now (also done periodically and after failures). */
  refresh(): Promise<void>;
  /** Stops re-resolving and closes every connection. */
  close(): void;
}

/** Socket errors that mean the request never left this process (no connection was made). */
const NOT_CONNECTED = new Set([
  'ECONNREFUSED',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EADDRNOTAVAIL',
  'ERR_HTTP2_GOAWAY_SESSION',
]);
/** Errors that mean the connection broke while (or after) the request was sent. */
const BROKEN = new Set([
  'ECONNRESET',
  'EPIPE',
  'ETIMEDOUT',
  'ERR_STREAM_DESTROYED',
  'ERR_STREAM_PREMATURE_CLOSE',
  'ERR_HTTP2_STREAM_ERROR',
  'ERR_HTTP2_SESSION_ERROR',
  'ERR_HTTP2_INVALID_SESSION',
  'ERR_HTTP2_INVALID_STREAM',
  'ERR_HTTP2_STREAM_CANCEL',
  'ERR_HTTP2_PING_CANCEL',
]);

/**
 * Where a call failed: `not-sent` (it never reached the replica), `broken` (the connection
 * broke after it was sent), `timeout` (its deadline passed or the caller cancelled: says
 * nothing about the replica), `answered` (the replica sent a status).
 */
export type CallFailure = 'not-sent' | 'broken' | 'timeout' | 'answered';

export function classifyCallFailure(err: unknown): CallFailure {
  const codes: string[] = [];
  let syscallConnect = false;
  const seen = new Set<unknown>();
  // Duck-typed: Node's own errors may come from another realm (e.g. under a test VM), where instanceof fails.
  for (let e: unknown = err; typeof e === 'object' && e !== null && !seen.has(e); e = (e as { cause?: unknown }).cause) {
    seen.add(e);
    const { code, syscall } = e as { code?: unknown; syscall?: unknown };
    if (typeof code === 'string') codes.push(code);
    if (syscall === 'connect' || syscall === 'getaddrinfo') syscallConnect = true;
  }
  if (codes.some((c) => NOT_CONNECTED.has(c)) || (syscallConnect && codes.includes('ETIMEDOUT'))) return 'not-sent';
  const message = typeof (err as { message?: unknown })?.message === 'string' ? (err as { message: string }).message : '';
  if (message.includes('REFUSED_STREAM')) return 'not-sent';
  if (codes.some((c) => BROKEN.has(c))) return 'broken';
  // A stream the connection's end closed (the peer vanished) is reported as CANCEL; the
  // caller's own cancel is told apart by its signal, before this is asked.
  if (/stream closed with error code (CANCEL|INTERNAL_ERROR|PROTOCOL_ERROR)/.test(message)) return 'broken';
  if (err instanceof ConnectError && (err.code === Code.DeadlineExceeded || err.code === Code.Canceled)) return 'timeout';
  // A connection that died without a socket error on this stream (the peer vanished).
  if (/\b(session|connection) (closed|destroyed)|socket hang up|premature close|ping timed out/i.test(message)) return 'broken';
  return 'answered';
}

const defaultRetrySafe = (method: DescMethod): boolean =>
  method.idempotency === MethodOptions_IdempotencyLevel.NO_SIDE_EFFECTS || method.idempotency === MethodOptions_IdempotencyLevel.IDEMPOTENT;

async function defaultLookup(hostname: string): Promise<string[]> {
  const found = await dnsLookup(hostname, { all: true });
  return found.map((a) => a.address);
}

interface Endpoint {
  readonly address: string;
  /** Index of the URL it was resolved from. */
  readonly target: number;
  readonly transport: Transport;
  readonly session: Http2SessionManager;
  failures: number;
  downUntil: number;
  calls: number;
  /** When a resolution no longer lists it: closed once calls in flight had time to end. */
  retiring?: NodeJS.Timeout;
}

/** How long a replica that vanished from DNS keeps its connection for calls in flight, ms. */
const RETIRE_AFTER_MS = 60_000;
/** Failures re-resolve at most this often, ms. */
const MIN_RESOLVE_GAP_MS = 1_000;

/**
 * A call that never reached the service (connection refused, unreachable, no route; REFUSED_STREAM) is
 * retried once on another replica; one that broke after it was sent (connection reset, peer gone) only when
 * `retrySafe` says the method may be repeated. Either way the replica is marked down (skipped for `downMs`,
 * doubling while it keeps failing, up to `maxDownMs`) and the caller sees UNAVAILABLE, never a raw socket
 * error; answers of the service itself (any status it sent) pass untouched. A server stream that breaks marks
 * its replica down, so the caller's reconnect goes to another one. A keepalive ping on a session the peer
 * just dropped is not sent and never throws (guarded-session.ts).
 */
export function createBalancedTransport(options: BalancedTransportOptions): BalancedTransport {
  const { name, logger } = options;
  const targets = options.targets.map((t) => new URL(String(t)));
  if (targets.length === 0) throw new Error(`${name}: at least one URL is required`);
  const lookup = options.lookup ?? defaultLookup;
  const retrySafe = options.retrySafe ?? defaultRetrySafe;
  const downMs = options.downMs ?? 1_000;
  const maxDownMs = options.maxDownMs ?? 30_000;
  const resolveIntervalMs = options.resolveIntervalMs ?? 10_000;
  const endpoints = new Map<string, Endpoint>();
  let order: Endpoint[] = [];
  let next = 0;
  let closed = false;
  let lastResolve = 0;
  let resolving: Promise<void> | undefined;

  function makeEndpoint(index: number, ip: string): Endpoint {
    const target = targets[index]!;
    const address = makeAddress(target, ip);
    const baseUrl = `${address}${target.pathname.replace(/\/$/, '')}`;
    // TLS still checks the certificate against the name, not the address.
    const nodeOptions: ClientSessionOptions | SecureClientSessionOptions =
      target.protocol === 'https:' && isIP(target.hostname) === 0 ? { servername: target.hostname } : {};
    // A keepalive ping on a session its peer just dropped must not throw out of a timer
    // (connect-es#1795): the session is replaced and the next call connects anew.
    const session = guardSessionManager(new Http2SessionManager(baseUrl, options.session ?? {}, nodeOptions), (err) =>
      logger?.warn({ upstream: name, address, err: errText(err) }, `${name} connection lost during a keepalive ping; reconnecting`),
    );
    const transport = createGrpcTransport({ ...options.transport, baseUrl, sessionManager: session });
    return { address, target: index, transport, session, failures: 0, downUntil: 0, calls: 0 };
  }

  async function resolveTarget(target: URL): Promise<string[]> {
    const hostname = bare(target.hostname);
    if (isIP(hostname) !== 0) return [hostname];
    return [...new Set(await lookup(hostname))];
  }

  async function resolveNow(): Promise<void> {
    lastResolve = Date.now();
    const results = await Promise.allSettled(targets.map(resolveTarget));
    if (closed) return;
    // address -> [target index, ip]; ip '' = keep the known endpoint (its target failed to resolve).
    const found = new Map<string, [number, string]>();
    let failed = 0;
    for (const [i, r] of results.entries()) {
      if (r.status === 'rejected') {
        failed++;
        logger?.warn(
          { upstream: name, host: targets[i]!.host, err: errText(r.reason) },
          `resolving a ${name} address failed; keeping the known replicas`,
        );
        // A DNS hiccup must not empty the pool.
        for (const e of endpoints.values()) if (e.target === i && !e.retiring) found.set(e.address, [i, '']);
        continue;
      }
      for (const ip of r.value) if (!found.has(makeAddress(targets[i]!, ip))) found.set(makeAddress(targets[i]!, ip), [i, ip]);
    }
    const added: string[] = [];
    const removed: string[] = [];
    for (const [address, [index, ip]] of found) {
      const known = endpoints.get(address);
      if (known) {
        if (known.retiring) {
          clearTimeout(known.retiring);
          known.retiring = undefined;
        }
        continue;
      }
      if (!ip) continue;
      endpoints.set(address, makeEndpoint(index, ip));
      added.push(address);
    }
    for (const [address, e] of endpoints) {
      if (found.has(address) || e.retiring) continue;
      removed.push(address);
      e.retiring = setTimeout(() => {
        e.session.abort();
        endpoints.delete(address);
      }, RETIRE_AFTER_MS);
      e.retiring.unref();
    }
    order = [...endpoints.values()].filter((e) => !e.retiring);
    if (added.length > 0 || removed.length > 0) {
      logger?.info({ upstream: name, added, removed, replicas: order.map((e) => e.address) }, `${name} replicas changed`);
    }
    if (order.length === 0 && failed === 0)
      logger?.warn({ upstream: name, targets: targets.map((t) => t.host) }, `no ${name} replica address found`);
  }

  function refresh(): Promise<void> {
    resolving ??= resolveNow().finally(() => {
      resolving = undefined;
    });
    return resolving;
  }

  const initial = refresh();
  const timer =
    resolveIntervalMs > 0 && targets.some((t) => isIP(bare(t.hostname)) === 0)
      ? setInterval(() => void refresh(), resolveIntervalMs)
      : undefined;
  timer?.unref();

  /** Round robin over replicas in rotation; if none is, the one whose back-off ends first. */
  function pick(exclude?: Endpoint): Endpoint | undefined {
    const now = Date.now();
    const candidates = order.filter((e) => e !== exclude);
    if (candidates.length === 0) return undefined;
    for (let i = 0; i < candidates.length; i++) {
      const e = candidates[(next + i) % candidates.length]!;
      if (e.downUntil <= now) {
        next = (next + i + 1) % Math.max(1, candidates.length);
        return e;
      }
    }
    return candidates.reduce((a, b) => (b.downUntil < a.downUntil ? b : a));
  }

  function markDown(e: Endpoint, err: unknown): void {
    const wasUp = e.downUntil <= Date.now();
    e.failures++;
    const backoff = Math.min(maxDownMs, downMs * 2 ** Math.min(e.failures - 1, 16));
    e.downUntil = Date.now() + backoff;
    // A fresh connection next time: the old one may be half-dead. Not for a stream the server
    // refused (REFUSED_STREAM): its connection is fine and may carry other calls.
    const message = err instanceof Error ? err.message : '';
    if (!message.includes('REFUSED_STREAM')) e.session.abort();
    if (wasUp) {
      logger?.warn(
        {
          upstream: name,
          address: e.address,
          err: errText(err),
          skip_ms: backoff,
          others: order.filter((o) => o !== e && o.downUntil <= Date.now()).length,
        },
        `${name} replica failed; calls go to the other replicas`,
      );
    }
    if (Date.now() - lastResolve >= MIN_RESOLVE_GAP_MS) void refresh();
  }

  function markUp(e: Endpoint): void {
    if (e.failures === 0) return;
    e.failures = 0;
    e.downUntil = 0;
    logger?.info({ upstream: name, address: e.address }, `${name} replica answers again`);
  }

  function unavailable(e: Endpoint | undefined, err: unknown): ConnectError {
    const detail = err instanceof Error ? err.message : String(err);
    return new ConnectError(
      `${name} replica ${e?.address ?? '(none)'} is unreachable: ${detail}`,
      Code.Unavailable,
      undefined,
      undefined,
      err,
    );
  }

  async function endpointFor(signal: AbortSignal | undefined, exclude?: Endpoint): Promise<Endpoint | undefined> {
    await initial;
    let e = pick(exclude);
    if (!e && !exclude) {
      await refresh();
      e = pick();
    }
    if (signal?.aborted) throw ConnectError.from(signal.reason, Code.Canceled);
    return e;
  }

  /** Runs `attempt` on a replica; on a failure that allows it, once more on another one. */
  async function call<T>(
    method: DescMethod,
    input: unknown,
    signal: AbortSignal | undefined,
    timeoutMs: number | undefined,
    attempt: (t: Transport, timeoutMs: number | undefined) => Promise<T>,
    onResult?: (e: Endpoint, result: T) => T,
  ): Promise<T> {
    if (closed) throw new ConnectError(`${name} client is closed`, Code.Unavailable);
    const deadline = timeoutMs !== undefined && timeoutMs > 0 ? Date.now() + timeoutMs : undefined;
    const first = await endpointFor(signal);
    if (!first) throw new ConnectError(`no ${name} replica is known (${targets.map((t) => t.host).join(', ')})`, Code.Unavailable);
    let current = first;
    for (let tries = 0; ; tries++) {
      current.calls++;
      const remaining = deadline === undefined ? timeoutMs : Math.max(1, deadline - Date.now());
      try {
        const result = await attempt(current.transport, remaining);
        markUp(current);
        return onResult ? onResult(current, result) : result;
      } catch (err) {
        if (signal?.aborted) throw err;
        const failure = classifyCallFailure(err);
        if (failure === 'timeout') throw err;
        if (failure === 'answered') {
          // The replica answered (whatever the status): it is alive.
          markUp(current);
          throw err;
        }
        markDown(current, err);
        const mayRetry = failure === 'not-sent' || retrySafe(method, input);
        const timeLeft = deadline === undefined || deadline - Date.now() > 0;
        const other = tries === 0 && mayRetry && timeLeft ? await endpointFor(signal, current) : undefined;
        if (!other) throw unavailable(current, err);
        logger?.info(
          { upstream: name, method: method.name, from: current.address, to: other.address, failure },
          `retrying a ${name} call on another replica`,
        );
        current = other;
      }
    }
  }

  return {
    unary<I extends DescMessage, O extends DescMessage>(
      method: DescMethodUnary<I, O>,
      signal: AbortSignal | undefined,
      timeoutMs: number | undefined,
      header: CallHeaders,
      input: MessageInitShape<I>,
      contextValues?: ContextValues,
    ): Promise<UnaryResponse<I, O>> {
      return call(method, input, signal, timeoutMs, (t, ms) => t.unary(method, signal, ms, header, input, contextValues));
    },

    async stream<I extends DescMessage, O extends DescMessage>(
      method: DescMethodStreaming<I, O>,
      signal: AbortSignal | undefined,
      timeoutMs: number | undefined,
      header: CallHeaders,
      input: AsyncIterable<MessageInitShape<I>>,
      contextValues?: ContextValues,
    ): Promise<StreamResponse<I, O>> {
      // A server stream has one request message: read it once, so a retry can send it again.
      let messages: AsyncIterable<MessageInitShape<I>> = input;
      let replayable = false;
      const all: MessageInitShape<I>[] = [];
      if (method.methodKind === 'server_streaming') {
        for await (const m of input) all.push(m);
        messages = { [Symbol.asyncIterator]: () => iterate(all) };
        replayable = true;
      }
      let used = false;
      return call(
        method,
        replayable ? (all[0] as unknown) : undefined,
        signal,
        timeoutMs,
        (t, ms) => {
          if (used && !replayable) throw new ConnectError('client stream cannot be replayed', Code.Unavailable);
          used = true;
          return t.stream(method, signal, ms, header, messages, contextValues);
        },
        (e, response) => ({ ...response, message: watchStream(e, response.message) }),
      );
    },

    endpoints: () => order.map((e) => ({ address: e.address, up: e.downUntil <= Date.now(), calls: e.calls })),
    refresh,
    close() {
      closed = true;
      if (timer) clearInterval(timer);
      for (const e of endpoints.values()) {
        if (e.retiring) clearTimeout(e.retiring);
        e.session.abort();
      }
      endpoints.clear();
      order = [];
    },
  };

  /** Passes a stream's messages on; a broken connection marks its replica down (the caller reconnects elsewhere). */
  async function* watchStream<T>(e: Endpoint, source: AsyncIterable<T>): AsyncIterable<T> {
    try {
      yield* source;
    } catch (err) {
      const failure = classifyCallFailure(err);
      if (failure === 'answered' || failure === 'timeout') throw err;
      markDown(e, err);
      throw unavailable(e, err);
    }
  }

  function makeAddress(target: URL, ip: string): string {
    const host = isIP(ip) === 6 ? `[${ip}]` : ip;
    return `${target.protocol}//${host}:${target.port || (target.protocol === 'https:' ? '443' : '80')}`;
  }
}

/** A host name without the brackets of an IPv6 literal. */
function bare(hostname: string): string {
  return hostname.replace(/^\[|\]$/g, '');
}

async function* iterate<T>(items: readonly T[]): AsyncGenerator<T> {
  for (const item of items) yield item;
}

function errText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
