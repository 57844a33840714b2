/**
 * The LLM gateway service: a worker on `llm-requests` that streams each request from the
 * model provider through the Anthropic SDK, plus /metrics, /healthz and /readyz. Without an
 * API key it starts the local Messages API server in-process and answers with the offline
 * demo model through the very same SDK path.
 */
import Anthropic from '@anthropic-ai/sdk';
import { createTransport } from '@bedrock/platform';
import type { Transport } from '@bedrock/platform';
import {
  createHealth,
  createLogger,
  createMetrics,
  createReadiness,
  readServiceTokenFile,
  redisCheck,
  startMetricsServer,
  type DependencyCheck,
} from '@bedrock/platform/server';
import type { Logger, Metrics, MetricsServer } from '@bedrock/platform/server';
import { OFFLINE_SIGNING_KEY, offlineModelResponder, startMessagesApiServer } from '@bedrock/offline-model';
import type { MessagesApiServer } from '@bedrock/offline-model';
import { defaultModelOf, imageLimitsOf, modelRegistryOf, rateLimitOf, type LlmGatewayConfig } from './config.ts';
import { createConversationHistorySource, withDeadline, type HistorySource } from './history-source.ts';
import { ImageCache, RefusedImages } from './images.ts';
import { startLlmWorker } from './llm-worker.ts';
import type { LlmWorker, LlmWorkerOptions } from './llm-worker.ts';
import { warmUpAbortPath } from './warm-up.ts';
import { livenessFetch } from './liveness-fetch.ts';

export interface LlmGatewayDeps {
  /** Queues, streams and cancel bus; default built from the config (and then closed on stop). */
  readonly transport?: Transport;
  /**
   * Where each job's history is fetched; default a client of the conversation service
   * (BEDROCK_CONVERSATION_URL, presenting BEDROCK_SERVICE_TOKEN_FILE), closed on stop. The
   * embedded mode passes its conversation service's answers (no gRPC call); either way a read
   * is bounded by BEDROCK_HISTORY_TIMEOUT.
   */
  readonly history?: HistorySource;
  /** The gateway's service token, instead of reading BEDROCK_SERVICE_TOKEN_FILE (the embedded mode). */
  readonly serviceToken?: string;
  readonly logger?: Logger;
  readonly metrics?: Metrics;
  /** Start the /metrics server. Default true. */
  readonly serveMetrics?: boolean;
  /** Test and benchmark hooks, passed to the worker. */
  readonly onDeltaAppended?: LlmWorkerOptions['onDeltaAppended'];
  readonly onFirstEvent?: LlmWorkerOptions['onFirstEvent'];
}

export interface LlmGateway {
  start(): Promise<void>;
  /** Stops taking requests; running ones get the shutdown grace, then are handed back to the queue. */
  stop(): Promise<void>;
  /** After start: whether answers come from the offline demo model. */
  readonly offline: boolean;
  /** After start: the provider base URL in use (the local server's when offline). */
  readonly providerUrl: string;
  readonly metricsUrl: string;
  /** Requests being streamed now. */
  readonly inFlight: number;
}

export function createLlmGateway(config: LlmGatewayConfig, deps: LlmGatewayDeps = {}): LlmGateway {
  const logger = deps.logger ?? createLogger({ service: 'llm-gateway', level: config.log.level });
  const metrics = deps.metrics ?? createMetrics('llm-gateway');
  const health = createHealth({ overall: 'NOT_SERVING' });
  const { provider } = config;
  const offline = !provider.apiKey;
  const defaultModel = defaultModelOf(provider);
  const limiter = rateLimitOf(config.jobs);
  let transport: Transport | undefined;
  let ownsTransport = false;
  let localServer: MessagesApiServer | undefined;
  let metricsServer: MetricsServer | undefined;
  let worker: LlmWorker | undefined;
  let history: HistorySource | undefined;
  let providerUrl = '';

  return {
    get offline() {
      return offline;
    },
    get providerUrl() {
      return providerUrl;
    },
    get metricsUrl() {
      return metricsServer?.url ?? '';
    },
    get inFlight() {
      return worker?.inFlight ?? 0;
    },
    async start() {
      if (offline) {
        // A fixed signing key: thinking blocks stored by an earlier run or signed by another
        // replica's offline server stay valid.
        localServer = await startMessagesApiServer({
          fallback: offlineModelResponder({ eventDelayMs: config.offline.eventDelay }),
          keepRequests: 0,
          signingKey: OFFLINE_SIGNING_KEY,
        });
        providerUrl = localServer.url;
        logger.warn(
          { provider_url: providerUrl },
          'ANTHROPIC_API_KEY is not set: answering with the offline demo model (not a real language model)',
        );
      } else {
        providerUrl = provider.baseUrl?.replace(/\/$/, '') ?? 'https://api.anthropic.com';
      }
      const client = new Anthropic({
        apiKey: provider.apiKey ?? 'offline-demo',
        baseURL: providerUrl,
        // The state machine owns retries so the user sees them (REQ-BED-006).
        maxRetries: 0,
        timeout: provider.requestTimeout,
        // Pings keep a response alive though the SDK hides them (see liveness-fetch.ts).
        fetch: livenessFetch(),
        logger: {
          debug: (msg, ...rest) => logger.debug({ sdk: rest }, msg),
          info: (msg, ...rest) => logger.debug({ sdk: rest }, msg),
          warn: (msg, ...rest) => logger.warn({ sdk: rest }, msg),
          error: (msg, ...rest) => logger.warn({ sdk: rest }, msg),
        },
      });
      try {
        await warmUpAbortPath(client);
      } catch (err) {
        logger.warn({ err }, 'warm-up of the cancel path failed (the first cancel may be slower)');
      }
      if (deps.transport) transport = deps.transport;
      else {
        ownsTransport = true;
        transport = createTransport(config.transport, logger);
      }
      // A source in this process is bounded as the gRPC client is.
      if (deps.history) history = withDeadline(deps.history, config.history.timeout);
      else {
        // Read at start: a missing or unreadable token file stops the gateway with its path named.
        const serviceToken =
          deps.serviceToken ?? (config.history.serviceTokenFile ? readServiceTokenFile(config.history.serviceTokenFile) : undefined);
        if (!serviceToken)
          logger.warn('no service token (BEDROCK_SERVICE_TOKEN_FILE): the conversation service will refuse every history fetch');
        history = createConversationHistorySource({
          targets: config.history.conversationUrls,
          serviceToken,
          timeoutMs: config.history.timeout,
          resolveIntervalMs: config.history.resolveInterval,
          logger,
        });
      }
      worker = await startLlmWorker({
        transport,
        client,
        history,
        runOptions: {
          registry: modelRegistryOf(provider),
          defaultModel,
          defaultMaxTokens: provider.defaultMaxTokens,
          imageLimits: imageLimitsOf(config.images),
          cacheTtls: config.cache,
          mcpDefer: config.mcpDefer,
          imageCache: new ImageCache(),
          refusedImages: new RefusedImages(),
          requestTimeoutMs: provider.requestTimeout,
          idleTimeoutMs: provider.idleTimeout,
        },
        concurrency: config.jobs.concurrency,
        ...(limiter ? { limiter } : {}),
        cancelMemoryMs: config.jobs.cancelMemory,
        logger,
        metrics,
        ...(deps.onDeltaAppended ? { onDeltaAppended: deps.onDeltaAppended } : {}),
        ...(deps.onFirstEvent ? { onFirstEvent: deps.onFirstEvent } : {}),
      });
      if (deps.serveMetrics !== false) {
        // Ready while Redis (the redis transport) and the conversation service (histories) answer.
        const checks: DependencyCheck[] = [];
        if (transport.ping) checks.push(redisCheck(() => transport));
        const ready = history.ready;
        if (ready) checks.push({ name: 'conversation', check: ready });
        metricsServer = await startMetricsServer({
          port: config.server.metricsPort,
          host: config.server.host,
          registry: metrics.registry,
          health,
          readiness: createReadiness({ checks }),
        });
      }
      health.set('', 'SERVING');
      logger.info(
        {
          offline,
          provider_url: providerUrl,
          conversation_urls: deps.history ? undefined : config.history.conversationUrls,
          transport: config.transport.kind,
          concurrency: config.jobs.concurrency,
          limiter: limiter ?? null,
          default_model: defaultModel,
          metrics_url: metricsServer?.url,
        },
        'llm-gateway started',
      );
    },
    async stop() {
      health.shutdown();
      await worker?.close(config.server.shutdownGrace);
      if (ownsTransport) await transport?.close();
      if (!deps.history) history?.close();
      await metricsServer?.close();
      await localServer?.close();
      logger.info('llm-gateway stopped');
    },
  };
}
