/**
 * web-bff: the public API for browsers, the CLI and gRPC clients. Serves
 * `bedrock.v1.ConversationService` (Connect, gRPC, gRPC-Web) with health checking and
 * reflection on two listeners — HTTP/1.1 (browsers, the web UI's files) and h2c (gRPC) —
 * authenticates every call, forwards it to the conversation service as the caller, and
 * serves watch streams itself from a per-process fan-out of the notification streams.
 */
import { Code, ConnectError } from '@connectrpc/connect';
import { AdminService, CheckpointService, ConversationService, McpService, WorkspaceService, health as healthPb } from '@bedrock/contracts';
import { createTransport, type NotificationStreams, type Transport } from '@bedrock/platform';
import {
  connectHandler,
  createHealth,
  createLogger,
  createMetrics,
  createReadiness,
  grpcHealthCheck,
  redisCheck,
  registerHealth,
  readServiceTokenFile,
  registerReflection,
  rpcMetricsInterceptor,
  serve,
  startMetricsServer,
  withMalformedRequestErrors,
  type Logger,
  type MetricsServer,
  type ServeLimits,
  type Served,
} from '@bedrock/platform/server';
import { registerConversationRoutes } from './api/conversation-routes.ts';
import { registerAdminRoutes } from './api/admin-routes.ts';
import { registerWorkspaceRoutes } from './api/workspace-routes.ts';
import { registerMcpRoutes } from './api/mcp-routes.ts';
import { registerCheckpointRoutes } from './api/checkpoint-routes.ts';
import { authInterceptor, PROTECTED_SERVICES } from './auth/auth-interceptor.ts';
import { createAuthenticator } from './auth/authenticator.ts';
import { createOidcVerifier } from './auth/oidc.ts';
import { loadTokenStore, type TokenStore } from './auth/token-store.ts';
import { DEFAULT_UI_DIR, type WebBffConfig } from './config.ts';
import { apiGuard, withReadMaxBytes } from './http/api-guard.ts';
import { parseOrigins, withCors } from './http/cors.ts';
import { exposeExchange } from './http/raw-request.ts';
import { withSecurityHeaders } from './http/security-headers.ts';
import { staticFiles } from './http/static-files.ts';
import { mcpOAuthRoutes } from './http/mcp-oauth-routes.ts';
import { createUpstream } from './upstream/conversation-client.ts';
import { createFanout, type Fanout, type FanoutStats } from './watch/fanout.ts';
import { createStallWatchdog } from './watch/stall-watchdog.ts';
import { ShutdownSignal } from './http/shutdown-signal.ts';
import { grpcWatchFastPath, WATCH_PATH } from './watch/grpc-watch.ts';
import type { WatchDeps } from './watch/watcher.ts';
import { createReclaimer, exposeGc } from './watch/reclaim.ts';

export const SERVICE_NAME = 'web-bff';

/** Largest request accepted from clients, bytes: a message with images (the conversation service checks the details). */
const READ_MAX_BYTES = 64 * 1024 * 1024;
/**
 * Many watch streams share few HTTP/2 connections (up to 10,000 per connection), and watch
 * streams are long-lived: no bound on receiving a whole HTTP/1.1 request, as before.
 */
const LISTENER_LIMITS: ServeLimits = { maxConcurrentStreams: 10_000, requestTimeoutMs: 0 };
/** Largest request to the open services (health checking, reflection), which need no token. */
const OPEN_READ_MAX_BYTES = 64 * 1024;

/** Parts a caller may supply instead of having them built from config (tests, the embedded mode). */
export interface WebBffDeps {
  readonly logger?: Logger;
  /** Notification streams to watch (e.g. the embedded mode's in-process ones). */
  readonly streams?: NotificationStreams;
  /** Tokens; default: loaded from `auth` (BEDROCK_TOKENS_FILE / BEDROCK_TOKENS). */
  readonly tokens?: TokenStore;
  /** web-bff's own service token, presented to the conversation service; default read from BEDROCK_SERVICE_TOKEN_FILE. */
  readonly serviceToken?: string;
}

export interface WebBff {
  /** Loads the tokens, connects the transport and opens the listeners; rejects if any fails (nothing is left open). */
  start(): Promise<void>;
  /** Health turns NOT_SERVING, the listeners drain for `server.shutdownGrace`, then open watches end with UNAVAILABLE. */
  stop(): Promise<void>;
  /** After start: HTTP/1.1 base URL (Connect, gRPC-Web, UI). */
  readonly httpUrl: string;
  /** After start: h2c base URL (gRPC, Connect, gRPC-Web). */
  readonly grpcUrl: string;
  /** After start: the /metrics, /healthz and /readyz server. */
  readonly metricsUrl: string;
  /** Re-reads the token sources (SIGHUP); the old tokens stay if the new ones are invalid. */
  reloadTokens(): void;
  watchStats(): FanoutStats & { readonly stallResets: number };
}

/** What a started web-bff holds. */
interface Started {
  readonly httpUrl: string;
  readonly grpcUrl: string;
  readonly metricsUrl: string;
  reloadTokens(): void;
  watchStats(): FanoutStats & { readonly stallResets: number };
  stop(): Promise<void>;
}

/** web-bff from its config; `start()` runs it, `stop()` ends it. */
export function createWebBff(config: WebBffConfig, deps: WebBffDeps = {}): WebBff {
  let started: Started | undefined;
  let starting: Promise<void> | undefined;
  let stopping: Promise<void> | undefined;
  const running = (): Started => {
    if (!started) throw new Error('web-bff not started');
    return started;
  };
  return {
    get httpUrl() {
      return running().httpUrl;
    },
    get grpcUrl() {
      return running().grpcUrl;
    },
    get metricsUrl() {
      return running().metricsUrl;
    },
    reloadTokens: () => running().reloadTokens(),
    watchStats: () => running().watchStats(),
    start() {
      if (stopping) return Promise.reject(new Error('web-bff was stopped'));
      starting ??= launch(config, deps).then((s) => {
        started = s;
      });
      return starting;
    },
    stop() {
      // A start still in progress finishes first, so what it opened is closed.
      stopping ??= (starting ?? Promise.resolve()).then(
        () => started?.stop(),
        () => undefined,
      );
      return stopping;
    },
  };
}

/** Builds and opens everything; on failure closes what it opened. */
async function launch(config: WebBffConfig, deps: WebBffDeps): Promise<Started> {
  const logger = deps.logger ?? createLogger({ service: SERVICE_NAME, level: config.log.level });
  const tokenSources = { file: config.auth.tokensFile, inline: config.auth.tokens };
  let tokens = deps.tokens ?? loadTokenStore(tokenSources);
  const { oidc } = config;
  const audience = oidc.audience ?? [];
  if (oidc.issuer && audience.length === 0)
    throw new Error(
      'BEDROCK_OIDC_AUDIENCE is required with BEDROCK_OIDC_ISSUER: the audiences (client ids or API identifiers) tokens must be for',
    );
  if (tokens.names.length === 0 && !oidc.issuer && !config.auth.admins?.length)
    logger.warn(
      'no bearer tokens configured and no admin named: only tokens issued through AdminService are accepted, and nobody can issue one (set BEDROCK_TOKENS_FILE or BEDROCK_TOKENS, and BEDROCK_ADMIN_USERS)',
    );
  const serviceTokenFile = config.upstream.serviceTokenFile;
  const serviceToken = deps.serviceToken ?? (serviceTokenFile ? readServiceTokenFile(serviceTokenFile) : undefined);
  if (!serviceToken) logger.warn('no service token (BEDROCK_SERVICE_TOKEN_FILE): the conversation service will refuse every call');

  const metrics = createMetrics(SERVICE_NAME);
  const health = createHealth();
  let ownedTransport: Transport | undefined;
  let streams = deps.streams;
  if (!streams) {
    ownedTransport = createTransport(config.transport, logger);
    streams = ownedTransport.streams;
  }
  const upstream = createUpstream({
    targets: config.upstream.conversationUrls,
    timeoutMs: config.upstream.timeout,
    serviceToken,
    resolveIntervalMs: config.upstream.resolveInterval,
    logger,
  });
  const authenticator = createAuthenticator({
    tokens: () => tokens,
    identity: upstream.identity,
    callOptions: () => upstream.serviceOptions(),
    admins: config.auth.admins ?? [],
    cacheTtlMs: config.auth.cacheTtl,
    oidc: oidc.issuer
      ? {
          verifier: createOidcVerifier({ ...oidc, issuer: oidc.issuer, audience }, (err) =>
            logger.warn({ issuer: oidc.issuer, err: err.message }, 'OpenID Connect discovery failed; will try again with the next token'),
          ),
          autoCreate: oidc.users === 'auto',
        }
      : undefined,
    logger,
  });
  const fanout: Fanout = createFanout({
    streams,
    bufferEvents: config.watch.bufferEvents,
    maxLagMs: config.watch.maxLag,
    lingerMs: config.watch.linger,
    push: config.watch.delivery === 'push',
    onError: (err) => logger.warn({ err }, 'reading a notification stream failed; retrying'),
  });
  const watchdog = createStallWatchdog(config.watch.stallTimeout, () => logger.info('watch stream reset: the client stopped reading'));
  // After a mass of watch streams closed, their garbage is collected rather than left until load returns (see the file).
  const reclaimer = createReclaimer({
    gc: exposeGc(),
    onCollect: (closed, ms) => logger.info({ closed, gc_ms: Math.round(ms) }, 'memory reclaimed after watch streams closed'),
  });
  // Every call listens on the shutdown signal (10,000 watches are 10,000 listeners): a Set, not an EventTarget (see the file).
  const shutdown = new ShutdownSignal();

  const exchange = exposeExchange();
  let watchDeps: WatchDeps | undefined;
  const apiPaths = new Set<string>();
  const handler = connectHandler({
    logger,
    readMaxBytes: READ_MAX_BYTES,
    shutdownSignal: shutdown.asAbortSignal(),
    interceptors: [rpcMetricsInterceptor(metrics), authInterceptor(authenticator)],
    contextValues: exchange.contextValues,
    fallback: staticFiles(config.http.uiDir ?? DEFAULT_UI_DIR),
    // A body that does not parse is INVALID_ARGUMENT naming the message type (connect says INTERNAL).
    routes: withMalformedRequestErrors((router) => {
      registerConversationRoutes(router, {
        upstream,
        fanout,
        watchdog,
        logger,
        heartbeatMs: config.watch.heartbeat,
        maxLagMs: config.watch.maxLag,
        maxWatchesPerUser: config.watch.maxPerUser,
        onWatchDeps: (deps) => (watchDeps = deps),
        onWatchers: (delta) => {
          if (delta < 0) reclaimer.closed();
          metrics.activeStreams.inc({ kind: 'watch' }, delta);
          metrics.activeStreams.set({ kind: 'watch_conversation' }, fanout.stats().conversations);
        },
      });
      registerAdminRoutes(router, { upstream, logger, tokens: () => tokens });
      registerWorkspaceRoutes(router, { upstream, logger });
      registerMcpRoutes(router, { upstream, logger, publicUrl: config.http.publicUrl });
      registerCheckpointRoutes(router, { upstream, logger });
      // Open to anyone, so a small body cap: a probe or reflection request is tiny.
      registerHealth(withReadMaxBytes(router, OPEN_READ_MAX_BYTES), health);
      registerReflection(withReadMaxBytes(router, OPEN_READ_MAX_BYTES), [
        ConversationService,
        WorkspaceService,
        McpService,
        CheckpointService,
        AdminService,
        healthPb.Health,
      ]);
      for (const h of router.handlers) apiPaths.add(h.requestPath);
    }),
  });
  // Outside in: security headers on every answer, CORS, then the bearer token is checked before connect reads a body.
  const guarded = apiGuard(
    {
      protectedServices: PROTECTED_SERVICES,
      authenticate: (authorization) => authenticator.authenticate(authorization),
      onRefused: (method, code) => {
        if (method) metrics.rpcServerSeconds.observe({ method, code: Code[code] }, 0);
      },
    },
    // Binary gRPC watches skip connect (see the file); everything else goes through it.
    grpcWatchFastPath(
      {
        deps: () => watchDeps,
        authenticate: (authorization) => authenticator.authenticate(authorization),
        shutdown,
        observe: (code, seconds) => metrics.rpcServerSeconds.observe({ method: WATCH_PATH.slice(1), code }, seconds),
        readMaxBytes: OPEN_READ_MAX_BYTES,
      },
      exchange.wrap(handler),
    ),
  );
  // The MCP OAuth start and callback pages (plain GETs, before connect).
  const oauthRoutes = mcpOAuthRoutes(
    { upstream, logger, publicUrl: config.http.publicUrl, authenticate: (authorization) => authenticator.authenticate(authorization) },
    guarded,
  );
  const app = withSecurityHeaders((path) => apiPaths.has(path), withCors(parseOrigins(config.http.corsOrigins), oauthRoutes));

  const abort = () => shutdown.abort(new ConnectError('server is shutting down; resume from the last event you saw', Code.Unavailable));
  // `Expect: 100-continue` goes to the handler, which sends 100 Continue only to a request it
  // admits (a refused caller learns so before sending its body); open watches end with
  // UNAVAILABLE through the shutdown signal when the grace period is over.
  const common = { host: config.server.host, handler: app, handleExpectContinue: true, onGraceOver: abort, limits: LISTENER_LIMITS };
  const listeners: Served[] = [];
  let metricsServer: MetricsServer | undefined;
  try {
    listeners.push(await serve({ ...common, protocol: 'http1', port: config.server.httpPort }));
    listeners.push(await serve({ ...common, protocol: 'h2c', port: config.server.grpcPort }));
    // Ready while the conversation service answers its health check and, with the redis
    // transport, Redis answers (the watch streams are read there).
    const readiness = createReadiness({
      checks: [grpcHealthCheck('conversation', upstream.transport), ...(ownedTransport?.ping ? [redisCheck(() => ownedTransport)] : [])],
    });
    metricsServer = await startMetricsServer({
      host: config.server.host,
      port: config.server.metricsPort,
      registry: metrics.registry,
      health,
      readiness,
    });
  } catch (err) {
    for (const l of listeners) await l.close(0);
    upstream.close();
    await fanout.close();
    watchdog.stop();
    reclaimer.stop();
    await ownedTransport?.close();
    throw err;
  }
  health.set('', 'SERVING');
  health.set(ConversationService.typeName, 'SERVING');
  health.set(AdminService.typeName, 'SERVING');
  health.set(WorkspaceService.typeName, 'SERVING');
  health.set(McpService.typeName, 'SERVING');
  health.set(CheckpointService.typeName, 'SERVING');
  const [http1, h2c] = listeners as [Served, Served];
  logger.info(
    {
      http_port: http1.port,
      grpc_port: h2c.port,
      metrics_port: metricsServer.port,
      users: tokens.names.length,
      ...(oidc.issuer ? { oidc_issuer: oidc.issuer } : {}),
    },
    'web-bff started',
  );

  const metricsSrv = metricsServer;
  let stopping: Promise<void> | undefined;
  return {
    httpUrl: http1.url,
    grpcUrl: h2c.url,
    metricsUrl: metricsSrv.url,
    reloadTokens() {
      try {
        tokens = loadTokenStore(tokenSources);
        logger.info({ users: tokens.names.length }, 'bearer tokens reloaded');
      } catch (err) {
        logger.error({ err: err instanceof Error ? err.message : String(err) }, 'reloading bearer tokens failed; keeping the old ones');
      }
    },
    watchStats: () => ({ ...fanout.stats(), stallResets: watchdog.resets }),
    stop() {
      stopping ??= (async () => {
        health.shutdown();
        await Promise.all(listeners.map((l) => l.close(config.server.shutdownGrace)));
        watchdog.stop();
        reclaimer.stop();
        upstream.close();
        await fanout.close();
        await metricsSrv.close();
        await ownedTransport?.close();
        logger.info('web-bff stopped');
      })();
      return stopping;
    },
  };
}
