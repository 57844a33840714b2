/**
 * The conversation service: owns Postgres, applies events, relays effects, recovers lost work,
 * and serves the internal API. `start()` and `stop()`; main.ts only reads the environment.
 */
import { loadConfig, transportSection } from '@bedrock/platform/config';
import pg from 'pg';
import { ConversationHistoryService, ConversationService, QUEUE_CONVERSATION_EVENTS } from '@bedrock/contracts';
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
  registerReflection,
  rpcMetricsInterceptor,
  serviceAuthInterceptor,
  startGrpcServer,
  startMetricsServer,
  startQueueDepthSampler,
  type GrpcServer,
  type Logger,
  type MetricsServer,
  type TokenEntry,
} from '@bedrock/platform/server';
import { registerConversationApi } from './api/conversation-api.ts';
import { registerHistoryApi } from './api/history-api.ts';
import { LIMITS } from './api/limits.ts';
import type { ConversationConfig } from './config.ts';
import { DEFAULT_POLICY, type Policy } from './core/index.ts';
import { migrate } from './db/migrate.ts';
import { startEventConsumer } from './events/event-consumer.ts';
import { createApplier, type Applier } from './apply/applier.ts';
import { createOutboxPublisher, type OutboxPublisher } from './outbox/publisher.ts';
import { createRowPublisher } from './outbox/publish-rows.ts';
import { createOutboxRelay, type OutboxRelay } from './outbox/relay.ts';
import { createRecoverySweeper, type RecoverySweeper } from './recovery/sweeper.ts';
import { createSandboxProbe } from './recovery/sandbox-probe.ts';
import { createConversationStore, type ConversationStore } from './store/conversation-store.ts';
import { startRequestPruner } from './store/request-outcomes.ts';
import { createHistoryReads } from './store/history-reads.ts';

export const SERVICE_NAME = 'conversation';

/** Parts a caller may supply instead of having them built from config (tests, the embedded mode). */
export interface ConversationServiceDeps {
  readonly pool?: pg.Pool;
  readonly transport?: Transport;
  readonly logger?: Logger;
  /** Services allowed to call the internal API; default read from BEDROCK_SERVICE_PEERS_FILE (none: every call is refused). */
  readonly servicePeers?: readonly TokenEntry[];
}

export interface RunningConversationService {
  readonly grpcUrl: string;
  readonly grpcPort: number;
  readonly metricsUrl: string;
  readonly store: ConversationStore;
  readonly relay: OutboxRelay;
  readonly applier: Applier;
  /** Publishes what the applier committed; `stop()` it to play a replica that dies after its commits. */
  readonly publisher: OutboxPublisher;
  readonly transport: Transport;
  readonly sweeper: RecoverySweeper;
  stop(): Promise<void>;
}

export async function startConversationService(
  config: ConversationConfig,
  deps: ConversationServiceDeps = {},
): Promise<RunningConversationService> {
  const logger = deps.logger ?? createLogger({ service: SERVICE_NAME, level: config.logLevel });
  // Read first: a missing or malformed peers file stops the service before it touches anything.
  const servicePeers = deps.servicePeers ?? (config.servicePeersFile ? readServicePeersFile(config.servicePeersFile) : []);
  const metrics = createMetrics(SERVICE_NAME);
  const health = createHealth();
  health.set('', 'NOT_SERVING');
  const ownsPool = !deps.pool;
  const pool = deps.pool ?? new pg.Pool({ connectionString: config.databaseUrl, max: config.dbPoolSize });
  pool.on('error', (err) => logger.error({ err }, 'idle Postgres connection failed'));
  const ownsTransport = !deps.transport;
  const transport = deps.transport ?? createTransport(loadConfig(transportSection, process.env, { kind: config.transport }), logger);

  if (config.runMigrations) {
    const applied = await migrate(pool);
    if (applied.length) logger.info({ applied }, 'database migrated');
  }

  const policy: Policy = {
    ...DEFAULT_POLICY,
    retryBaseDelayMs: config.llmRetryBaseMs,
    cancelAckTimeoutMs: config.cancelAckTimeoutMs,
    subAgentTimeoutMs: config.subAgentTimeoutMs,
  };
  const models = createModelRegistry(config.models ?? null);
  const store = createConversationStore({ pool });
  const onPublished = (kind: string, lagMs: number) => metrics.queueWaitSeconds.observe({ queue: `outbox:${kind}` }, lagMs / 1000);
  const publishRows = createRowPublisher(transport, onPublished);
  const relay = createOutboxRelay({ pool, publishRows, logger, pollIntervalMs: config.outboxPollMs });
  const publisher = createOutboxPublisher({ pool, publishRows, relay, logger });
  const applier = createApplier({ store, publisher, models, policy, maxOutputTokens: config.maxOutputTokens, logger });
  const sandboxAvailable = createSandboxProbe(config.sandbox, transport.runners);
  const recordTransition = (state: string, event: string, result: string) => metrics.transitionsTotal.inc({ state, event, result });

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
    intervalMs: config.recoveryIntervalMs,
    staleAfterMs: config.recoveryStaleMs,
  });
  try {
    relay.start();
    consumer = startEventConsumer({
      transport,
      store,
      applier,
      logger,
      concurrency: config.eventConcurrency,
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
      host: config.host,
      port: config.grpcPort,
      logger,
      readMaxBytes: LIMITS.maxRequestBytes,
      // Only services listed as peers get past this; the user header counts only from web-bff.
      interceptors: [rpcMetricsInterceptor(metrics), serviceAuthInterceptor({ peers: servicePeers, logger })],
      routes: (router) => {
        registerConversationApi(router, {
          store,
          applier,
          streams: transport.streams,
          logger,
          policy,
          defaultModel: config.defaultModel,
          defaultThinking: config.defaultThinking,
          allowedServerTools: config.serverTools ?? [],
          checkCwd: config.checkCwd,
          sandboxAvailable,
          onApplied: recordTransition,
        });
        // The llm-gateway fetches each request's history here (claim-check jobs).
        registerHistoryApi(router, { reads: createHistoryReads(pool), logger });
        registerHealth(router, health);
        registerReflection(router, [ConversationService, ConversationHistoryService]);
      },
    });
    // Ready while Postgres and (with the redis transport) Redis answer; web-bff and the
    // gateway check this process's gRPC health, which these do not change (no cascade).
    const readiness = createReadiness({ checks: [postgresCheck(pool), ...(transport.ping ? [redisCheck(() => transport)] : [])] });
    metricsServer = await startMetricsServer({
      host: config.host,
      port: config.metricsPort,
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
    retentionMs: config.requestIdRetentionMs,
    onError: (err) => logger.warn({ err }, 'pruning request outcomes failed; will retry'),
  });
  health.set('', 'SERVING');
  health.set('bedrock.v1.ConversationService', 'SERVING');
  logger.info({ grpc_port: server.port, metrics_port: metricsServer.port }, 'conversation service started');

  const grpc = server;
  const metricsSrv = metricsServer;
  const eventConsumer = consumer;
  return {
    grpcUrl: grpc.url,
    grpcPort: grpc.port,
    metricsUrl: metricsSrv.url,
    store,
    relay,
    applier,
    publisher,
    transport,
    sweeper,
    async stop() {
      health.set('', 'NOT_SERVING');
      // Stop taking new work first; running events finish or go back to the queue.
      await eventConsumer.close(config.shutdownGraceMs);
      depthSampler?.stop();
      await sweeper.stop();
      await grpc.close(config.shutdownGraceMs);
      await pruner.stop();
      await applier.drain();
      await relay.stop();
      await metricsSrv.close();
      if (ownsTransport) await transport.close();
      if (ownsPool) await pool.end();
      logger.info('conversation service stopped');
    },
  };
}
