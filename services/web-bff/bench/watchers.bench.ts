/**
 * How many concurrent watchers one web-bff process holds, how fast an event reaches all of
 * them, and what they cost in memory. Real conversation service, Postgres and Redis; web-bff
 * and the watchers each in their own process; loopback only. Prints figures, asserts nothing.
 *
 * BENCH_WATCHERS (default 10000), BENCH_CONVERSATIONS (100), BENCH_CONNECTIONS (20 HTTP/2
 * connections), BENCH_ROUNDS (15) rounds every BENCH_ROUND_MS (1000), each appending one token
 * delta to BENCH_PER_ROUND (10) of the conversations in turn; BENCH_DRAIN_MS (5000) to finish.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { create } from '@bufbuild/protobuf';
import { createClient } from '@connectrpc/connect';
import { createGrpcTransport } from '@connectrpc/connect-node';
import { ConversationEventSchema, ConversationService } from '@bedrock/contracts';
import { createRedisTransport } from '@bedrock/platform';
import { createLogger, generateServiceCredentials, serviceTokenInterceptor, USER_HEADER } from '@bedrock/platform/server';
import { Redis } from 'ioredis';
import { readConversationConfig } from '../../conversation/src/config.ts';
import { startConversationService } from '../../conversation/src/create-conversation-service.ts';
import { generateToken, hashToken } from '../src/auth/token-store.ts';
import { createTestDatabase } from '@bedrock/testkit/database';

const WATCHERS = Number(process.env.BENCH_WATCHERS ?? 10_000);
const CONVERSATIONS = Number(process.env.BENCH_CONVERSATIONS ?? 100);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 20);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 15);
/** A round every this many ms, each appending one token delta to BENCH_PER_ROUND conversations. */
const ROUND_MS = Number(process.env.BENCH_ROUND_MS ?? 1000);
const PER_ROUND = Number(process.env.BENCH_PER_ROUND ?? 10);
const DRAIN_MS = Number(process.env.BENCH_DRAIN_MS ?? 5000);
const here = (p: string) => fileURLToPath(new URL(p, import.meta.url));
const now = () => performance.timeOrigin + performance.now();
const mib = (kb: number) => `${(kb / 1024).toFixed(0)} MiB`;

function rssKb(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) : NaN;
}

/** Resolves with the first stdout line of `child` that `pick` turns into a value. */
function lineOf<T>(child: ChildProcess, pick: (line: string) => T | undefined, what: string): Promise<T> {
  return new Promise((resolve, reject) => {
    const rl = createInterface({ input: child.stdout! });
    rl.on('line', (line) => {
      const v = pick(line);
      if (v !== undefined) {
        rl.close();
        resolve(v);
      }
    });
    child.once('exit', (code) => reject(new Error(`${what}: process exited with ${code}`)));
  });
}

const json = (line: string) => {
  try {
    return JSON.parse(line) as Record<string, unknown>;
  } catch {
    return undefined;
  }
};

const db = await createTestDatabase('bench_watchers');
const prefix = `bench-watchers-${process.pid}`;
const logger = createLogger({ service: 'bench', level: 'warn' });
const transport = createRedisTransport({ redisUrl: 'redis://127.0.0.1:6379', prefix, onError: () => undefined });
// Service identity: the conversation service accepts web-bff's token; the web-bff process reads it from a file.
const services = generateServiceCredentials(['web-bff']);
const secrets = mkdtempSync(join(tmpdir(), 'bedrock-bench-secrets-'));
const serviceTokenFile = join(secrets, 'web-bff.token');
writeFileSync(serviceTokenFile, `${services.tokens['web-bff']}\n`, { mode: 0o600 });
const conversation = await startConversationService(
  readConversationConfig({ DATABASE_URL: db.url, BEDROCK_GRPC_PORT: '0', BEDROCK_METRICS_PORT: '0', BEDROCK_HOST: '127.0.0.1', BEDROCK_SANDBOX: 'available', LOG_LEVEL: 'warn' }),
  { transport: createRedisTransport({ redisUrl: 'redis://127.0.0.1:6379', prefix, onError: () => undefined }), logger, servicePeers: services.peers },
);
const children: ChildProcess[] = [];
try {
  // Straight to the conversation service, as web-bff calls it.
  const direct = createClient(ConversationService, createGrpcTransport({ baseUrl: conversation.grpcUrl, interceptors: [serviceTokenInterceptor(services.tokens['web-bff']!)] }));
  const ids: string[] = [];
  for (let i = 0; i < CONVERSATIONS; i++) {
    const res = await direct.createConversation({ cwd: '/tmp' }, { headers: { [USER_HEADER]: 'bench' } });
    ids.push(res.conversation!.id);
  }

  const token = generateToken();
  const bff = spawn(process.execPath, ['--import', 'tsx', here('../src/main.ts')], {
    env: {
      ...process.env,
      BEDROCK_PORT: '0',
      BEDROCK_GRPC_PORT: '0',
      BEDROCK_METRICS_PORT: '0',
      BEDROCK_HOST: '127.0.0.1',
      BEDROCK_CONVERSATION_URL: conversation.grpcUrl,
      BEDROCK_REDIS_PREFIX: prefix,
      REDIS_URL: 'redis://127.0.0.1:6379',
      BEDROCK_TOKENS: `bench:${hashToken(token)}`,
      BEDROCK_SERVICE_TOKEN_FILE: serviceTokenFile,
      LOG_LEVEL: 'info',
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  children.push(bff);
  const grpcPort = await lineOf(bff, (l) => (json(l)?.msg === 'web-bff started' ? (json(l)!.grpc_port as number) : undefined), 'web-bff');
  const idleRss = rssKb(bff.pid!);

  const clients = spawn(process.execPath, ['--import', 'tsx', here('./support/watch-clients.ts')], {
    env: {
      ...process.env,
      BENCH_URL: `http://127.0.0.1:${grpcPort}`,
      BENCH_TOKEN: token,
      BENCH_CONVERSATIONS: JSON.stringify(ids),
      BENCH_WATCHERS: String(WATCHERS),
      BENCH_CONNECTIONS: String(CONNECTIONS),
    },
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  children.push(clients);
  const ready = await lineOf(clients, (l) => (json(l)?.ready ? json(l)! : undefined), 'watchers');
  const watchingRss = rssKb(bff.pid!);
  const redis = new Redis('redis://127.0.0.1:6379');
  const blockingReads = String(await redis.call('CLIENT', 'LIST'))
    .split('\n')
    .filter((l) => l.includes('name=bedrock-blocking-read')).length;
  await redis.quit();

  // Rounds of one token delta per conversation, stamped with the time it is appended.
  let peakRss = watchingRss;
  for (let round = 0; round < ROUNDS; round++) {
    const t0 = Date.now();
    const targets = Array.from({ length: PER_ROUND }, (_, i) => ids[(round * PER_ROUND + i) % ids.length]!);
    await Promise.all(
      targets.map(async (id) => {
        const last = await transport.streams.last(id);
        await transport.streams.appendEphemeral(create(ConversationEventSchema, { conversationId: id, sequence: last.sequence, kind: { case: 'tokenDelta', value: { text: String(now()) } } }));
      }),
    );
    peakRss = Math.max(peakRss, rssKb(bff.pid!));
    await new Promise((r) => setTimeout(r, Math.max(0, ROUND_MS - (Date.now() - t0))));
  }
  await new Promise((r) => setTimeout(r, DRAIN_MS));
  clients.stdin!.write('report\n');
  const report = await lineOf(clients, (l) => (json(l)?.deliveries !== undefined ? json(l)! : undefined), 'report');
  const ms = (v: unknown) => `${Number(v).toFixed(1)} ms`;
  const expected = (ROUNDS * PER_ROUND * WATCHERS) / CONVERSATIONS;

  console.log(`watchers:                         ${WATCHERS} on ${CONVERSATIONS} conversations over ${CONNECTIONS} HTTP/2 connections (one web-bff process)`);
  console.log(`all watching after:               ${(Number(ready.setupMs) / 1000).toFixed(1)} s (snapshot each), stream errors ${ready.errors}`);
  console.log(`blocking Redis reads (shared):    ${blockingReads} connections for ${WATCHERS} watchers`);
  console.log(`events published:                 ${ROUNDS * PER_ROUND} token deltas (${PER_ROUND} every ${ROUND_MS} ms, ${WATCHERS / CONVERSATIONS} watchers each: ${(PER_ROUND * WATCHERS * 1000) / CONVERSATIONS / ROUND_MS} deliveries/s)`);
  console.log(`deliveries:                       ${report.deliveries} of ${expected} within ${DRAIN_MS} ms of the last event; events that reached every watcher: ${report.eventsReachingEveryWatcher} of ${ROUNDS * PER_ROUND}`);
  console.log(`delay stream → one watcher:       p50 ${ms(report.deliveryP50)}, p99 ${ms(report.deliveryP99)}, max ${ms(report.deliveryMax)}`);
  console.log(`delay stream → every watcher:     p50 ${ms(report.everyWatcherP50)}, p99 ${ms(report.everyWatcherP99)} (per event, the last of its watchers)`);
  console.log(`web-bff RSS:                      idle ${mib(idleRss)}, watching ${mib(watchingRss)}, peak while publishing ${mib(peakRss)}`);
  console.log(`web-bff memory per watcher:       ${(((watchingRss - idleRss) * 1024) / WATCHERS / 1024).toFixed(1)} KiB`);
  console.log(`load average during the run:      ${readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ')} on ${(await import('node:os')).cpus().length} CPUs`);
} finally {
  for (const c of children) c.kill('SIGKILL');
  rmSync(secrets, { recursive: true, force: true });
  await conversation.stop();
  await transport.close();
  await db.drop();
}
