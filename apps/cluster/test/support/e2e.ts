/**
 * End-to-end support: a cluster of real service processes, a scripted local Messages API
 * server the gateways call through the real SDK, and a client of the public API (web-bff).
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createClient, type Client } from '@connectrpc/connect';
import { createConnectTransport } from '@connectrpc/connect-node';
import type { StateKind } from '@bedrock/contracts';
import { AdminService, ConversationService, WorkspaceService, type ConversationEvent } from '@bedrock/contracts';
import { startMessagesApiServer, type MessagesApiServer, type ReceivedRequest, type ScriptedResponse } from '@bedrock/offline-model';
import { startRedisCluster, type LocalRedisCluster } from '@bedrock/testkit/redis-cluster';
import pg from 'pg';
import { startCluster, type Cluster, type ClusterOptions } from '../../src/index.ts';

export interface E2e {
  readonly cluster: Cluster;
  readonly llm: MessagesApiServer;
  readonly client: Client<typeof ConversationService>;
  /** AdminService as the cluster's user, an admin (BEDROCK_ADMIN_USERS): adds users, issues their tokens. */
  readonly admin: Client<typeof AdminService>;
  /** The public API as the holder of `token` (a token the admin issued). */
  as(token: string): { conversations: Client<typeof ConversationService>; workspaces: Client<typeof WorkspaceService> };
  /** Routes requests by the text of their first user message (sub-agents run in parallel). */
  route(firstUserText: string, ...responses: ScriptedResponse[]): void;
  /**
   * Routes requests whose first user message starts with `prefix` to a function of the request:
   * a script that answers by what the history holds survives repeated requests (a gateway
   * that died mid-request, a redelivered job).
   */
  routeWith(prefix: string, respond: (request: ReceivedRequest) => ScriptedResponse): void;
  watch(conversationId: string): Watcher;
  waitFor<T>(what: string, probe: () => T | undefined | false | Promise<T | undefined | false>, timeoutMs?: number): Promise<T>;
  stateOf(id: string): Promise<StateKind>;
  close(): Promise<void>;
}

export interface Watcher {
  readonly events: ConversationEvent[];
  stop(): void;
}

export function firstUserText(request: ReceivedRequest): string {
  const first = request.body?.messages.find((m) => m.role === 'user');
  if (!first) return '';
  if (typeof first.content === 'string') return first.content;
  return first.content.map((b) => (b.type === 'text' ? (b.text ?? '') : '')).join('');
}

export interface E2eOptions extends Partial<ClusterOptions> {
  /**
   * `on` (default): these suites run their tools in host directories they make. `default`:
   * BEDROCK_HOST_PATHS is left unset, as shipped (off: conversations in workspaces only).
   */
  readonly hostPaths?: 'on' | 'default';
  /**
   * `cluster`: on a Redis Cluster of its own (3 masters + 3 replicas, stopped with the e2e) unless
   * `redisUrl` is given. Default: BEDROCK_E2E_REDIS, else `single` (the shared Redis).
   */
  readonly redis?: 'single' | 'cluster';
}

export async function startE2e(label: string, options: E2eOptions = {}): Promise<E2e> {
  const routes = new Map<string, ScriptedResponse[]>();
  const functions = new Map<string, (request: ReceivedRequest) => ScriptedResponse>();
  const llm = await startMessagesApiServer({
    fallback: (request) => {
      const text = firstUserText(request);
      const respond = [...functions.entries()].find(([key]) => text.startsWith(key))?.[1];
      if (respond) return respond(request);
      const queue = [...routes.entries()].find(([key]) => text.startsWith(key))?.[1];
      const next = queue?.shift();
      return (
        next ?? {
          kind: 'error',
          status: 500,
          errorType: 'api_error',
          message: `e2e: nothing scripted for ${JSON.stringify(text.slice(0, 60))}`,
        }
      );
    },
  });
  const dir = mkdtempSync(join(tmpdir(), `bedrock-e2e-${label}-`));
  const { env: extraEnv, serviceEnv, hostPaths = 'on', redis = process.env.BEDROCK_E2E_REDIS ?? 'single', ...clusterOptions } = options;
  const redisCluster: LocalRedisCluster | undefined =
    redis === 'cluster' && clusterOptions.redisUrl === undefined ? await startRedisCluster() : undefined;
  // The suite's own database, dropped at close (unless the suite names its own).
  const database = `bedrock_e2e_${label}_${process.pid}`;
  const cluster = await startCluster({
    dir,
    databaseUrl: `postgres://postgres@127.0.0.1:5432/${database}`,
    redisUrl: 'redis://127.0.0.1:6379',
    redisPrefix: `e2e-${label}-${process.pid}`,
    ...(redisCluster ? { redisUrl: redisCluster.url, redisCluster: { ports: redisCluster.ports } } : {}),
    ...clusterOptions,
    serviceEnv: {
      ...serviceEnv,
      // The cluster's one user is the bootstrap admin, who adds the users some suites need.
      'web-bff': { BEDROCK_ADMIN_USERS: 'local', ...serviceEnv?.['web-bff'] },
    },
    env: {
      ANTHROPIC_API_KEY: 'e2e-key',
      ANTHROPIC_BASE_URL: llm.url,
      LOG_LEVEL: 'info',
      BEDROCK_DEFAULT_MODEL: 'claude-haiku-4-5',
      // Crash detection and recovery run on the shipped defaults (job lock, stalled check,
      // recovery sweep). Only two settings are shortened, neither about crashes: the backoff
      // before a retried model call (the retry flows wait 1 s + 2 s otherwise), and the grace
      // a stopping service gives running work (only the teardown waits for it).
      BEDROCK_LLM_RETRY_BASE: '200ms',
      BEDROCK_SHUTDOWN_GRACE: '3s',
      // These suites run their tools in host directories they make; tenants.e2e.test.ts runs
      // on the default (workspaces only).
      ...(hostPaths === 'on' ? { BEDROCK_HOST_PATHS: 'on' } : {}),
      ...extraEnv,
    },
  });
  const transportOf = (token: string) =>
    createConnectTransport({
      baseUrl: cluster.httpUrl,
      httpVersion: '1.1',
      interceptors: [
        (next) => (req) => {
          req.header.set('authorization', `Bearer ${token}`);
          return next(req);
        },
      ],
    });
  const transport = transportOf(cluster.token);
  const client = createClient(ConversationService, transport);
  const watchers: AbortController[] = [];

  const waitFor: E2e['waitFor'] = async (what, probe, timeoutMs = 30_000) => {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const value = await probe();
      if (value !== undefined && value !== false) return value as never;
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  };

  return {
    cluster,
    llm,
    client,
    admin: createClient(AdminService, transport),
    as(token) {
      const t = transportOf(token);
      return { conversations: createClient(ConversationService, t), workspaces: createClient(WorkspaceService, t) };
    },
    route(key, ...responses) {
      routes.set(key, [...(routes.get(key) ?? []), ...responses]);
    },
    routeWith(prefix, respond) {
      functions.set(prefix, respond);
    },
    watch(conversationId) {
      const abort = new AbortController();
      watchers.push(abort);
      const events: ConversationEvent[] = [];
      void (async () => {
        try {
          for await (const res of client.watchConversation({ conversationId }, { signal: abort.signal })) {
            if (res.event) events.push(res.event);
          }
        } catch {
          // aborted at the end of the test
        }
      })();
      return { events, stop: () => abort.abort() };
    },
    waitFor,
    async stateOf(id) {
      return (await client.getConversation({ conversationId: id })).conversation!.state!.kind;
    },
    async close() {
      for (const w of watchers) w.abort();
      await cluster.stop();
      await llm.close();
      await redisCluster?.stop();
      if (clusterOptions.databaseUrl === undefined) await dropDatabase(database);
    },
  };
}

async function dropDatabase(name: string): Promise<void> {
  const admin = new pg.Client({ connectionString: 'postgres://postgres@127.0.0.1:5432/postgres' });
  await admin.connect();
  try {
    await admin.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
  } finally {
    await admin.end();
  }
}
