/**
 * The whole product in one process on its embedded defaults (`npm start`): PostgreSQL embedded (PGlite,
 * or DATABASE_URL's server), the in-process transports, a tool-runner with the kernel sandbox when this
 * machine has it, the gateway (the offline demo model unless ANTHROPIC_API_KEY is set) and web-bff with
 * the web UI. Data and the local user's token live in BEDROCK_DATA_DIR; the services' own credentials
 * are made in memory at each start. docs/embedded.md.
 */
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { createPool } from '@bedrock/conversation/db-pool';
import { createMemoryTransport } from '@bedrock/platform';
import { createLogger, ensureSecretKeyFile, generateServiceCredentials, startTracing, type Logger } from '@bedrock/platform/server';
import { createConversationService, readConversationConfig } from '@bedrock/conversation';
import { lockDataDir } from './data-dir-lock.ts';
import { startEmbeddedPostgres } from './embedded-postgres.ts';
import { createLlmGateway, readLlmGatewayConfig } from '@bedrock/llm-gateway';
import { createToolRunner, readToolRunnerConfig } from '@bedrock/tool-runner';
import { createTokenStore, createWebBff, generateToken, hashToken, parseTokenEntries, readWebBffConfig } from '@bedrock/web-bff';

/** Default data directory: BEDROCK_DATA_DIR, else ~/.bedrock. */
export function defaultDataDir(env: Record<string, string | undefined> = process.env): string {
  return env.BEDROCK_DATA_DIR || join(homedir(), '.bedrock');
}

/** How long web-bff's listeners drain at a stop before open watches end (BEDROCK_SHUTDOWN_GRACE unset). */
export const EMBEDDED_SHUTDOWN_GRACE_MS = 500;

/** The local user of the embedded default. */
export const LOCAL_USER = 'local';

/** Reads the local user's token from the data directory, creating it (mode 0600) on first start. */
export function localToken(dataDir: string): string {
  const file = join(dataDir, 'token');
  if (existsSync(file)) {
    const token = readFileSync(file, 'utf8').trim();
    if (token) return token;
  }
  const token = generateToken();
  writeFileSync(file, `${token}\n`, { mode: 0o600 });
  chmodSync(file, 0o600);
  return token;
}

export interface EmbeddedOptions {
  /** Environment the services read their settings from. Default process.env. */
  readonly env?: Record<string, string | undefined>;
  readonly logger?: Logger;
}

export interface RunningEmbedded {
  readonly dataDir: string;
  readonly httpUrl: string;
  readonly grpcUrl: string;
  readonly token: string;
  readonly offline: boolean;
  /** The internal gRPC ports (loopback, ephemeral): tools are denied them. */
  readonly internalPorts: Readonly<Record<'conversation' | 'tool-runner', number>>;
  /** One line: who tools run as, or why they cannot be given their own user here. */
  readonly toolIsolation: string;
  /** Conversations may use host paths (BEDROCK_HOST_PATHS, on by default here: one user). */
  readonly hostPaths: boolean;
  stop(): Promise<void>;
}

export async function startEmbedded(options: EmbeddedOptions = {}): Promise<RunningEmbedded> {
  const env = options.env ?? process.env;
  const dataDir = defaultDataDir(env);
  mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  const logger = options.logger ?? createLogger({ service: 'bedrock', level: (env.LOG_LEVEL as 'info') || 'warn' });
  // Before anything opens the data: one process per data directory.
  const unlock = await lockDataDir(dataDir, (err) =>
    logger.error({ err, data_dir: dataDir }, 'the lock on the data directory was lost: another process may now open it; stop this one'),
  );
  const token = localToken(dataDir);
  const offline = !env.ANTHROPIC_API_KEY;
  // One process: each service gets typed settings over the user's environment; internal ports are
  // ephemeral on loopback, so only the public ones need to be free.
  // Internal ports still answer only the services: fresh tokens per start, kept in memory. (The
  // gateway calls nothing: it reads histories from the conversation service in this process.)
  const services = generateServiceCredentials(['conversation', 'tool-runner', 'web-bff']);
  // The key of users' MCP logins (tokens encrypted at rest): created once in the data directory.
  const mcpTokenKey = env.BEDROCK_MCP_TOKEN_KEY ? undefined : ensureSecretKeyFile(join(dataDir, 'mcp-token.key'));
  const mcp = mcpTokenKey ? { mcp: { tokenKey: mcpTokenKey } } : {};

  const stops: (() => Promise<void>)[] = [unlock];
  const stopAll = async () => {
    for (const stop of stops.reverse()) await stop().catch((err: unknown) => logger.warn({ err }, 'stop failed'));
  };
  // One process, one tracing SDK for the four services (OTEL_* variables; off without an endpoint).
  const tracing = await startTracing({ serviceName: 'bedrock', env });
  stops.push(() => tracing.shutdown());
  try {
    const postgres = env.DATABASE_URL
      ? // One host: a plain pg.Pool; several: it follows the read-write one (conversation.md, "Postgres failover").
        { pool: createPool({ connectionString: env.DATABASE_URL, max: 10 }), stop: async () => undefined }
      : await startEmbeddedPostgres(join(dataDir, 'postgres'));
    stops.push(async () => {
      await postgres.stop();
      if (env.DATABASE_URL) await postgres.pool.end();
    });
    const transport = createMemoryTransport({ onError: (err) => logger.warn({ err }, 'transport error') });
    stops.push(() => transport.close());

    // The runner first, so the conversation service sees its sandbox report.
    // One local user: tools run as the owner of the working directory (never root: nobody then),
    // unless BEDROCK_TOOL_UID says otherwise.
    const runnerConfig = readToolRunnerConfig(env, {
      transport: { kind: 'memory' },
      server: { grpcPort: 0, metricsPort: 0, host: '127.0.0.1' },
      runner: { id: 'embedded' },
      ...mcp,
      ...(env.BEDROCK_WORKSPACE_ROOT ? {} : { workspaces: { root: join(dataDir, 'workspaces') } }),
      ...(env.BEDROCK_TOOL_UID ? {} : { sandbox: { toolUid: 'owner' as const } }),
      // Workspaces live in the data directory unless BEDROCK_WORKSPACE_ROOT says otherwise.
      ...(env.BEDROCK_WORKSPACE_ROOT ? {} : { workspaces: { root: join(dataDir, 'workspaces') } }),
    });
    const runner = createToolRunner(runnerConfig, {
      transport,
      logger: logger.child({ component: 'tool-runner' }),
      servicePeers: services.peers,
    });
    await runner.start();
    stops.push(() => runner.stop());

    const conversationConfig = readConversationConfig(env, {
      transport: { kind: 'memory' },
      server: { grpcPort: 0, metricsPort: 0, host: '127.0.0.1' },
      // Without an API key the offline demo model answers, unless BEDROCK_DEFAULT_MODEL names one.
      models: { default: offline && !env.BEDROCK_DEFAULT_MODEL ? 'bedrock-offline' : undefined },
      ...mcp,
      // One person on their own machine: host paths on (until a second user is wanted), and
      // workspaces on this process's runner.
      workspaces: { storageUrls: [runner.grpcUrl], ...(env.BEDROCK_HOST_PATHS ? {} : { hostPaths: 'on' as const }) },
    });
    const conversation = createConversationService(conversationConfig, {
      pool: postgres.pool,
      transport,
      logger: logger.child({ component: 'conversation' }),
      servicePeers: services.peers,
      serviceToken: services.tokens.conversation,
      hostPathsOneUser: true,
    });
    await conversation.start();
    stops.push(() => conversation.stop());

    // After the conversation service: the gateway reads each request's history from it, in this
    // process (no gRPC round trip per LLM request).
    const gateway = createLlmGateway(
      readLlmGatewayConfig(env, {
        transport: { kind: 'memory' },
        server: { metricsPort: 0, host: '127.0.0.1' },
      }),
      {
        transport,
        history: conversation.history,
        logger: logger.child({ component: 'llm-gateway' }),
        serveMetrics: false,
      },
    );
    await gateway.start();
    stops.push(() => gateway.stop());
    // Tools never reach the internal API's port (the runner denies its own ports itself).
    runner.denyToolPorts([Number(new URL(conversation.grpcUrl).port)]);

    // The public ports (BEDROCK_PORT, BEDROCK_GRPC_PORT) bind where BEDROCK_HOST says, by default on this machine only.
    const bff = createWebBff(
      readWebBffConfig(env, {
        // No load balancer drains this process: open watches (a browser's, a CLI's) end after a
        // short grace on Ctrl-C or SIGTERM, not the services' 10 s (BEDROCK_SHUTDOWN_GRACE sets it).
        server: {
          host: env.BEDROCK_HOST || '127.0.0.1',
          metricsPort: 0,
          ...(env.BEDROCK_SHUTDOWN_GRACE ? {} : { shutdownGrace: EMBEDDED_SHUTDOWN_GRACE_MS }),
        },
        transport: { kind: 'memory' },
        upstream: { conversationUrls: [conversation.grpcUrl] },
        // The local user administers this installation (bedrock admin users|tokens).
        auth: { admins: [LOCAL_USER, ...(env.BEDROCK_ADMIN_USERS ?? '').split(',').flatMap((u) => u.trim() || [])] },
      }),
      {
        streams: transport.streams,
        tokens: createTokenStore(parseTokenEntries(`${LOCAL_USER}:${hashToken(token)}`, 'the embedded local user')),
        serviceToken: services.tokens['web-bff'],
        logger: logger.child({ component: 'web-bff' }),
      },
    );
    await bff.start();
    stops.push(() => bff.stop());
    return {
      dataDir,
      httpUrl: bff.httpUrl,
      grpcUrl: bff.grpcUrl,
      token,
      offline,
      toolIsolation: runner.toolIsolation,
      hostPaths: conversationConfig.workspaces.hostPaths === 'on',
      internalPorts: { conversation: Number(new URL(conversation.grpcUrl).port), 'tool-runner': runner.grpcPort },
      stop: stopAll,
    };
  } catch (err) {
    await stopAll();
    throw err;
  }
}
