/**
 * `make cluster` / `make cluster-down`: the services as separate processes on this machine (2
 * conversation, 2 llm-gateway, 3 tool-runner, 1 web-bff) under a supervisor that restarts any that
 * dies, against the local PostgreSQL and Redis, or a Patroni cluster (PG=ha) or Redis Cluster
 * (REDIS=cluster) of its own. Logs in .bedrock/cluster/logs/; the commands `up`, `down` and
 * `supervise` are below. docs/local-cluster.md.
 */
import { spawn } from 'node:child_process';
import { closeSync, existsSync, mkdirSync, openSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { startCluster, startHaPostgres, ROOT, type HaPostgres } from '@bedrock/cluster';
import { createLogger } from '@bedrock/platform/server';
import { startRedisCluster, type LocalRedisCluster } from '@bedrock/testkit/redis-cluster';

const dir = process.env.BEDROCK_CLUSTER_DIR ?? join(ROOT, '.bedrock', 'cluster');
const pidDir = join(dir, 'pids');
const logDir = join(dir, 'logs');
const supervisorPidFile = join(dir, 'supervisor.pid');
const readyFile = join(dir, 'ready.json');
const supervisorLog = join(logDir, 'supervisor.log');

interface Ready {
  readonly processes: string[];
  readonly httpUrl: string;
  readonly grpcUrl: string;
  /** PG=ha: the multi-host URL of the Patroni cluster the supervisor started. */
  readonly databaseUrl?: string;
  readonly redisUrl: string;
}

/** `make cluster PG=ha`: a Patroni cluster of our own (etcd + 2 synchronous nodes) instead of the local PostgreSQL. */
const haPostgres = process.env.BEDROCK_CLUSTER_PG === 'ha';

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function readPid(file: string): number | undefined {
  try {
    const pid = Number(readFileSync(file, 'utf8'));
    return Number.isSafeInteger(pid) && pid > 0 ? pid : undefined;
  } catch {
    return undefined;
  }
}

function processPids(): Array<{ file: string; pid: number }> {
  if (!existsSync(pidDir)) return [];
  return readdirSync(pidDir).flatMap((f) => {
    const pid = readPid(join(pidDir, f));
    return pid ? [{ file: join(pidDir, f), pid }] : [];
  });
}

/**
 * `down`: stops the supervisor, which stops every process (and the Patroni or Redis Cluster it
 * started) and exits; then sweeps up, through the pid files, anything left if the supervisor
 * itself was killed.
 */
async function down(): Promise<void> {
  const supervisor = readPid(supervisorPidFile);
  let stopped = 0;
  if (supervisor && alive(supervisor)) {
    // The supervisor stops every process (SIGTERM, SIGKILL after their grace) and exits.
    process.kill(supervisor, 'SIGTERM');
    const deadline = Date.now() + 40_000;
    while (alive(supervisor) && Date.now() < deadline) await sleep(200);
    if (alive(supervisor)) {
      console.log(`supervisor ${supervisor} did not stop in time; killing it`);
      process.kill(supervisor, 'SIGKILL');
    }
    stopped++;
  }
  rmSync(supervisorPidFile, { force: true });
  rmSync(readyFile, { force: true });
  // Whatever is left: processes of a supervisor that was killed, or of an older unsupervised cluster.
  const left = processPids().filter(({ pid }) => alive(pid));
  for (const { pid } of left) {
    try {
      process.kill(-pid, 'SIGTERM');
    } catch {
      // already gone
    }
  }
  const deadline = Date.now() + 20_000;
  while (left.some(({ pid }) => alive(pid)) && Date.now() < deadline) await sleep(200);
  for (const { pid } of left.filter(({ pid }) => alive(pid))) {
    console.log(`process group ${pid} did not stop in time; killing it`);
    process.kill(-pid, 'SIGKILL');
  }
  for (const { file } of processPids()) rmSync(file, { force: true });
  if (stopped === 0 && left.length === 0) return console.log('no cluster is running');
  console.log(`stopped the cluster${left.length > 0 ? ` (${left.length} processes without a supervisor)` : ''}; logs are in ${logDir}`);
}

/**
 * `up`: starts the supervisor in the background (`supervise`, this script again; its log is
 * logs/supervisor.log) and returns once the cluster is ready.
 */
async function up(): Promise<void> {
  const supervisor = readPid(supervisorPidFile);
  if ((supervisor && alive(supervisor)) || processPids().some(({ pid }) => alive(pid))) {
    throw new Error(`a cluster is already running (see ${dir}); run make cluster-down first`);
  }
  mkdirSync(logDir, { recursive: true });
  rmSync(readyFile, { force: true });
  const fd = openSync(supervisorLog, 'a');
  const child = spawn(process.execPath, ['--import', 'tsx', new URL(import.meta.url).pathname, 'supervise'], {
    cwd: ROOT,
    env: process.env,
    stdio: ['ignore', fd, fd],
    // Its own session: it outlives this command and the terminal.
    detached: true,
  });
  closeSync(fd);
  child.unref();
  let exited: number | string | undefined;
  child.once('exit', (code, signal) => (exited = code ?? signal ?? 'unknown'));
  const deadline = Date.now() + 180_000;
  while (!existsSync(readyFile)) {
    if (exited !== undefined || Date.now() > deadline) {
      const tail = existsSync(supervisorLog) ? readFileSync(supervisorLog, 'utf8').split('\n').slice(-20).join('\n') : '';
      if (exited === undefined) await down();
      throw new Error(
        `the cluster did not start (${exited === undefined ? 'timed out' : `supervisor exited: ${exited}`}); ${supervisorLog}:\n${tail}`,
      );
    }
    await sleep(200);
  }
  const ready = JSON.parse(readFileSync(readyFile, 'utf8')) as Ready;
  console.log(`Bedrock cluster is up: ${ready.processes.join(', ')}`);
  console.log(`  web UI and Connect API: ${ready.httpUrl}`);
  console.log(`  gRPC (h2c):             ${ready.grpcUrl}`);
  if (ready.databaseUrl)
    console.log(`  Postgres (Patroni, synchronous standby; logs in ${join(dir, 'postgres-ha', 'logs')}): ${ready.databaseUrl}`);
  console.log(`  Redis:                  ${ready.redisUrl}`);
  console.log(`  logs:                   ${logDir} (supervisor.log: restarts)`);
  console.log(`  service tokens:         ${join(dir, 'secrets')} (<service>.token, peers)`);
  console.log(`  try: BEDROCK_URL=${ready.httpUrl} BEDROCK_TOKEN=$(cat ${join(dir, 'token')}) npx bedrock new --cwd $PWD`);
  console.log('  a process that dies is restarted by the supervisor; stop everything with: make cluster-down');
}

/**
 * `supervise`: runs in the background (started by `up`), owns the processes until SIGTERM: one
 * that dies is started again with back-off, as Kubernetes would. With REDIS=cluster it first starts
 * a Redis Cluster of its own (3 masters + 3 replicas on ports from 7000 up, data and logs in
 * <dir>/redis-cluster/<port>/) for the services to use (BEDROCK_REDIS_CLUSTER=on), with PG=ha a
 * Patroni cluster; it stops them with the services. Their pids go to pids/ too, for `down`.
 */
async function supervise(): Promise<void> {
  const logger = createLogger({ service: 'cluster-supervisor' });
  writeFileSync(supervisorPidFile, String(process.pid));
  let stopping: Promise<void> | undefined;
  let ha: HaPostgres | undefined;
  let redisCluster: LocalRedisCluster | undefined;
  const redisMode = process.env.BEDROCK_CLUSTER_REDIS || 'single';
  if (redisMode !== 'single' && redisMode !== 'cluster') throw new Error(`REDIS=${redisMode}: use single or cluster`);
  const starting = (async () => {
    if (redisMode === 'cluster') {
      const redisDir = join(dir, 'redis-cluster');
      rmSync(redisDir, { recursive: true, force: true });
      redisCluster = await startRedisCluster({ dir: redisDir, basePort: 7000, keepDir: true, detached: true });
      mkdirSync(pidDir, { recursive: true });
      for (const pid of redisCluster.pids()) writeFileSync(join(pidDir, `redis-${pid}.pid`), String(pid));
      logger.info({ url: redisCluster.url, ports: redisCluster.ports }, 'Redis Cluster is up (3 masters + 3 replicas)');
    }
    let databaseUrl = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/bedrock_cluster';
    if (haPostgres) {
      // A new Patroni cluster at every `up`: its data does not outlive `make cluster-down`.
      const haDir = join(dir, 'postgres-ha');
      rmSync(haDir, { recursive: true, force: true });
      mkdirSync(pidDir, { recursive: true });
      ha = await startHaPostgres({ dir: haDir, pidDir, scope: 'bedrock-cluster' });
      databaseUrl = ha.url('bedrock_cluster');
      logger.info({ databaseUrl, nodes: ha.nodes.map((n) => `${n.name}:${n.port}`) }, 'Patroni cluster is up');
    }
    try {
      return await startCluster({
        dir,
        databaseUrl,
        redisUrl: redisCluster?.url ?? process.env.REDIS_URL ?? 'redis://127.0.0.1:6379',
        ...(redisCluster ? { redisCluster: { ports: redisCluster.ports } } : {}),
        redisPrefix: process.env.BEDROCK_REDIS_PREFIX ?? 'bedrock-cluster',
        ports: 'fixed',
        supervise: true,
        logger,
      });
    } catch (err) {
      await ha?.stop();
      await redisCluster?.stop();
      throw err;
    }
  })();
  const stop = (signal: string) => {
    stopping ??= (async () => {
      logger.info({ signal }, 'stopping the cluster');
      // A signal while starting: stop what started (a failed start has stopped itself).
      const cluster = await starting.catch(() => undefined);
      await cluster?.stop();
      await ha?.stop();
      if (redisCluster) {
        await redisCluster.stop();
        for (const file of readdirSync(pidDir).filter((f) => f.startsWith('redis-'))) rmSync(join(pidDir, file), { force: true });
        logger.info('Redis Cluster stopped');
      }
      rmSync(readyFile, { force: true });
      rmSync(supervisorPidFile, { force: true });
      logger.info('cluster stopped');
      process.exit(0);
    })();
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
  try {
    const cluster = await starting;
    if (stopping) return;
    const ready: Ready = {
      processes: cluster.processes.map((p) => p.name),
      httpUrl: cluster.httpUrl,
      grpcUrl: cluster.grpcUrl,
      ...(ha ? { databaseUrl: ha.url('bedrock_cluster') } : {}),
      redisUrl: redisCluster
        ? `${redisCluster.url} (Redis Cluster: ports ${redisCluster.ports.join(', ')})`
        : (process.env.REDIS_URL ?? 'redis://127.0.0.1:6379'),
    };
    writeFileSync(readyFile, JSON.stringify(ready));
    logger.info({ processes: ready.processes }, 'cluster is up; supervising');
  } catch (err) {
    if (stopping) return;
    logger.error({ err }, 'the cluster did not start');
    rmSync(supervisorPidFile, { force: true });
    process.exit(1);
  }
}

const command = process.argv[2];
/** A command's failure is one line for the person who typed it, not a stack trace. */
const run = (f: () => Promise<void>) =>
  f().then(
    () => process.exit(0),
    (err: unknown) => {
      process.stderr.write(`cluster ${command}: ${err instanceof Error ? err.message : String(err)}\n`);
      process.exit(1);
    },
  );
if (command === 'up') {
  await run(up);
} else if (command === 'down') {
  await run(down);
} else if (command === 'supervise') {
  await supervise();
} else {
  process.stderr.write('usage: tsx scripts/cluster.ts up|down\n');
  process.exit(2);
}
