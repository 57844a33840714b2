/**
 * The real conversation service (real Postgres and Redis) behind a real web-bff, both on
 * ephemeral loopback ports. The test plays the llm-gateway and the tool-runner on the real
 * queues, as those services do (the pattern of services/conversation/test/support/harness.ts).
 * With `workspaceStorage`, a real tool-runner serves the workspaces (it takes no tool work).
 */
import { execFile } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { create, type MessageInitShape } from '@bufbuild/protobuf';
import { Code, ConnectError, createClient, type Client, type Interceptor } from '@connectrpc/connect';
import { createConnectTransport, createGrpcTransport, createGrpcWebTransport } from '@connectrpc/connect-node';
import {
  ConversationEventJobSchema,
  ConversationEventSchema,
  ConversationHistoryService,
  ConversationService,
  LlmRequestJobSchema,
  QUEUE_CONVERSATION_EVENTS,
  QUEUE_LLM_REQUESTS,
  QUEUE_TOOL_EXEC,
  QUEUE_TOOL_EXEC_RESTRICTED,
  TokenDeltaKind,
  ToolExecJobSchema,
  type LlmMessage,
  type LlmRequestJob,
  type ToolExecJob,
} from '@bedrock/contracts';
import { createRedisTransport, type Consumer, type Transport } from '@bedrock/platform';
import { createLogger, generateServiceCredentials, serviceTokenInterceptor, type Logger, type TokenEntry } from '@bedrock/platform/server';
import type { ConfigOverrides } from '@bedrock/platform/config';
import { testBffConfig } from './bff-config.ts';
import { readConversationConfig, type ConversationConfig } from '../../../conversation/src/config.ts';
import { createConversationService, type ConversationServiceInstance } from '../../../conversation/src/create-conversation-service.ts';
import { createTokenStore, generateToken, hashToken, parseTokenEntries } from '../../src/auth/token-store.ts';
import type { WebBffConfig } from '../../src/config.ts';
import { createWebBff, type WebBff } from '../../src/create-web-bff.ts';
import { createTestDatabase, type TestDatabase } from '@bedrock/testkit/database';
import { startTcpProxy, type TcpProxy } from './tcp-proxy.ts';
import { readToolRunnerConfig } from '../../../tool-runner/src/config.ts';
import { createToolRunner, type ToolRunner } from '../../../tool-runner/src/create-tool-runner.ts';
import { ensureHelper } from '../../../tool-runner/test/support.ts';

export { startGitDaemon, type GitDaemon, type GitRepos } from './git-daemon.ts';

export type EventInit = MessageInitShape<typeof ConversationEventJobSchema>['event'];
/** An LLM request job with the history it names, fetched as the llm-gateway does (jobs are claim checks). */
export type LlmJob = LlmRequestJob & { readonly messages: LlmMessage[] };
export type Protocol = 'connect' | 'grpc' | 'grpc-web' | 'connect-h1' | 'grpc-web-h1';

/** The workspace storage of a system: a real tool-runner's WorkspaceStorageService. */
export interface SystemStorage {
  /** The runner (runner.consume false: it serves the storage and takes no tool work). */
  readonly runner: ToolRunner;
  /** Its gRPC base URL (the conversation service's BEDROCK_WORKSPACE_STORAGE_URL). */
  readonly url: string;
  /** The workspace root, ROOT/ws-… (a fresh temporary directory per system). */
  readonly root: string;
  /** What the storage says it enforces (GetStorageInfo; on plain directories, no quota). */
  readonly description: string;
}

export interface System {
  readonly db: TestDatabase;
  /** The running conversation service (a new one after restartConversation). */
  readonly conversation: ConversationServiceInstance;
  readonly bff: WebBff;
  /** With `workspaceStorage`: the tool-runner serving the workspaces. */
  readonly storage: SystemStorage | undefined;
  /** With `proxyUpstream`: the TCP proxy between web-bff and the conversation service. */
  readonly proxy: TcpProxy | undefined;
  /** Stops the conversation service and starts a new one on the same database and Redis (the proxy follows it). */
  restartConversation(): Promise<ConversationServiceInstance>;
  readonly transport: Transport;
  readonly prefix: string;
  /** Plaintext tokens by user (alice, bob). */
  readonly tokens: Record<string, string>;
  /** web-bff's service token (another web-bff replica presents it too). */
  readonly serviceToken: string;
  readonly llmJobs: LlmJob[];
  readonly toolJobs: ToolExecJob[];
  /** A client of web-bff; `token` undefined sends none. */
  client(token: string | undefined, protocol?: Protocol): Client<typeof ConversationService>;
  /** Sends a result event the way the gateway and runner do. */
  send(conversationId: string, eventId: string, event: EventInit): Promise<void>;
  /** Streams a token delta the way the gateway does (after the stream's last durable event); answer text unless told otherwise. */
  delta(conversationId: string, requestId: string, text: string, more?: { kind?: TokenDeltaKind; blockIndex?: number }): Promise<void>;
  waitFor<T>(what: string, probe: () => T | undefined | false | Promise<T | undefined | false>, timeoutMs?: number): Promise<T>;
  close(): Promise<void>;
}

export interface SystemOptions {
  readonly label: string;
  /** web-bff settings beyond the test's (typed, durations in ms). */
  readonly bff?: ConfigOverrides<WebBffConfig>;
  /** Consume llm-requests and tool-exec in the test (default true). */
  readonly playWorkers?: boolean;
  /** Put a TCP proxy between web-bff and the conversation service (System.proxy), to break that connection. */
  readonly proxyUpstream?: boolean;
  /** Conversation service settings beyond the test's; each section given replaces the test's (only `models` keeps its default model unless set). */
  readonly conversation?: ConfigOverrides<ConversationConfig>;
  /**
   * Workspaces as a shared deployment has them: the conversation service asks the WorkspaceStorageService
   * of a real tool-runner (System.storage: a workspace root in a fresh temporary directory, only the
   * conversation service's own token accepted) and host paths are off. Clones need a repository the
   * runner can reach (startGitDaemon). Default: no workspace storage, host paths on.
   */
  readonly workspaceStorage?: boolean;
  /** With workspaceStorage: the root on a btrfs image the runner loop-mounts (subvolumes, quotas, checkpoints). */
  readonly workspaceImage?: boolean;
  /** The conversation service's clock (spend days, limit periods); default the system clock. */
  readonly clock?: () => Date;
}

export async function startSystem(options: SystemOptions): Promise<System> {
  const db = await createTestDatabase(options.label);
  const prefix = `test-bff-${options.label}-${process.pid}-${Math.random().toString(36).slice(2, 8)}`;
  const transports: Transport[] = [];
  const newTransport = () => {
    const t = createRedisTransport({ redisUrl: 'redis://127.0.0.1:6379', prefix, onError: () => undefined });
    transports.push(t);
    return t;
  };
  const logger = createLogger({ service: 'web-bff-test', level: 'silent' });
  // Service identity: the conversation service accepts web-bff's token, web-bff presents it.
  const services = generateServiceCredentials(['web-bff', 'llm-gateway', 'conversation']);
  // The storage accepts the conversation service alone, as a tool-runner lists its peers.
  const storage = options.workspaceStorage
    ? await startStorage(
        options.label,
        services.peers.filter((p) => p.name === 'conversation'),
        logger,
        options.workspaceImage ?? false,
      )
    : undefined;
  const conversationConfig = readConversationConfig(
    {},
    {
      log: { level: 'warn' },
      server: { grpcPort: 0, metricsPort: 0, host: '127.0.0.1', shutdownGrace: 1000 },
      database: { url: db.url },
      conversations: { sandbox: 'available' },
      // The fake workers never look at a conversation's directory: host paths keep it a name.
      workspaces: storage ? { hostPaths: 'off', storageUrls: [storage.url] } : { hostPaths: 'on' },
      turns: { llmRetryBase: 50, cancelAckTimeout: 2000 },
      recovery: { interval: 3_600_000 },
      ...options.conversation,
      models: { default: 'test-model', ...options.conversation?.models },
    },
  );
  const startConversation = async () => {
    const service = createConversationService(conversationConfig, {
      transport: newTransport(),
      logger,
      servicePeers: services.peers.filter((p) => p.name !== 'conversation'),
      serviceToken: services.tokens.conversation!,
      ...(options.clock ? { clock: options.clock } : {}),
    });
    await service.start();
    return service;
  };
  let conversation = await startConversation();
  const portOf = (url: string) => Number(new URL(url).port);
  const proxy = options.proxyUpstream ? await startTcpProxy(portOf(conversation.grpcUrl)) : undefined;

  const tokens = { alice: generateToken(), bob: generateToken() };
  const entries = parseTokenEntries(
    Object.entries(tokens)
      .map(([user, token]) => `${user}:${hashToken(token)}`)
      .join('\n'),
    'test',
  );
  const own = options.bff ?? {};
  const bff = createWebBff(
    testBffConfig({
      ...own,
      server: { shutdownGrace: 1000, ...own.server },
      upstream: { conversationUrls: [proxy?.url ?? conversation.grpcUrl], ...own.upstream },
    }),
    { logger, streams: newTransport().streams, tokens: createTokenStore(entries), serviceToken: services.tokens['web-bff']! },
  );
  await bff.start();

  const workers = newTransport();
  const llmJobs: LlmJob[] = [];
  // The played gateway fetches each job's history as llm-gateway does (a restart in between is waited out).
  const historyClients = new Map<string, Client<typeof ConversationHistoryService>>();
  const historyOf = async (job: LlmRequestJob): Promise<LlmJob> => {
    const deadline = Date.now() + 10_000;
    for (;;) {
      const url = conversation.grpcUrl;
      let history = historyClients.get(url);
      if (!history) {
        history = createClient(
          ConversationHistoryService,
          createGrpcTransport({ baseUrl: url, interceptors: [serviceTokenInterceptor(services.tokens['llm-gateway']!)] }),
        );
        historyClients.set(url, history);
      }
      try {
        const res = await history.getLlmHistory({
          conversationId: job.conversationId,
          historyThrough: job.historyThrough,
          continuationPrompt: job.continuationPrompt,
        });
        return Object.assign(job, { messages: res.messages });
      } catch (err) {
        if (ConnectError.from(err).code !== Code.Unavailable || Date.now() > deadline) throw err;
        await new Promise((r) => setTimeout(r, 50));
      }
    }
  };
  const toolJobs: ToolExecJob[] = [];
  const consumers: Consumer[] = [];
  if (options.playWorkers !== false) {
    consumers.push(
      workers.queues.consume(QUEUE_LLM_REQUESTS, LlmRequestJobSchema, async (job) => void llmJobs.push(await historyOf(job.data))),
    );
    for (const q of [QUEUE_TOOL_EXEC, QUEUE_TOOL_EXEC_RESTRICTED]) {
      consumers.push(workers.queues.consume(q, ToolExecJobSchema, async (job) => void toolJobs.push(job.data)));
    }
  }
  const events = workers.queues.producer(QUEUE_CONVERSATION_EVENTS, ConversationEventJobSchema);

  const bearer =
    (token: string | undefined): Interceptor =>
    (next) =>
    (req) => {
      if (token !== undefined) req.header.set('authorization', `Bearer ${token}`);
      return next(req);
    };

  return {
    db,
    get conversation() {
      return conversation;
    },
    bff,
    storage: storage && { runner: storage.runner, url: storage.url, root: storage.root, description: storage.description },
    proxy,
    async restartConversation() {
      await conversation.stop();
      conversation = await startConversation();
      if (proxy) proxy.target = portOf(conversation.grpcUrl);
      return conversation;
    },
    transport: workers,
    prefix,
    tokens,
    serviceToken: services.tokens['web-bff']!,
    llmJobs,
    toolJobs,
    client(token, protocol = 'grpc') {
      const interceptors = [bearer(token)];
      const h2 = { baseUrl: bff.grpcUrl, httpVersion: '2' as const, interceptors };
      const h1 = { baseUrl: bff.httpUrl, httpVersion: '1.1' as const, interceptors };
      const transport =
        protocol === 'grpc'
          ? createGrpcTransport(h2)
          : protocol === 'connect'
            ? createConnectTransport(h2)
            : protocol === 'grpc-web'
              ? createGrpcWebTransport(h2)
              : protocol === 'connect-h1'
                ? createConnectTransport(h1)
                : createGrpcWebTransport(h1);
      return createClient(ConversationService, transport);
    },
    async send(conversationId, eventId, event) {
      await events.add(eventId, create(ConversationEventJobSchema, { eventId, conversationId, event }));
    },
    async delta(conversationId, requestId, text, more = {}) {
      const last = await workers.streams.last(conversationId);
      const value = { requestId, text, kind: more.kind ?? TokenDeltaKind.TEXT, blockIndex: more.blockIndex ?? 0 };
      await workers.streams.appendEphemeral(
        create(ConversationEventSchema, { conversationId, sequence: last.sequence, kind: { case: 'tokenDelta', value } }),
      );
    },
    async waitFor(what, probe, timeoutMs = 10_000) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const value = await probe();
        if (value !== undefined && value !== false) return value as never;
        if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
        await new Promise((r) => setTimeout(r, 20));
      }
    },
    async close() {
      const t0 = Date.now();
      const step = (what: string) => process.env.DEBUG_CLOSE && console.log(what, Date.now() - t0);
      await Promise.all(consumers.map((c) => c.close(0)));
      step('consumers');
      await bff.stop().catch(() => undefined);
      step('bff');
      await conversation.stop().catch(() => undefined);
      step('conversation');
      await proxy?.close();
      if (storage) {
        await storage.runner.stop().catch(() => undefined);
        // A loop-mounted image (workspaceImage) is unmounted first: its mount outlives the runner.
        if (options.workspaceImage) await new Promise((r) => execFile('umount', [storage.root], r));
        rmSync(storage.dir, { recursive: true, force: true });
      }
      for (const t of transports) await t.close();
      step('transports');
      await db.drop();
    },
  };
}

/**
 * A tool-runner as workspace storage: the real service on loopback, its workspace root
 * DIR/root in a fresh temporary directory (DIR 0711, so that each workspace's owner reaches its
 * own), accepting `peers`. It consumes no queue (the test plays the tool workers); its sandbox
 * runs the clones as the workspace's owner.
 */
async function startStorage(
  label: string,
  peers: readonly TokenEntry[],
  logger: Logger,
  image = false,
): Promise<SystemStorage & { readonly dir: string }> {
  if (process.getuid?.() !== 0)
    throw new Error('workspaceStorage needs root: the tool-runner gives each workspace to its owner (a tool uid, 200000 and up)');
  ensureHelper();
  const dir = mkdtempSync(join(tmpdir(), 'bedrock-bff-workspaces-'));
  chmodSync(dir, 0o711);
  const config = readToolRunnerConfig(
    {},
    {
      runner: { id: `test-bff-${label}-${process.pid}-${Math.random().toString(36).slice(2, 8)}`, consume: false },
      server: { host: '127.0.0.1', grpcPort: 0, metricsPort: 0, shutdownGrace: 1000 },
      workspaces: {
        root: join(dir, 'root'),
        cloneTimeout: 60_000,
        ...(image ? { image: join(dir, 'image', 'workspaces.btrfs'), imageSize: 512 * 1024 ** 2 } : {}),
      },
    },
  );
  const runner = createToolRunner(config, { logger, servicePeers: peers });
  try {
    await runner.start();
  } catch (err) {
    await runner.stop().catch(() => undefined);
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
  const info = runner.workspaces.info();
  return { runner, dir, url: runner.grpcUrl, root: info.root, description: info.description };
}
