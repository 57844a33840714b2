/**
 * The services as separate processes in the cluster layout: several replicas of each against one
 * PostgreSQL and one Redis, logs under one folder, each process supervised as Kubernetes would
 * (service-process.ts), web-bff balancing over every conversation replica, fresh service tokens at every
 * start. Used by `make cluster` (fixed ports, under the supervisor process of scripts/cluster.ts) and by
 * the end-to-end tests (free ports). docs/local-cluster.md.
 */
import { createHash, randomBytes } from 'node:crypto';
import { chmodSync, mkdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createPool, parsePostgresUrl } from '@bedrock/conversation/db-pool';
import { generateServiceCredentials, type Logger } from '@bedrock/platform/server';
import { freePort } from '@bedrock/platform/server';
import { createRedisAclUsers, type RedisAclUsers } from '@bedrock/platform';
import { bundleService } from '@bedrock/deploy-check/bundle';
import {
  ROOT,
  serviceProcess,
  type ProcessEvent,
  type Runtime,
  type ServiceName,
  type ServiceProcess,
  type SupervisionOptions,
} from './service-process.ts';

export interface ClusterOptions {
  /** Folder for logs/, pids/ and the user's token. */
  readonly dir: string;
  /** A database URL; the database is created if it does not exist. */
  readonly databaseUrl: string;
  /** A Redis URL allowed to create ACL users: each service gets its own user (see packages/platform/src/redis/redis-acl.ts). */
  readonly redisUrl: string;
  /**
   * `redisUrl` is a node of a Redis Cluster with these nodes (every port: the tools are denied
   * them all): the services run with BEDROCK_REDIS_CLUSTER=on and BEDROCK_QUEUE_PARTITIONS=3,
   * their ACL users on every node.
   */
  readonly redisCluster?: { readonly ports: readonly number[] };
  /** Key prefix in Redis, so several clusters (or test runs) can share one server. */
  readonly redisPrefix: string;
  readonly replicas?: { conversation?: number; gateway?: number; toolRunner?: number };
  /** `fixed`: the documented default ports (8080, 8081, …); `free`: any free ports (tests). */
  readonly ports?: 'fixed' | 'free';
  readonly runtime?: Runtime;
  /** Left running when this process exits, unsupervised (prefer a supervisor process: scripts/cluster.ts). */
  readonly detached?: boolean;
  /**
   * Restart a process that exits without being asked to, with back-off, as Kubernetes does
   * (service-process.ts). Default true.
   */
  readonly supervise?: boolean | SupervisionOptions;
  /** Where the supervisor logs restarts (each is also a line in the process's own log file). */
  readonly logger?: Logger;
  /** Every start, exit, restart and ready-again of every process. */
  readonly onProcessEvent?: (event: ProcessEvent) => void;
  /** Extra environment for every process (e.g. ANTHROPIC_BASE_URL of a test server). */
  readonly env?: Record<string, string>;
  /** Extra environment per service. */
  readonly serviceEnv?: Partial<Record<ServiceName, Record<string, string>>>;
}

export interface Cluster {
  readonly dir: string;
  /** web-bff over HTTP/1.1 (Connect, gRPC-Web, the web UI). */
  readonly httpUrl: string;
  /** web-bff over h2c (gRPC). */
  readonly grpcUrl: string;
  readonly userId: string;
  readonly token: string;
  /** Service identity: `<dir>/secrets/<service>.token` by service, and the peers file. */
  readonly secrets: { readonly tokenFiles: Readonly<Record<ServiceName, string>>; readonly peersFile: string };
  readonly processes: ServiceProcess[];
  byName(name: string): ServiceProcess;
  /**
   * Starts a stopped replica again with the same settings (at once, if a supervised restart
   * is pending) and waits until it is ready; a replica already restarted is only waited for.
   */
  restart(name: string): Promise<void>;
  stop(): Promise<void>;
}

const USER_ID = 'local';
const SERVICES: readonly ServiceName[] = ['conversation', 'llm-gateway', 'tool-runner', 'web-bff'];

/**
 * Which service-identity settings each service reads: the internal servers accept the peers,
 * web-bff and llm-gateway (which fetches each request's history) present their tokens to the
 * conversation service.
 */
function identityEnv(service: ServiceName, tokenFile: string, peersFile: string): Record<string, string> {
  switch (service) {
    case 'conversation':
      // It also calls the tool-runners' workspace storage.
      return { BEDROCK_SERVICE_PEERS_FILE: peersFile, BEDROCK_SERVICE_TOKEN_FILE: tokenFile };
    case 'tool-runner':
      return { BEDROCK_SERVICE_PEERS_FILE: peersFile };
    case 'web-bff':
    case 'llm-gateway':
      return { BEDROCK_SERVICE_TOKEN_FILE: tokenFile };
  }
}

/**
 * Fresh service identity, new at every start: each service's own token in `<dir>/secrets/<service>.token`
 * and the peers file the internal servers accept, `<dir>/secrets/peers` (directory 0700, files 0600).
 */
function writeServiceSecrets(dir: string): Cluster['secrets'] {
  const secrets = join(dir, 'secrets');
  mkdirSync(secrets, { recursive: true, mode: 0o700 });
  chmodSync(secrets, 0o700);
  const credentials = generateServiceCredentials(SERVICES);
  const write = (file: string, text: string) => {
    writeFileSync(file, text, { mode: 0o600 });
    chmodSync(file, 0o600);
  };
  const tokenFiles = Object.fromEntries(SERVICES.map((name) => [name, join(secrets, `${name}.token`)])) as Record<ServiceName, string>;
  for (const name of SERVICES) write(tokenFiles[name], `${credentials.tokens[name]}\n`);
  const peersFile = join(secrets, 'peers');
  write(peersFile, credentials.peersFile);
  return { tokenFiles, peersFile };
}

async function ensureDatabase(url: string): Promise<void> {
  // Not `new URL()`: the URL may name several hosts (a Patroni cluster, ha-postgres.ts), and
  // the pool of the conversation service (db/pool.ts) finds the read-write one.
  const m = /^(postgres(?:ql)?:\/\/[^/?#]*)\/([^?#]*)(.*)$/i.exec(url);
  if (!m) throw new Error(`not a postgres URL with a database: ${url}`);
  const name = decodeURIComponent(m[2]!);
  const pool = createPool({ connectionString: `${m[1]}/postgres${m[3]}`, max: 1 });
  pool.on('error', () => undefined);
  try {
    const { rows } = await pool.query('SELECT 1 FROM pg_database WHERE datname = $1', [name]);
    if (rows.length === 0) await pool.query(`CREATE DATABASE "${name.replace(/"/g, '""')}"`);
  } finally {
    await pool.end();
  }
}

export async function startCluster(options: ClusterOptions): Promise<Cluster> {
  const runtime = options.runtime ?? 'node';
  // The bundle runtime: the production bundles, built here as the images' build stage does.
  const bundleDir = runtime === 'bundle' ? join(options.dir, 'bundles') : undefined;
  if (bundleDir) {
    await Promise.all(SERVICES.map((s) => bundleService(s, bundleDir)));
    // The packages a bundle leaves outside (native ones), found as the image's npm install puts them.
    symlinkSync(join(ROOT, 'node_modules'), join(bundleDir, 'node_modules'));
  }
  // What the images set beside the bundle (the bundle is not next to the repository's files).
  const bundleEnv: Partial<Record<ServiceName, Record<string, string>>> = bundleDir
    ? {
        'tool-runner': { BEDROCK_SANDBOX_HELPER: join(ROOT, 'services/tool-runner/bin/bedrock-sandbox') },
        'web-bff': { BEDROCK_UI_DIR: join(bundleDir, 'web-bff', 'ui') },
      }
    : {};
  const fixed = (options.ports ?? 'free') === 'fixed';
  const port = async (fixedPort: number) => (fixed ? fixedPort : freePort());
  const replicas = { conversation: 2, gateway: 2, toolRunner: 3, ...options.replicas };
  mkdirSync(options.dir, { recursive: true });
  await ensureDatabase(options.databaseUrl);

  const token = randomBytes(24).toString('base64url');
  const hash = createHash('sha256').update(token).digest('hex');
  writeFileSync(join(options.dir, 'token'), `${token}\n`, { mode: 0o600 });
  const secrets = writeServiceSecrets(options.dir);
  // One Redis user per service, limited to this cluster's prefix: no service uses the admin URL.
  const redisUsers: RedisAclUsers = await createRedisAclUsers({
    adminUrl: options.redisUrl,
    prefix: options.redisPrefix,
    cluster: options.redisCluster !== undefined,
  });

  const common = {
    REDIS_URL: options.redisUrl,
    BEDROCK_REDIS_PREFIX: options.redisPrefix,
    BEDROCK_TRANSPORT: 'redis',
    // On a cluster the queues are split in one partition per master (3 locally), so that their
    // load spreads over the masters (docs/transports.md, "Queue partitions").
    ...(options.redisCluster ? { BEDROCK_REDIS_CLUSTER: 'on', BEDROCK_QUEUE_PARTITIONS: '3' } : {}),
    BEDROCK_HOST: '127.0.0.1',
    LOG_LEVEL: process.env.LOG_LEVEL ?? 'info',
    ...options.env,
  };
  const processes: ServiceProcess[] = [];
  const add = async (service: ServiceName, index: number, env: Record<string, string>, metricsFixed: number) => {
    const metricsPort = await port(metricsFixed);
    processes.push(
      serviceProcess(
        {
          name: `${service}-${index}`,
          service,
          metricsPort,
          env: {
            ...common,
            ...identityEnv(service, secrets.tokenFiles[service], secrets.peersFile),
            REDIS_URL: redisUsers.urls[service] as string,
            ...bundleEnv[service],
            ...options.serviceEnv?.[service],
            ...env,
            BEDROCK_METRICS_PORT: String(metricsPort),
          },
        },
        {
          dir: options.dir,
          runtime,
          ...(bundleDir ? { bundleDir } : {}),
          detached: options.detached ?? false,
          supervise: options.supervise ?? true,
          ...(options.logger ? { logger: options.logger } : {}),
          ...(options.onProcessEvent ? { onEvent: options.onProcessEvent } : {}),
        },
      ),
    );
  };

  const runnerPorts: number[] = [];
  for (let i = 1; i <= replicas.toolRunner; i++) runnerPorts.push(await port(50060 + i));
  // Every runner mounts the same workspace root, so the conversation service may ask any of them.
  const workspaceRoot = join(options.dir, 'workspaces');
  const conversationPorts: number[] = [];
  for (let i = 1; i <= replicas.conversation; i++) {
    const grpc = await port(50050 + i);
    conversationPorts.push(grpc);
    await add(
      'conversation',
      i,
      {
        DATABASE_URL: options.databaseUrl,
        BEDROCK_GRPC_PORT: String(grpc),
        BEDROCK_WORKSPACE_STORAGE_URL: runnerPorts.map((p) => `http://127.0.0.1:${p}`).join(','),
      },
      9470 + i,
    );
  }
  // Every conversation replica: the gateways fetch request histories from any of them.
  const conversationUrls = conversationPorts.map((p) => `http://127.0.0.1:${p}`).join(',');
  for (let i = 1; i <= replicas.gateway; i++) await add('llm-gateway', i, { BEDROCK_CONVERSATION_URL: conversationUrls }, 9480 + i);
  // Tools never reach the system's own endpoints: Postgres, Redis, every internal gRPC port.
  const denyPorts = [
    ...parsePostgresUrl(options.databaseUrl).hosts.map((h) => h.port),
    Number(new URL(options.redisUrl).port || 6379),
    ...(options.redisCluster?.ports ?? []),
    ...conversationPorts,
    ...runnerPorts,
  ];
  for (let i = 1; i <= replicas.toolRunner; i++) {
    await add(
      'tool-runner',
      i,
      {
        BEDROCK_GRPC_PORT: String(runnerPorts[i - 1]),
        BEDROCK_RUNNER_ID: `tool-runner-${i}`,
        BEDROCK_TOOL_DENY_PORTS: denyPorts.join(','),
        BEDROCK_WORKSPACE_ROOT: workspaceRoot,
      },
      9490 + i,
    );
  }
  const httpPort = await port(8080);
  const grpcPort = await port(8081);
  await add(
    'web-bff',
    1,
    {
      BEDROCK_PORT: String(httpPort),
      BEDROCK_GRPC_PORT: String(grpcPort),
      // Every replica: web-bff spreads its calls over them and moves off a dead one at once.
      BEDROCK_CONVERSATION_URL: conversationUrls,
      BEDROCK_TOKENS: `${USER_ID}:${hash}`,
    },
    9499,
  );

  const cluster: Cluster = {
    dir: options.dir,
    httpUrl: `http://127.0.0.1:${httpPort}`,
    grpcUrl: `http://127.0.0.1:${grpcPort}`,
    userId: USER_ID,
    token,
    secrets,
    processes,
    byName(name) {
      const p = processes.find((x) => x.name === name);
      if (!p) throw new Error(`no process ${name}`);
      return p;
    },
    async restart(name) {
      const p = cluster.byName(name);
      await p.start();
      await p.waitReady();
    },
    async stop() {
      // For good: no supervised restart; SIGKILL for any still running after 15 s.
      await Promise.all(processes.map((p) => p.stop(15_000)));
      await redisUsers.cleanup().catch(() => undefined);
    },
  };
  try {
    // Conversation replicas first: they run the migrations the others do not need.
    const conv = processes.filter((p) => p.service === 'conversation');
    for (const p of conv) await p.start();
    await Promise.all(conv.map((p) => p.waitReady()));
    const rest = processes.filter((p) => p.service !== 'conversation');
    for (const p of rest) await p.start();
    await Promise.all(rest.map((p) => p.waitReady()));
  } catch (err) {
    await cluster.stop();
    throw err;
  }
  return cluster;
}
