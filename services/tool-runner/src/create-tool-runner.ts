/**
 * A tool-runner: the tools and the sandbox behind a ToolRunnerService (gRPC, with health and
 * reflection), a worker on the tool-exec queues, cancel handling, capability reports and
 * metrics. `createToolRunner(config)` builds it; `start()` and `stop()` run it.
 */
import {
  PATCH_RESTRICTED_ERROR,
  QUEUE_TOOL_EXEC,
  QUEUE_TOOL_EXEC_RESTRICTED,
  ToolRunnerService,
  WorkspaceStorageService,
  health as healthPb,
} from '@bedrock/contracts';
import type { RunnerCapabilities } from '@bedrock/contracts';
import { createTransport } from '@bedrock/platform';
import type { Transport } from '@bedrock/platform';
import {
  createHealth,
  createReadiness,
  redisCheck,
  createLogger,
  createMetrics,
  registerHealth,
  readServicePeersFile,
  registerReflection,
  rpcMetricsInterceptor,
  serviceAuthInterceptor,
  startGrpcServer,
  startMetricsServer,
  startQueueDepthSampler,
  createSecretBox,
  parseSecretKey,
  mcpAccessTokenAad,
} from '@bedrock/platform/server';
import type {
  GrpcServer,
  Logger,
  MetricsServer,
  QueueDepthSampler,
  TokenEntry,
  ToolOutcome as ToolOutcomeLabel,
} from '@bedrock/platform/server';
import type { ToolRunnerConfig } from './config.ts';
import { runnerCapabilities } from './capabilities.ts';
import { registerToolRunnerService } from './grpc/tool-runner-routes.ts';
import { registerWorkspaceStorageService } from './grpc/workspace-storage-routes.ts';
import { registerMcpHostService } from './grpc/mcp-host-routes.ts';
import { createMcpHost, MCP_HOST_DEFAULTS } from './mcp/host.ts';
import type { McpHost } from './mcp/host.ts';
import { snapshotHelperBeside } from './workspaces/snapshot-helper.ts';
import { openWorkspaceStorage } from './workspaces/workspace-storage.ts';
import type { WorkspaceStorage } from './workspaces/workspace-storage.ts';
import { startToolExecWorker } from './queue/tool-exec-worker.ts';
import type { ToolExecWorker } from './queue/tool-exec-worker.ts';
import { closeSandboxSettings, createSandboxSettings } from './sandbox/sandbox-settings.ts';
import type { SandboxProbe } from './sandbox/probe.ts';
import { createToolExecutor } from './tool-executor.ts';
import type { ToolExecutor } from './tool-executor.ts';
import { prepareToolInputs } from './tools/execute-tool.ts';
import type { ToolOutcome } from './tools/tool-types.ts';

export interface ToolRunnerDeps {
  /** Queues, streams, cancel bus and registry; default built from the config (and closed on stop). */
  readonly transport?: Transport;
  readonly logger?: Logger;
  /** Services allowed to call the ToolRunnerService; default read from `server.servicePeersFile` (none: every call is refused). */
  readonly servicePeers?: readonly TokenEntry[];
}

export interface ToolRunner {
  start(): Promise<void>;
  /** Stops taking work, lets running tools finish for the shutdown grace, then kills them and reports them interrupted. */
  stop(): Promise<void>;
  /** After start: the bound gRPC port and base URL. */
  readonly grpcPort: number;
  readonly grpcUrl: string;
  readonly metricsUrl: string;
  /** After start: what this runner reports. */
  capabilities(): RunnerCapabilities;
  /** After start: one line saying who tools run as (or why they cannot be given their own user). */
  readonly toolIsolation: string;
  /** Adds ports tools may never connect to (a composition's own endpoints, e.g. an embedded database). */
  denyToolPorts(ports: readonly number[]): void;
  /** After start: the executor (for embedding and tests). */
  readonly executor: ToolExecutor;
  /** After start: the workspace storage (BEDROCK_WORKSPACE_ROOT) this runner serves. */
  readonly workspaces: WorkspaceStorage;
}

function outcomeLabel(outcome: ToolOutcome): ToolOutcomeLabel {
  if (outcome.cancelled) return 'cancelled';
  if (outcome.display?.timedOut === true) return 'timeout';
  if (outcome.content === PATCH_RESTRICTED_ERROR) return 'denied';
  return outcome.isError ? 'error' : 'ok';
}

export function createToolRunner(config: ToolRunnerConfig, deps: ToolRunnerDeps = {}): ToolRunner {
  const logger = deps.logger ?? createLogger({ service: 'tool-runner', level: config.log.level });
  const metrics = createMetrics('tool-runner');
  const health = createHealth({ overall: 'NOT_SERVING' });
  let executor: ToolExecutor | undefined;
  let mcpHost: McpHost | undefined;
  let probe: SandboxProbe | undefined;
  let queues: string[] = [];
  let server: GrpcServer | undefined;
  let metricsServer: MetricsServer | undefined;
  let worker: ToolExecWorker | undefined;
  let transport: Transport | undefined;
  let ownsTransport = false;
  let reportTimer: NodeJS.Timeout | undefined;
  let depthSampler: QueueDepthSampler | undefined;
  let closeCgroups: (() => Promise<void>) | undefined;
  let denyPorts = new Set<number>(config.sandbox.denyPorts);
  let toolIsolation = '';
  let workspaces: WorkspaceStorage | undefined;
  const storage = (): WorkspaceStorage => {
    if (!workspaces) throw new Error('tool-runner not started');
    return workspaces;
  };

  const capabilities = (): RunnerCapabilities => {
    if (!probe) throw new Error('tool-runner not started');
    return runnerCapabilities(config.runner.id, probe, queues);
  };

  async function report(): Promise<void> {
    if (!transport) return;
    try {
      await transport.runners.report(capabilities(), config.runner.reportInterval * 3);
    } catch (err) {
      logger.warn({ err }, 'capability report failed');
    }
  }

  return {
    get grpcPort() {
      return server?.port ?? 0;
    },
    get grpcUrl() {
      return server?.url ?? '';
    },
    get toolIsolation() {
      return toolIsolation;
    },
    get metricsUrl() {
      return metricsServer?.url ?? '';
    },
    get executor() {
      if (!executor) throw new Error('tool-runner not started');
      return executor;
    },
    get workspaces() {
      return storage();
    },
    capabilities,
    denyToolPorts(ports) {
      for (const port of ports) if (port > 0) denyPorts.add(port);
    },

    async start() {
      // Read first: a missing or malformed peers file stops the runner before it takes work.
      const servicePeers =
        deps.servicePeers ?? (config.server.servicePeersFile ? readServicePeersFile(config.server.servicePeersFile) : []);
      const sandbox = await createSandboxSettings({
        runnerId: config.runner.id,
        sandbox: config.sandbox,
        limits: config.limits,
        workspaces: config.workspaces,
      });
      probe = sandbox.probe;
      closeCgroups = () => closeSandboxSettings(sandbox.settings);
      // Helpers waiting in their own pids cgroups from the first tool call on.
      sandbox.settings.warmHelpers?.refill();
      // Input validators ready before the first tool call (it would pay ~40 ms for them).
      prepareToolInputs();
      if (probe.sandboxAvailable) {
        logger.info(
          { landlock_abi: probe.landlockAbi, pids_cgroup: sandbox.settings.cgroups?.base ?? null },
          'kernel sandbox available: taking Restricted work',
        );
      } else {
        // REQ-BASH-009: detected at startup, logged, and Restricted work is never taken here.
        logger.warn(
          { reason: probe.reason, landlock_abi: probe.landlockAbi },
          'kernel sandbox unavailable: this runner takes Unrestricted work only (reduced security posture)',
        );
      }
      if (sandbox.toolUserWarning) logger.warn(sandbox.toolUserWarning);
      else
        logger.info(
          { tool_uid: config.sandbox.toolUid, tool_gid: config.sandbox.toolGid, private_mounts: probe.privateMounts },
          'tools run as their own user',
        );
      // Which bounds this host enforces and which it cannot (and whether workspace runs get a view).
      logger.info(sandbox.boundsLine);
      toolIsolation =
        sandbox.toolUserWarning ??
        `tools run as ${config.sandbox.toolUid === 'owner' ? "the working directory's owner (nobody, uid 65534, for root-owned ones)" : `uid ${config.sandbox.toolUid}, gid ${config.sandbox.toolGid}`}, under Landlock and seccomp${probe.privateMounts ? ', each with a private scratch' : ''}`;
      if (probe.landlockAbi < 4)
        logger.warn(
          { landlock_abi: probe.landlockAbi },
          "this kernel cannot refuse TCP connections by port (Landlock ABI < 4): Unrestricted tools can reach the system's own ports",
        );
      for (const port of denyPorts) sandbox.settings.denyPorts.add(port);
      denyPorts = sandbox.settings.denyPorts;
      const redisPort = Number(new URL(config.transport.redis.url).port || 6379);
      if (config.transport.kind === 'redis') denyPorts.add(redisPort);
      const capture = { headBytes: config.output.head, tailBytes: config.output.tail };
      const tokenBox = config.mcp.tokenKey ? createSecretBox(parseSecretKey(config.mcp.tokenKey)) : undefined;
      mcpHost = createMcpHost({
        sandbox: sandbox.settings,
        capture,
        ...MCP_HOST_DEFAULTS,
        ...(tokenBox
          ? {
              openAccessToken: (sealed, conversationId, server) =>
                tokenBox.open(Buffer.from(sealed, 'base64'), mcpAccessTokenAad(conversationId, server)),
            }
          : {}),
      });
      const mcp = mcpHost;
      executor = createToolExecutor({
        runnerId: config.runner.id,
        context: { sandbox: sandbox.settings, capture, mcp },
        onComplete: (job, outcome, ms) =>
          metrics.toolDurationSeconds.observe({ tool: job.toolName, outcome: outcomeLabel(outcome) }, ms / 1000),
      });
      const exec = executor;
      // The workspaces' storage: an image to mount that fails stops the start; a root that cannot
      // be used is reported here and by every call.
      workspaces = await openWorkspaceStorage({
        config: config.workspaces,
        sandbox: sandbox.settings,
        snapshotHelper: snapshotHelperBeside(config.sandbox.helper),
        log: (level, message) => logger[level]({ root: config.workspaces.root }, message),
      });
      queues = config.runner.consume ? [QUEUE_TOOL_EXEC, ...(probe.sandboxAvailable ? [QUEUE_TOOL_EXEC_RESTRICTED] : [])] : [];

      server = await startGrpcServer({
        host: config.server.host,
        port: config.server.grpcPort,
        logger,
        // ExecuteTool runs commands and the storage makes and deletes workspaces: only services
        // listed as peers may call them.
        interceptors: [rpcMetricsInterceptor(metrics), serviceAuthInterceptor({ peers: servicePeers, logger })],
        routes: (router) => {
          registerToolRunnerService(router, { executor: exec, capabilities });
          registerWorkspaceStorageService(router, storage, sandbox.settings.toolUser, sandbox.settings.views ?? false);
          registerMcpHostService(router, mcp, { sandbox: sandbox.settings });
          registerHealth(router, health);
          // An internal port: reflection lists health and itself only, never ToolRunnerService
          // (docs/security.md, boundary 2).
          registerReflection(router, [healthPb.Health]);
        },
      });
      // Ready while Redis answers (when consuming queues over the redis transport; the transport
      // is built below and read at each probe).
      const usesRedis = config.runner.consume && (deps.transport ? Boolean(deps.transport.ping) : config.transport.kind === 'redis');
      const readiness = createReadiness({ checks: usesRedis ? [redisCheck(() => transport)] : [] });
      metricsServer = await startMetricsServer({
        port: config.server.metricsPort,
        host: config.server.host,
        registry: metrics.registry,
        health,
        readiness,
      });
      // Tools never reach this runner's own ports (ephemeral ones included).
      denyPorts.add(server.port);
      denyPorts.add(metricsServer.port);

      if (config.runner.consume) {
        transport = deps.transport;
        if (!transport) {
          ownsTransport = true;
          transport = createTransport(config.transport, logger);
        }
        worker = await startToolExecWorker({
          transport,
          executor: exec,
          runnerId: config.runner.id,
          queues,
          concurrency: config.runner.concurrency,
          outputFlushMs: config.output.flushInterval,
          outputStreamMaxBytes: config.output.streamMax,
          logger,
          metrics,
        });
        depthSampler = startQueueDepthSampler({
          queues: transport.queues,
          names: queues,
          metrics,
          onError: (err) => logger.debug({ err }, 'queue depth sample failed'),
        });
        await report();
        reportTimer = setInterval(() => void report(), config.runner.reportInterval);
        reportTimer.unref();
      }
      health.set('', 'SERVING');
      health.set(ToolRunnerService.typeName, 'SERVING');
      health.set(WorkspaceStorageService.typeName, 'SERVING');
      logger.info({ runner_id: config.runner.id, grpc_port: server.port, queues }, 'tool-runner started');
    },

    async stop() {
      health.shutdown();
      clearInterval(reportTimer);
      depthSampler?.stop();
      await worker?.close(config.server.shutdownGrace);
      await executor?.abortAll();
      await mcpHost?.close();
      if (transport) {
        await transport.runners.remove(config.runner.id).catch((err: unknown) => logger.warn({ err }, 'runner deregistration failed'));
        if (ownsTransport) await transport.close();
      }
      await server?.close(config.server.shutdownGrace);
      await metricsServer?.close();
      await closeCgroups?.();
      workspaces?.close();
      logger.info({ runner_id: config.runner.id }, 'tool-runner stopped');
    },
  };
}
