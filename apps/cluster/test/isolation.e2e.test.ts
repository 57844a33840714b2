/**
 * The isolation battery in the cluster layout: every service its own process, real Postgres and Redis,
 * the offline model in the gateway, tools in the runner's sandbox. A tool must run as an unprivileged
 * user, read none of the cluster's secrets, reach neither Postgres, Redis nor any internal port, and
 * write only its working directory, while Restricted reads and Unrestricted writes and network work.
 */
import { beforeAll, afterAll } from '@jest/globals';
import { chownSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createClient } from '@connectrpc/connect';
import { createConnectTransport } from '@connectrpc/connect-node';
import { ConversationService } from '@bedrock/contracts';
import { defineIsolationExpectations, runIsolationBattery, type IsolationResults } from '@bedrock/testkit/isolation-battery';
import { startCluster, type Cluster } from '../src/index.ts';

const NOBODY = 65534;
let cluster: Cluster;
let results: IsolationResults;
let listener: Server;
const dirs: string[] = [];
const mkdir = (prefix: string) => {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  dirs.push(dir);
  return dir;
};

const DATABASE_URL = `postgres://postgres@127.0.0.1:5432/bedrock_e2e_isolation_${process.pid}`;
const REDIS_URL = 'redis://127.0.0.1:6379';

beforeAll(async () => {
  const workspace = mkdir('bedrock-iso-ws-');
  const outsideDir = mkdir('bedrock-iso-outside-');
  chownSync(workspace, NOBODY, NOBODY);
  chownSync(outsideDir, NOBODY, NOBODY);
  const secret = join(mkdir('bedrock-iso-secret-'), 'root-only');
  writeFileSync(secret, 'root secret\n', { mode: 0o600 });
  listener = createServer((s) => s.destroy());
  await new Promise<void>((r) => listener.listen(0, '127.0.0.1', r));
  cluster = await startCluster({
    dir: mkdir('bedrock-iso-cluster-'),
    databaseUrl: DATABASE_URL,
    redisUrl: REDIS_URL,
    redisPrefix: `e2e-isolation-${process.pid}`,
    replicas: { conversation: 1, gateway: 1, toolRunner: 1 },
    // The offline model: no key, no provider.
    // The host-path layout (a directory of this machine, the fixed tool user): workspaces and
    // their per-user uids are tenants.e2e.test.ts's.
    env: { ANTHROPIC_API_KEY: '', LOG_LEVEL: 'warn', BEDROCK_OFFLINE_EVENT_DELAY: '0ms', BEDROCK_HOST_PATHS: 'on' },
  });
  const client = createClient(
    ConversationService,
    createConnectTransport({
      baseUrl: cluster.httpUrl,
      httpVersion: '1.1',
      interceptors: [
        (next) => (req) => {
          req.header.set('authorization', `Bearer ${cluster.token}`);
          return next(req);
        },
      ],
    }),
  );
  const ports = (name: string) => Number(cluster.byName(name).env.BEDROCK_GRPC_PORT);
  results = await runIsolationBattery({
    client,
    workspace,
    outsideDir,
    secretFiles: [join(cluster.dir, 'token'), ...Object.values(cluster.secrets.tokenFiles), cluster.secrets.peersFile, secret],
    servicePids: cluster.processes.map((p) => p.pid() as number),
    deniedPorts: { postgres: 5432, redis: 6379, conversation: ports('conversation-1'), 'tool-runner': ports('tool-runner-1') },
    openPort: (listener.address() as { port: number }).port,
    turnTimeoutMs: 90_000,
  });
}, 240_000);

afterAll(async () => {
  await cluster?.stop();
  await new Promise<void>((r) => listener?.close(() => r()));
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

defineIsolationExpectations({
  layout: 'cluster',
  results: () => results,
  toolUser: NOBODY,
  // The user token, four service tokens, the peers file, a root-only file, every service's environment.
  secrets: () => 1 + 4 + 1 + 1 + cluster.processes.length,
  deniedPorts: ['postgres', 'redis', 'conversation', 'tool-runner'],
  outsideDir: () => dirs[1] as string,
});
