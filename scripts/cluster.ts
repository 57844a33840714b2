/**
 * `make cluster` / `make cluster-down`: the services as separate processes on this machine —
 * 2 conversation, 2 llm-gateway, 3 tool-runner, 1 web-bff — against the local PostgreSQL and
 * Redis (make starts them first). Logs in .bedrock/cluster/logs/, one file per process.
 */
import { existsSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { startCluster, ROOT } from '@bedrock/cluster';

const dir = process.env.BEDROCK_CLUSTER_DIR ?? join(ROOT, '.bedrock', 'cluster');
const pidDir = join(dir, 'pids');

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

async function down(): Promise<void> {
  if (!existsSync(pidDir)) return console.log('no cluster is running');
  const pids = readdirSync(pidDir).map((f) => ({ file: join(pidDir, f), pid: Number(readFileSync(join(pidDir, f), 'utf8')) }));
  for (const { pid } of pids) {
    try {
      process.kill(-pid, 'SIGTERM');
    } catch {
      // already gone
    }
  }
  const deadline = Date.now() + 20_000;
  while (pids.some(({ pid }) => alive(pid)) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 200));
  for (const { pid } of pids.filter(({ pid }) => alive(pid))) {
    console.log(`process group ${pid} did not stop in time; killing it`);
    process.kill(-pid, 'SIGKILL');
  }
  for (const { file } of pids) rmSync(file, { force: true });
  console.log(`stopped ${pids.length} processes; logs are in ${join(dir, 'logs')}`);
}

async function up(): Promise<void> {
  if (existsSync(pidDir) && readdirSync(pidDir).some((f) => alive(Number(readFileSync(join(pidDir, f), 'utf8'))))) {
    throw new Error(`a cluster is already running (pids in ${pidDir}); run make cluster-down first`);
  }
  const cluster = await startCluster({
    dir,
    databaseUrl: process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/bedrock_cluster',
    redisUrl: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379',
    redisPrefix: process.env.BEDROCK_REDIS_PREFIX ?? 'bedrock-cluster',
    ports: 'fixed',
    detached: true,
  });
  console.log(`Bedrock cluster is up: ${cluster.processes.map((p) => p.name).join(', ')}`);
  console.log(`  web UI and Connect API: ${cluster.httpUrl}`);
  console.log(`  gRPC (h2c):             ${cluster.grpcUrl}`);
  console.log(`  logs:                   ${join(dir, 'logs')}`);
  console.log(`  service tokens:         ${join(dir, 'secrets')} (<service>.token, peers)`);
  console.log(`  try: BEDROCK_URL=${cluster.httpUrl} BEDROCK_TOKEN=$(cat ${join(dir, 'token')}) npx bedrock new --cwd $PWD`);
  console.log('  stop: make cluster-down');
}

const command = process.argv[2];
if (command === 'up') await up();
else if (command === 'down') await down();
else {
  console.error('usage: tsx scripts/cluster.ts up|down');
  process.exit(2);
}
process.exit(0);
