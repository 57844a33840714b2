/**
 * How many concurrent watchers one web-bff process holds, how fast an event reaches all of them,
 * and what they cost in memory. Real conversation service, Postgres and Redis; web-bff and the
 * watchers (bench/support/watch-clients.ts, BENCH_CLIENT picks their client) each in their own
 * process; loopback only. The BENCH_* settings are below. Prints figures next to the issue-14
 * targets, asserts nothing. docs/web-bff.md (the benchmark) and docs/testing.md.
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
import { ConversationEventSchema, ConversationService, USER_HEADER } from '@bedrock/contracts';
import { createRedisTransport } from '@bedrock/platform';
import { createLogger, generateServiceCredentials, serviceTokenInterceptor } from '@bedrock/platform/server';
import { Redis } from 'ioredis';
import { createConversationService, readConversationConfig } from '@bedrock/conversation';
import { generateToken, hashToken } from '@bedrock/web-bff';
import { createTestDatabase } from '@bedrock/testkit/database';

/** Watchers per web-bff (BENCH_WATCHERS), spread over BENCH_CONVERSATIONS conversations and BENCH_CONNECTIONS HTTP/2 connections. */
const WATCHERS = Number(process.env.BENCH_WATCHERS ?? 10_000);
const CONVERSATIONS = Number(process.env.BENCH_CONVERSATIONS ?? 100);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 20);
/**
 * One phase per rate, in deliveries/s (BENCH_RATES): a delivery is one event reaching one
 * watcher, so events/s = rate / watchers per conversation.
 */
const RATES = (process.env.BENCH_RATES ?? '1000,20000').split(',').map(Number);
/** Each phase appends token deltas to the conversations in turn for this long (BENCH_PHASE_MS), evenly every TICK_MS. */
const PHASE_MS = Number(process.env.BENCH_PHASE_MS ?? 10_000);
/** Wait after each phase before the next (BENCH_DRAIN_MS). */
const DRAIN_MS = Number(process.env.BENCH_DRAIN_MS ?? 3000);
/** BENCH_CPU_PROF=<dir>: web-bff runs with --cpu-prof and writes its profile there on exit (one directory per delivery mode). */
const CPU_PROF = process.env.BENCH_CPU_PROF;
/**
 * One web-bff process per delivery mode (BEDROCK_WATCH_DELIVERY; BENCH_DELIVERIES), each with its
 * own conversations and watchers, the phases alternating between them.
 */
const DELIVERIES = (process.env.BENCH_DELIVERIES ?? 'pull,push').split(',');
const TICK_MS = 10;
const here = (p: string) => fileURLToPath(new URL(p, import.meta.url));
const now = () => performance.timeOrigin + performance.now();
const mib = (kb: number) => `${(kb / 1024).toFixed(0)} MiB`;

/** CPU time of a process so far, ms. */
function cpuMs(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / 100;
}

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
const conversationTransport = createRedisTransport({ redisUrl: 'redis://127.0.0.1:6379', prefix, onError: () => undefined });
const conversation = createConversationService(
  readConversationConfig(
    {},
    {
      log: { level: 'warn' },
      server: { grpcPort: 0, metricsPort: 0, host: '127.0.0.1' },
      database: { url: db.url },
      conversations: { sandbox: 'available' },
      // The conversations run in /tmp (no workspace storage here).
      workspaces: { hostPaths: 'on' },
    },
  ),
  { transport: conversationTransport, logger, servicePeers: services.peers },
);
await conversation.start();
const children: ChildProcess[] = [];
try {
  // Straight to the conversation service, as web-bff calls it.
  const direct = createClient(
    ConversationService,
    createGrpcTransport({ baseUrl: conversation.grpcUrl, interceptors: [serviceTokenInterceptor(services.tokens['web-bff']!)] }),
  );
  const token = generateToken();
  const perConversation = WATCHERS / CONVERSATIONS;
  const mark = (ok: boolean) => (ok ? 'met' : 'MISSED');
  const ms = (v: unknown) => `${Number(v).toFixed(1)} ms`;

  /** One web-bff with its own conversations and its own watchers' process. */
  async function startSide(delivery: string) {
    const ids: string[] = [];
    for (let i = 0; i < CONVERSATIONS; i++) {
      const res = await direct.createConversation({ cwd: '/tmp' }, { headers: { [USER_HEADER]: 'bench' } });
      ids.push(res.conversation!.id);
    }
    const bff = spawn(
      process.execPath,
      [
        ...(CPU_PROF ? ['--cpu-prof', `--cpu-prof-dir=${join(CPU_PROF, delivery)}`] : []),
        '--import',
        'tsx',
        here('../services/web-bff/src/main.ts'),
      ],
      {
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
          BEDROCK_WATCH_DELIVERY: delivery,
          // One user holds every watcher here.
          BEDROCK_WATCH_MAX_PER_USER: '0',
          LOG_LEVEL: 'info',
        },
        stdio: ['ignore', 'pipe', 'inherit'],
      },
    );
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
    const attachCpu0 = cpuMs(bff.pid!);
    const ready = await lineOf(clients, (l) => (json(l)?.ready ? json(l)! : undefined), 'watchers');
    const attachCpu = cpuMs(bff.pid!) - attachCpu0;
    const watchingRss = rssKb(bff.pid!);
    // The conversations' last durable sequence (no durable event comes during the run): each
    // token delta is one append, stamped just before it.
    const sequences = await Promise.all(ids.map(async (id) => (await transport.streams.last(id)).sequence));
    return {
      delivery,
      ids,
      bff,
      clients,
      idleRss,
      watchingRss,
      peakRss: watchingRss,
      ready,
      attachCpu,
      sequences,
      next: 0,
      phaseCpu: new Map<number, number>(),
      published: new Map<number, number>(),
      loads: new Map<number, string>(),
    };
  }
  type Side = Awaited<ReturnType<typeof startSide>>;

  async function phase(side: Side, rate: number): Promise<void> {
    const { bff, ids, sequences } = side;
    const eventsPerSecond = rate / perConversation;
    const cpu0 = cpuMs(bff.pid!);
    const t0 = Date.now();
    let sent = 0;
    const appends: Promise<unknown>[] = [];
    while (Date.now() - t0 < PHASE_MS) {
      const due = Math.floor(((Date.now() - t0) / 1000) * eventsPerSecond);
      for (; sent < due; sent++) {
        const i = side.next++ % ids.length;
        const id = ids[i]!;
        appends.push(
          transport.streams.appendEphemeral(
            create(ConversationEventSchema, {
              conversationId: id,
              sequence: sequences[i]!,
              kind: { case: 'tokenDelta', value: { text: `${rate}:${now()}` } },
            }),
          ),
        );
      }
      side.peakRss = Math.max(side.peakRss, rssKb(bff.pid!));
      await new Promise((r) => setTimeout(r, TICK_MS));
    }
    await Promise.all(appends);
    side.phaseCpu.set(rate, cpuMs(bff.pid!) - cpu0);
    side.published.set(rate, sent);
    side.loads.set(rate, readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' '));
    await new Promise((r) => setTimeout(r, DRAIN_MS));
  }

  // Before (pull: every watcher's own loop writes each event) and after (push: the tail writes
  // to caught-up watchers), each with its own web-bff, conversations and watchers; the phases
  // alternate between them, so both see the same machine.
  const sides: Side[] = [];
  for (const delivery of DELIVERIES) sides.push(await startSide(delivery));
  for (const [r, rate] of RATES.entries()) {
    for (const side of r % 2 === 0 ? sides : [...sides].reverse()) await phase(side, rate);
  }
  // Connections web-bff reads streams on (counted while every conversation is watched).
  const redis = new Redis('redis://127.0.0.1:6379');
  const clientNames = String(await redis.call('CLIENT', 'LIST')).split('\n');
  const blockingReads = clientNames.filter(
    (l) => l.includes('name=bedrock-blocking-read') || l.includes('name=bedrock-stream-follower'),
  ).length;
  await redis.quit();
  console.log(
    `watchers:                         ${WATCHERS} on ${CONVERSATIONS} conversations (${perConversation} each) over ${CONNECTIONS} HTTP/2 connections per web-bff process (${process.env.BENCH_CLIENT ?? 'raw'} gRPC clients); one web-bff per delivery: ${DELIVERIES.join(', ')}`,
  );
  console.log(`Redis connections reading streams: ${blockingReads} for ${CONVERSATIONS * sides.length} watched conversations`);
  console.log(
    'delivery | rate (deliveries/s) | events | deliveries       | every watcher reached | one watcher p50 / p99 / max   | every watcher p50 / p99 | web-bff CPU | p99 goal ≤ 50 ms | load average',
  );
  for (const side of sides) {
    side.clients.stdin!.write('report\n');
    const report = await lineOf(side.clients, (l) => (json(l)?.phases !== undefined ? json(l)! : undefined), 'report');
    (side as Side & { report?: Record<string, unknown> }).report = report;
  }
  for (const rate of RATES) {
    for (const side of sides) {
      const report = (side as Side & { report?: Record<string, unknown> }).report!;
      const r = (report.phases as Record<string, Record<string, number>>)[String(rate)] ?? {};
      const published = side.published.get(rate)!;
      const expected = published * perConversation;
      const cpuShare = side.phaseCpu.get(rate)! / PHASE_MS;
      console.log(
        `${side.delivery.padEnd(8)} | ${String(rate).padStart(19)} | ${String(published).padStart(6)} | ${`${r.deliveries ?? 0} of ${expected}`.padEnd(16)} | ${`${r.eventsReachingEveryWatcher ?? 0} of ${published}`.padEnd(21)} | ` +
          `${`${ms(r.deliveryP50)} / ${ms(r.deliveryP99)} / ${ms(r.deliveryMax)}`.padEnd(29)} | ${`${ms(r.everyWatcherP50)} / ${ms(r.everyWatcherP99)}`.padEnd(23)} | ${(cpuShare * 100).toFixed(0).padStart(4)}% core | ${mark(Number(r.everyWatcherP99) <= 50).padEnd(16)} | ${side.loads.get(rate)}`,
      );
    }
  }
  for (const side of sides) {
    const report = (side as Side & { report?: Record<string, unknown> }).report!;
    const perWatcherKib = ((side.watchingRss - side.idleRss) * 1024) / WATCHERS / 1024;
    const attachS = Number(side.ready.setupMs) / 1000;
    console.log(
      `${side.delivery}: all watching after ${attachS.toFixed(1)} s (web-bff CPU ${(side.attachCpu / 1000).toFixed(1)} s, ${(side.attachCpu / WATCHERS).toFixed(2)} ms per attach; stream errors ${side.ready.errors}) [goal ≤ 5 s: ${mark(attachS <= 5)}]; ` +
        `RSS idle ${mib(side.idleRss)}, watching ${mib(side.watchingRss)}, peak ${mib(side.peakRss)}, ${perWatcherKib.toFixed(1)} KiB per watcher [goal ≤ 16 KiB: ${mark(perWatcherKib <= 16)}]; ` +
        `watchers process CPU ${(Number((report.cpu as { user: number }).user + (report.cpu as { system: number }).system) / 1e6).toFixed(1)} s`,
    );
  }
  console.log(
    `load average at the end:          ${readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ')} on ${(await import('node:os')).cpus().length} CPUs`,
  );
  if (CPU_PROF) {
    for (const side of sides) {
      side.bff.kill('SIGTERM');
      await new Promise((r) => side.bff.once('exit', r));
    }
    console.log(`web-bff CPU profiles written to ${CPU_PROF}/<delivery>`);
  }
} finally {
  for (const c of children) c.kill('SIGKILL');
  rmSync(secrets, { recursive: true, force: true });
  const step = async (what: string, fn: () => Promise<unknown>) => {
    const t0 = Date.now();
    await fn();
    if (process.env.BENCH_DEBUG) console.error(`${what}: ${Date.now() - t0} ms`);
  };
  await step('conversation.stop', () => conversation.stop());
  await step('transport.close', () => transport.close());
  // Given to the conversation service, which does not close what it did not open.
  await step('conversation transport.close', () => conversationTransport.close());
  await step('db.drop', () => db.drop());
}
