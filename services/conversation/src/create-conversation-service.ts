/**
 * The conversation service: owns Postgres, applies events, relays effects, recovers lost work,
 * and serves the internal API. `createConversationService(config, deps)` builds it; `start()` and
 * `stop()` run it; main.ts only reads the environment.
 */
import type pg from 'pg';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { QUEUE_CONVERSATION_EVENTS, health as healthPb } from '@bedrock/contracts';
import { createModelRegistry } from '@bedrock/contracts/models';
import { createTransport, type Consumer, type Transport } from '@bedrock/platform';
import {
  createHealth,
  createLogger,
  createMetrics,
  createReadiness,
  postgresCheck,
  redisCheck,
  registerHealth,
  readServicePeersFile,
  readServiceTokenFile,
  registerReflection,
  rpcMetricsInterceptor,
  serviceAuthInterceptor,
  startGrpcServer,
  startMetricsServer,
  startQueueDepthSampler,
  createSecretBox,
  parseSecretKey,
  type GrpcServer,
  type Logger,
  type MetricsServer,
  type TokenEntry,
} from '@bedrock/platform/server';
import { registerConversationApi, userOf } from './api/conversation-api.ts';
import { createPool } from './db/pool.ts';
import { createHistoryAnswers, registerHistoryApi, type HistoryAnswers } from './api/history-api.ts';
import { registerAdminApi } from './api/admin-api.ts';
import { registerIdentityApi } from './api/identity-api.ts';
import { LIMITS } from './api/input-limits.ts';
import type { ConversationConfig } from './config.ts';
import { DEFAULT_POLICY, type Policy } from './core/index.ts';
import { migrate } from './db/migrate.ts';
import { startEventConsumer } from './events/event-consumer.ts';
import { createApplier, type Applier } from './apply/applier.ts';
import { createOutboxPublisher, type OutboxPublisher } from './outbox/publisher.ts';
import { createRowPublisher } from './outbox/publish-rows.ts';
import { createOutboxRelay, type OutboxRelay } from './outbox/relay.ts';
import { createRecoverySweeper, type RecoverySweeper } from './recovery/sweeper.ts';
import { createWriteAccessProbe } from './workspaces/write-access.ts';
import { createSandboxProbe } from './recovery/sandbox-probe.ts';
import { createConversationStore, type ConversationStore } from './store/conversation-store.ts';
import { startRequestPruner } from './store/request-outcomes.ts';
import { createHistoryReads } from './store/history-reads.ts';
import { createIdentityStore } from './store/identity-store.ts';
import { createAuditStore } from './store/audit-store.ts';
import { createLimitsStore, hasBudget } from './spend/limits.ts';
import { createWorkspaceStore } from './store/workspace-store.ts';
import { createWorkspaceStorageClient, type WorkspaceStorage } from './workspaces/storage-client.ts';
import { createMcpRegistry } from './mcp/registry.ts';
import { createMcpStore } from './mcp/mcp-store.ts';
import { createMcpOAuth } from './mcp/oauth.ts';
import { parseOperatorServers } from './mcp/servers.ts';
import { registerMcpApi } from './api/mcp-api.ts';
import { createWorkspaces } from './workspaces/workspaces.ts';
import { createCheckpoints, type Checkpoints } from './checkpoints/checkpoints.ts';

export const SERVICE_NAME = 'conversation';

/** Parts a caller may supply instead of having them built from config (tests, the embedded mode). */
export interface ConversationServiceDeps {
  /** Default: a pool on `database.url` (ended on stop). */
  readonly pool?: pg.Pool;
  /** Default: built from the `transport` section (closed on stop). */
  readonly transport?: Transport;
  readonly logger?: Logger;
  /** Services allowed to call the internal API; default read from BEDROCK_SERVICE_PEERS_FILE (none: every call is refused). */
  readonly servicePeers?: readonly TokenEntry[];
  /** The clock spend and limits are counted by (UTC days, months, minutes); default the system clock. Tests move it. */
  readonly clock?: () => Date;
  /** This service's own token for the tool-runners' workspace storage; default read from BEDROCK_SERVICE_TOKEN_FILE. */
  readonly serviceToken?: string;
  /**
   * Host paths are on because one person uses this installation (the embedded product): no user
   * may be added (AddUser, a first OpenID Connect sign-in) while they are.
   */
  readonly hostPathsOneUser?: boolean;
  /** The apply benchmark's "before": one statement per event (StoreOptions.groupCommit). */
  readonly groupCommit?: false;
}

export interface ConversationServiceInstance {
  /** Migrates (unless turned off), starts applying events, relaying and recovering, then serves the API. */
  start(): Promise<void>;
  /** Stops taking new work; running events finish within the shutdown grace or go back to the queue. */
  stop(): Promise<void>;
  /** After start: the bound gRPC port and base URL, and the metrics server's URL. */
  readonly grpcUrl: string;
  readonly grpcPort: number;
  readonly metricsUrl: string;
  /** After start: the parts, for embedding and tests. */
  readonly store: ConversationStore;
  readonly relay: OutboxRelay;
  readonly applier: Applier;
  /** Publishes what the applier committed; `stop()` it to play a replica that dies after its commits. */
  readonly publisher: OutboxPublisher;
  readonly transport: Transport;
  readonly sweeper: RecoverySweeper;
  /** The histories and MCP tools the gateway reads, for a gateway in this process (the embedded mode). */
  readonly history: HistoryAnswers;
}

/** What a started service holds. */
interface Running {
  readonly pool: pg.Pool;
  readonly transport: Transport;
  readonly store: ConversationStore;
  readonly relay: OutboxRelay;
  readonly applier: Applier;
  readonly publisher: OutboxPublisher;
  readonly sweeper: RecoverySweeper;
  readonly consumer: Consumer;
  readonly depthSampler: { stop(): void };
  readonly server: GrpcServer;
  readonly metricsServer: MetricsServer;
  readonly pruner: { stop(): Promise<void> };
  readonly storage: WorkspaceStorage | undefined;
  readonly mcp: { close(): void };
  readonly history: HistoryAnswers;
}

/** A secret of this deployment, made by the first replica that asks (migration 015). */
async function deploymentSecret(pool: pg.Pool, name: string): Promise<string> {
  await pool.query('INSERT INTO service_secrets (name, value) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING', [
    name,
    randomBytes(32).toString('hex'),
  ]);
  const { rows } = await pool.query<{ value: string }>('SELECT value FROM service_secrets WHERE name = $1', [name]);
  return rows[0]!.value;
}

export function createConversationService(config: ConversationConfig, deps: ConversationServiceDeps = {}): ConversationServiceInstance {
  const logger = deps.logger ?? createLogger({ service: SERVICE_NAME, level: config.log.level });
  const metrics = createMetrics(SERVICE_NAME);
  const health = createHealth();
  health.set('', 'NOT_SERVING');
  const ownsPool = !deps.pool;
  const ownsTransport = !deps.transport;
  let running: Running | undefined;
  let started = false;
  let stopping: Promise<void> | undefined;

  const get = <K extends keyof Running>(key: K): Running[K] => {
    if (!running) throw new Error('conversation service not started');
    return running[key];
  };

  async function start(): Promise<void> {
    if (started) throw new Error('conversation service already started');
    started = true;
    // Read first: a missing or malformed peers file stops the service before it touches anything.
    const servicePeers = deps.servicePeers ?? (config.server.servicePeersFile ? readServicePeersFile(config.server.servicePeersFile) : []);
    // One host: a plain pg.Pool. Several: every connection goes to the read-write one (db/pool.ts).
    const pool =
      deps.pool ??
      createPool({
        connectionString: config.database.url,
        max: config.database.poolSize,
        onPrimary: ({ host, previous }) =>
          previous ? logger.warn({ host, previous }, 'Postgres primary moved') : logger.info({ host }, 'Postgres primary found'),
      });
    pool.on('error', (err) => logger.error({ err }, 'idle Postgres connection failed'));
    const transport = deps.transport ?? createTransport(config.transport, logger);

    const policy: Policy = {
      ...DEFAULT_POLICY,
      retryBaseDelayMs: config.turns.llmRetryBase,
      cancelAckTimeoutMs: config.turns.cancelAckTimeout,
      subAgentTimeoutMs: config.turns.subAgentTimeout,
    };
    const models = createModelRegistry(config.models.registry ?? null);
    const store = createConversationStore({
      pool,
      groupCommit: deps.groupCommit === false ? false : { onBatch: (writes) => metrics.writeBatchSize.observe(writes) },
    });
    const onPublished = (kind: string, lagMs: number) => metrics.queueWaitSeconds.observe({ queue: `outbox:${kind}` }, lagMs / 1000);
    const publishRows = createRowPublisher(transport, onPublished);
    const relay = createOutboxRelay({ pool, publishRows, logger, pollIntervalMs: config.outbox.pollInterval });
    const publisher = createOutboxPublisher({ pool, publishRows, relay, logger, markSent: (ids) => store.markSent(ids) });
    const defaultLimits = {
      dailyBudgetMicros: config.limits.dailyBudget,
      monthlyBudgetMicros: config.limits.monthlyBudget,
      maxBusyConversations: config.limits.maxBusyConversations,
      messagesPerMinute: config.limits.messagesPerMinute,
      maxConversations: config.limits.maxConversations,
    };
    const limits = createLimitsStore({ pool, defaults: defaultLimits });
    // The owner reference's key: the operator's file, else the deployment's own (made once, after
    // the migrations, shared by every replica through Postgres).
    let ownerRefSecret = config.models.ownerRefSecretFile ? readFileSync(config.models.ownerRefSecretFile, 'utf8').trim() : undefined;
    // MCP servers: the operator's and each user's; their tools are listed by a tool-runner.
    const mcp = createMcpRegistry({
      operator: config.mcp.servers ? parseOperatorServers(config.mcp.servers) : [],
      store: createMcpStore(pool),
      ...(config.mcp.tokenKey
        ? {
            oauth: createMcpOAuth({
              pool,
              box: createSecretBox(parseSecretKey(config.mcp.tokenKey)),
              logger: logger.child({ component: 'mcp-oauth' }),
            }),
          }
        : {}),
      defaultTimeoutMs: config.mcp.timeout,
      ...(config.workspaces.storageUrls ? { runnerUrls: config.workspaces.storageUrls } : {}),
      serviceToken:
        deps.serviceToken ?? (config.server.serviceTokenFile ? readServiceTokenFile(config.server.serviceTokenFile) : undefined),
      listTimeoutMs: config.mcp.listTimeout,
      logger,
    });
    // Made below with the workspace storage; the applier asks it before a turn's first tool.
    const late: { checkpoints?: Checkpoints } = {};
    const applier = createApplier({
      mcpServers: (ownerId, conversationId) => mcp.specsFor(ownerId, conversationId),
      store,
      publisher,
      models,
      policy,
      maxOutputTokens: config.models.maxOutputTokens,
      ownerRefSecret: () => ownerRefSecret,
      logger,
      ...(deps.clock ? { now: deps.clock } : {}),
      reserve: (request, at, client) => limits.reserve(request, at, client),
      budgetCheckedOnWrite: !hasBudget(defaultLimits),
      beforeTools: (record) => late.checkpoints?.beforeTools(record) ?? Promise.resolve(),
    });
    const sandboxAvailable = createSandboxProbe(config.conversations.sandbox, transport.runners);
    const ws = config.workspaces;
    const storage = ws.storageUrls
      ? createWorkspaceStorageClient({
          targets: ws.storageUrls,
          serviceToken:
            deps.serviceToken ?? (config.server.serviceTokenFile ? readServiceTokenFile(config.server.serviceTokenFile) : undefined),
          prepareTimeoutMs: ws.prepareTimeout,
          timeoutMs: 30_000,
          logger,
        })
      : undefined;
    const workspaces = createWorkspaces({
      store: createWorkspaceStore(pool),
      storage,
      toolUids: ws.toolUids,
      quotaBytes: ws.quota,
      quotaInodes: ws.maxFiles,
      maxPerUser: ws.maxPerUser,
      hostPaths: ws.hostPaths === 'on',
      logger,
    });
    const checkpoints = storage
      ? createCheckpoints({
          pool,
          store,
          storage,
          workspaces,
          settings: { maxCount: ws.checkpointMaxCount, maxBytes: ws.checkpointMaxBytes },
          logger,
          publisher,
        })
      : undefined;
    if (checkpoints) late.checkpoints = checkpoints;
    logger.info(
      { host_paths: ws.hostPaths, workspace_storage: ws.storageUrls ?? null },
      ws.hostPaths === 'on'
        ? 'host paths are on: conversations may use any directory of this host (one user only)'
        : 'conversations run in workspaces only',
    );
    const recordTransition = (state: string, event: string, result: string) => metrics.transitionsTotal.inc({ state, event, result });

    // What the llm-gateway reads: over gRPC (the server below), or directly by a gateway in this process.
    const history = createHistoryAnswers({
      reads: createHistoryReads(pool),
      async mcpTools(id) {
        const record = await store.get(id);
        if (!record) return null;
        return mcp.toolsFor({ id, ownerId: record.ownerId, cwd: record.cwd, mode: record.state.mode, workspace: record.workspace });
      },
    });
    let consumer: Consumer | null = null;
    let depthSampler: { stop(): void } | null = null;
    let server: GrpcServer | null = null;
    let metricsServer: MetricsServer | null = null;
    const sweeper = createRecoverySweeper({
      store,
      applier,
      queues: transport.queues,
      runs: transport.runs,
      logger,
      intervalMs: config.recovery.interval,
      staleAfterMs: config.recovery.staleAfter,
    });
    try {
      if (config.database.migrate) {
        const applied = await migrate(pool);
        if (applied.length) logger.info({ applied }, 'database migrated');
      }
      ownerRefSecret ??= await deploymentSecret(pool, 'owner-ref');
      relay.start();
      consumer = startEventConsumer({
        transport,
        store,
        applier,
        logger,
        metrics,
        concurrency: config.events.concurrency,
        onApplied: recordTransition,
      });
      sweeper.start();
      depthSampler = startQueueDepthSampler({
        queues: transport.queues,
        names: [QUEUE_CONVERSATION_EVENTS],
        metrics,
        onError: (err) => logger.debug({ err }, 'queue depth sample failed'),
      });
      server = await startGrpcServer({
        host: config.server.host,
        port: config.server.grpcPort,
        logger,
        readMaxBytes: LIMITS.maxRequestBytes,
        // Only services listed as peers get past this; the user header counts only from web-bff.
        interceptors: [rpcMetricsInterceptor(metrics), serviceAuthInterceptor({ peers: servicePeers, logger })],
        routes: (router) => {
          registerConversationApi(router, {
            store,
            applier,
            streams: transport.streams,
            leftovers: transport,
            logger,
            policy,
            defaultModel: config.models.default,
            models,
            defaultThinking: config.conversations.defaultThinking,
            allowedServerTools: config.conversations.serverTools ?? [],
            checkCwd: config.conversations.checkCwd,
            imagePixelsPerMessage: config.limits.imagePixelsPerMessage,
            workspaces,
            ...(checkpoints ? { checkpoints } : {}),
            sandboxAvailable,
            ...(storage ? { writeAccess: createWriteAccessProbe(storage, logger) } : {}),
            onApplied: recordTransition,
            limits,
            ...(deps.clock ? { now: deps.clock } : {}),
          });
          // The llm-gateway fetches each request's history here (claim-check jobs).
          registerHistoryApi(router, history);
          registerMcpApi(router, {
            registry: mcp,
            userOf,
            ownsConversation: async (user, id) => (await store.get(id))?.ownerId === user,
          });
          // Users and tokens: web-bff verifies bearer tokens here, and forwards admins' calls (the audit log's reads too).
          const identities = createIdentityStore(pool);
          registerIdentityApi(router, { identities, oneUser: config.workspaces.hostPaths === 'on' && (deps.hostPathsOneUser ?? false) });
          registerAdminApi(router, {
            identities,
            audit: createAuditStore(pool),
            logger,
            deletion: { store, streams: transport.streams, leftovers: transport, logger },
            workspaces,
            oneUser: config.workspaces.hostPaths === 'on' && (deps.hostPathsOneUser ?? false),
            limits,
            ...(deps.clock ? { now: deps.clock } : {}),
          });
          registerHealth(router, health);
          // An internal port: reflection lists health and itself only, never the internal API
          // (docs/security.md, boundary 2). Operators use the protos (`buf curl --schema proto`).
          registerReflection(router, [healthPb.Health]);
        },
      });
      // Ready while Postgres and (with the redis transport) Redis answer; web-bff and the
      // gateway check this process's gRPC health, which these do not change (no cascade).
      const readiness = createReadiness({ checks: [postgresCheck(pool), ...(transport.ping ? [redisCheck(() => transport)] : [])] });
      metricsServer = await startMetricsServer({
        host: config.server.host,
        port: config.server.metricsPort,
        registry: metrics.registry,
        health,
        readiness,
      });
    } catch (err) {
      depthSampler?.stop();
      await sweeper.stop();
      await consumer?.close(0);
      await relay.stop();
      await server?.close(0);
      if (ownsTransport) await transport.close();
      if (ownsPool) await pool.end();
      throw err;
    }
    // Outcomes of requests with a client request id are kept BEDROCK_REQUEST_ID_RETENTION.
    const pruner = startRequestPruner({
      prune: store.pruneRequests,
      retentionMs: config.requestIds.retention,
      onError: (err) => logger.warn({ err }, 'pruning request outcomes failed; will retry'),
    });
    running = {
      pool,
      transport,
      store,
      relay,
      applier,
      publisher,
      sweeper,
      consumer,
      depthSampler,
      server,
      metricsServer,
      pruner,
      storage,
      mcp,
      history,
    };
    health.set('', 'SERVING');
    health.set('bedrock.v1.ConversationService', 'SERVING');
    logger.info({ grpc_port: server.port, metrics_port: metricsServer.port }, 'conversation service started');
  }

  async function shutdown(r: Running): Promise<void> {
    health.set('', 'NOT_SERVING');
    const grace = config.server.shutdownGrace;
    // Stop taking new work first; running events finish or go back to the queue.
    await r.consumer.close(grace);
    r.depthSampler.stop();
    await r.sweeper.stop();
    await r.server.close(grace);
    await r.pruner.stop();
    await r.applier.drain();
    await r.relay.stop();
    await r.metricsServer.close();
    r.storage?.close();
    r.mcp.close();
    if (ownsTransport) await r.transport.close();
    if (ownsPool) await r.pool.end();
    logger.info('conversation service stopped');
  }

  return {
    start,
    stop() {
      // Before start (or after a failed start) there is nothing to stop; a second stop waits for the first.
      if (!running) return Promise.resolve();
      stopping ??= shutdown(running);
      return stopping;
    },
    get grpcUrl() {
      return get('server').url;
    },
    get grpcPort() {
      return get('server').port;
    },
    get metricsUrl() {
      return get('metricsServer').url;
    },
    get store() {
      return get('store');
    },
    get relay() {
      return get('relay');
    },
    get applier() {
      return get('applier');
    },
    get publisher() {
      return get('publisher');
    },
    get transport() {
      return get('transport');
    },
    get sweeper() {
      return get('sweeper');
    },
    get history() {
      return get('history');
    },
  };
}
