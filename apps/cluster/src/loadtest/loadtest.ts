/**
 * `make loadtest` (docs/capacity.md, "The load test"): N synthetic users, each driving a conversation
 * through the public API (send, watch until at rest, think, again), against the local cluster of real
 * service processes, the model a local Messages API server scripted to call one tool per turn. N ramps
 * up step by step until a service-level objective breaks; each step reports throughput, latencies and
 * each component's saturation.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import pg from 'pg';
import { createClient, type Client } from '@connectrpc/connect';
import { createConnectTransport } from '@connectrpc/connect-node';
import { ConversationService, isResting } from '@bedrock/contracts';
import { startMessagesApiServer, type ReceivedRequest, type ScriptedResponse } from '@bedrock/offline-model';
import { startCluster, type Cluster } from '../cluster.ts';
import { addBuckets, bucketDelta, histogramBuckets, observations, quantile, type Buckets } from './prometheus.ts';
import { sample, usageBetween, type Usage } from './sampler.ts';

export interface LoadtestOptions {
  readonly databaseUrl: string;
  readonly redisUrl: string;
  /** Conversations of the steps, in order; the first is the quiet baseline. */
  readonly steps: readonly number[];
  /** How long each step is measured, after a warm-up of a quarter of it, ms. */
  readonly stepMs: number;
  /** The model's answer time per request, ms (two requests a turn). */
  readonly modelMs: number;
  /** A user's pause between turns, ms (jittered ±50%). */
  readonly thinkMs: number;
  /**
   * SLO: event → effect p99, ms (`bedrock_job_latency_seconds{queue="conversation-events"}`: an event
   * ready on the queue → its effects published, over every conversation replica).
   */
  readonly eventToEffectP99Ms: number;
  /** SLO: per-turn overhead (a turn's time less the model's scripted time) at most this times the first step's. */
  readonly overheadFactor: number;
  readonly replicas?: { conversation?: number; gateway?: number; toolRunner?: number };
  readonly progress?: (line: string) => void;
}

export interface StepReport {
  readonly conversations: number;
  readonly seconds: number;
  readonly turns: number;
  readonly turnsPerSecond: number;
  readonly eventsPerSecond: number;
  /** Event ready → effects published, ms. */
  readonly eventToEffect: { readonly p50: number | null; readonly p99: number | null };
  /** Queue wait of conversation-events, tool-exec and llm-requests, p99 ms. */
  readonly queueLagP99: Record<string, number | null>;
  /** A turn: send → at rest, ms; overhead = that less the model's scripted time. */
  readonly turn: { readonly p50: number; readonly p99: number; readonly overheadP50: number };
  readonly usage: Usage;
  /** The SLOs this step broke (empty: it held). */
  readonly broken: string[];
  /** The component with the most CPU against what it may use (a single-threaded one: 1 core; the host: its cores). */
  readonly busiest: { readonly component: string; readonly cores: number };
  readonly failedTurns: number;
  /** What the failed turns met, each different reason once (the client's error message). */
  readonly failures: string[];
}

export interface LoadtestReport {
  readonly machine: { readonly cores: number; readonly model: string };
  readonly options: Omit<LoadtestOptions, 'progress' | 'databaseUrl' | 'redisUrl'>;
  readonly steps: StepReport[];
  /** The last step that held every SLO, and the first that broke one (with what broke and the busiest component). */
  readonly ceiling: { readonly held: number | null; readonly broke: StepReport | null };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const percentile = (sorted: number[], q: number) =>
  sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]! : 0;

/** One tool per turn, then the answer; each after `modelMs`. Scripted by the history, so a repeated request gets the same answer. */
function script(modelMs: number) {
  return (request: ReceivedRequest): ScriptedResponse => {
    const messages = request.body?.messages ?? [];
    const last = messages[messages.length - 1];
    const answered = last?.role === 'user' && Array.isArray(last.content) && last.content.some((b) => b.type === 'tool_result');
    return answered
      ? { kind: 'message', content: [{ type: 'text', text: 'done' }], delayMs: modelMs }
      : { kind: 'message', content: [{ type: 'tool_use', name: 'bash', input: { command: 'echo load' } }], delayMs: modelMs };
  };
}

interface User {
  stop(): Promise<void>;
  readonly turns: number[];
  failures: number;
  readonly reasons: Set<string>;
}

/**
 * A user: send, wait (watching) until at rest, think, again — until stopped. Stopping lets the turn
 * in flight come to rest first, so the next step's user of the same conversation finds it idle.
 */
function startUser(client: Client<typeof ConversationService>, conversationId: string, options: LoadtestOptions): User {
  const abort = new AbortController();
  let stopping = false;
  const user: User = { turns: [], failures: 0, reasons: new Set(), stop: async () => undefined };
  let restWaiter: (() => void) | undefined;
  let seenBusy = false;
  const watching = (async () => {
    while (!abort.signal.aborted) {
      try {
        for await (const res of client.watchConversation({ conversationId }, { signal: abort.signal })) {
          const e = res.event;
          const state =
            e?.kind.case === 'stateChanged'
              ? e.kind.value.state
              : e?.kind.case === 'snapshot'
                ? e.kind.value.conversation?.state
                : undefined;
          if (!state) continue;
          if (!isResting(state.kind)) seenBusy = true;
          else if (seenBusy && restWaiter) restWaiter();
        }
      } catch {
        if (!abort.signal.aborted) await sleep(200);
      }
    }
  })();
  const loop = (async () => {
    let turn = 0;
    await sleep(Math.random() * options.thinkMs);
    while (!stopping) {
      const started = performance.now();
      seenBusy = false;
      const rested = new Promise<void>((resolve) => (restWaiter = resolve));
      try {
        await client.sendMessage({ conversationId, text: `turn ${++turn}` }, { signal: abort.signal });
        await Promise.race([rested, sleep(60_000).then(() => Promise.reject(new Error('turn took over 60 s')))]);
        user.turns.push(performance.now() - started);
      } catch (err) {
        if (abort.signal.aborted) break;
        user.failures++;
        user.reasons.add(err instanceof Error ? err.message : String(err));
        await sleep(500);
      }
      restWaiter = undefined;
      if (!stopping) await sleep(options.thinkMs * (0.5 + Math.random()));
    }
  })();
  user.stop = async () => {
    stopping = true;
    await loop;
    abort.abort();
    await watching;
  };
  return user;
}

async function scrape(cluster: Cluster, service: string, family: string, match: Record<string, string>): Promise<Buckets> {
  let sum: Buckets = new Map();
  for (const p of cluster.processes.filter((x) => x.service === service)) {
    const text = await fetch(`http://127.0.0.1:${p.metricsPort}/metrics`)
      .then((r) => r.text())
      .catch(() => '');
    sum = addBuckets(sum, histogramBuckets(text, family, match));
  }
  return sum;
}

const LAGS: Record<string, string> = {
  'conversation-events': 'conversation',
  'tool-exec-restricted': 'tool-runner',
  'llm-requests': 'llm-gateway',
};

async function scrapeAll(cluster: Cluster) {
  const latency = await scrape(cluster, 'conversation', 'bedrock_job_latency_seconds', { queue: 'conversation-events' });
  const lags: Record<string, Buckets> = {};
  for (const [queue, service] of Object.entries(LAGS))
    lags[queue] = await scrape(cluster, service, 'bedrock_queue_wait_seconds', { queue });
  return { latency, lags };
}

const ms = (seconds: number | undefined) => (seconds === undefined ? null : Math.round(seconds * 10_000) / 10);

export async function runLoadtest(options: LoadtestOptions): Promise<LoadtestReport> {
  const log = options.progress ?? (() => undefined);
  const llm = await startMessagesApiServer({ fallback: script(options.modelMs) });
  const dir = mkdtempSync(join(tmpdir(), 'bedrock-loadtest-'));
  const database = `bedrock_loadtest_${process.pid}`;
  const databaseUrl = new URL(options.databaseUrl);
  databaseUrl.pathname = `/${database}`;
  const prefix = `loadtest-${process.pid}`;
  log(`starting the cluster (logs in ${dir}/logs)`);
  const cluster = await startCluster({
    dir,
    databaseUrl: databaseUrl.href,
    redisUrl: options.redisUrl,
    redisPrefix: prefix,
    ...(options.replicas ? { replicas: options.replicas } : {}),
    env: { ANTHROPIC_API_KEY: 'loadtest', ANTHROPIC_BASE_URL: llm.url, LOG_LEVEL: 'warn', BEDROCK_DEFAULT_MODEL: 'claude-haiku-4-5' },
  });
  const pool = new pg.Pool({ connectionString: databaseUrl.href, max: 1 });
  const redis = new Redis(options.redisUrl, { maxRetriesPerRequest: 1 });
  const transport = createConnectTransport({
    // h2c, one connection for every user (as a client library would multiplex).
    baseUrl: cluster.grpcUrl,
    httpVersion: '2',
    interceptors: [
      (next) => (req) => {
        req.header.set('authorization', `Bearer ${cluster.token}`);
        return next(req);
      },
    ],
  });
  const client = createClient(ConversationService, transport);
  const targets = { processes: cluster.processes, pool, database, redis };
  const conversations: string[] = [];
  const steps: StepReport[] = [];
  let quietOverhead: number | undefined;
  try {
    for (const n of options.steps) {
      while (conversations.length < n) conversations.push((await client.createConversation({})).conversation!.id);
      const users = conversations.slice(0, n).map((id) => startUser(client, id, options));
      await sleep(options.stepMs / 4); // warm-up: every user in its loop
      const turnsBefore = users.map((u) => u.turns.length);
      const before = { sample: await sample(targets), metrics: await scrapeAll(cluster) };
      const deadline = Date.now() + options.stepMs;
      while (Date.now() < deadline) {
        await sleep(Math.min(2000, deadline - Date.now()));
        const done = users.reduce((s, u, i) => s + u.turns.length - turnsBefore[i]!, 0);
        log(
          `  ${n} conversations: ${Math.round((options.stepMs - (deadline - Date.now())) / 1000)} s of ${options.stepMs / 1000} s, ${done} turns`,
        );
      }
      const after = { sample: await sample(targets), metrics: await scrapeAll(cluster) };
      const turnsAfter = users.map((u) => u.turns.length);
      await Promise.all(users.map((u) => u.stop()));
      const turns = users.flatMap((u, i) => u.turns.slice(turnsBefore[i]!, turnsAfter[i]!)).sort((a, b) => a - b);
      const latency = bucketDelta(after.metrics.latency, before.metrics.latency);
      const usage = usageBetween(before.sample, after.sample);
      const overheads = turns.map((t) => t - 2 * options.modelMs).sort((a, b) => a - b);
      const overheadP50 = percentile(overheads, 0.5);
      quietOverhead ??= overheadP50;
      const p99 = ms(quantile(latency, 0.99));
      const broken: string[] = [];
      if (p99 !== null && p99 > options.eventToEffectP99Ms) broken.push(`event → effect p99 ${p99} ms > ${options.eventToEffectP99Ms} ms`);
      if (steps.length > 0 && overheadP50 > options.overheadFactor * quietOverhead)
        broken.push(`turn overhead ${overheadP50.toFixed(0)} ms > ${options.overheadFactor} × ${quietOverhead.toFixed(0)} ms (quiet)`);
      const failedTurns = users.reduce((s, u) => s + u.failures, 0);
      const failures = [...new Set(users.flatMap((u) => [...u.reasons]))];
      if (failedTurns > 0) broken.push(`${failedTurns} turns failed (${failures.join('; ')})`);
      // Each service process and Redis run one main thread: 1 core is their ceiling; Postgres spreads over the host's cores.
      const cores = cpus().length;
      const busiest = Object.entries(usage.components)
        .map(([component, u]) => ({ component, cores: u.cores, share: u.cores / (component === 'postgres' ? cores : 1) }))
        .sort((a, b) => b.share - a.share)[0]!;
      const report: StepReport = {
        conversations: n,
        seconds: usage.seconds,
        turns: turns.length,
        turnsPerSecond: turns.length / usage.seconds,
        eventsPerSecond: observations(latency) / usage.seconds,
        eventToEffect: { p50: ms(quantile(latency, 0.5)), p99 },
        queueLagP99: Object.fromEntries(
          Object.keys(LAGS).map((q) => [q, ms(quantile(bucketDelta(after.metrics.lags[q]!, before.metrics.lags[q]!), 0.99))]),
        ),
        turn: { p50: percentile(turns, 0.5), p99: percentile(turns, 0.99), overheadP50 },
        usage,
        broken,
        busiest: { component: busiest.component, cores: busiest.cores },
        failedTurns,
        failures,
      };
      steps.push(report);
      log(formatStep(report));
      if (broken.length > 0) break;
    }
  } finally {
    await cluster.stop().catch(() => undefined);
    await llm.close().catch(() => undefined);
    await pool.end().catch(() => undefined);
    const admin = new pg.Client({ connectionString: options.databaseUrl });
    await admin
      .connect()
      .then(() => admin.query(`DROP DATABASE IF EXISTS "${database}" WITH (FORCE)`))
      .catch(() => undefined);
    await admin.end().catch(() => undefined);
    const keys = await redis.keys(`${prefix}:*`).catch(() => [] as string[]);
    for (let i = 0; i < keys.length; i += 500) await redis.del(...keys.slice(i, i + 500)).catch(() => undefined);
    redis.disconnect();
    rmSync(dir, { recursive: true, force: true });
  }
  const broke = steps.find((s) => s.broken.length > 0) ?? null;
  const held = [...steps].reverse().find((s) => s.broken.length === 0)?.conversations ?? null;
  const { progress: _progress, databaseUrl: _db, redisUrl: _redis, ...shown } = options;
  return { machine: { cores: cpus().length, model: cpus()[0]?.model ?? '' }, options: shown, steps, ceiling: { held, broke } };
}

/** One line per step, as the progress shows it. */
export function formatStep(s: StepReport): string {
  const top = Object.entries(s.usage.components)
    .sort((a, b) => b[1].cores - a[1].cores)
    .slice(0, 4)
    .map(([name, u]) => `${name} ${u.cores.toFixed(2)}`)
    .join(', ');
  return [
    `${String(s.conversations).padStart(4)} conversations: ${s.turnsPerSecond.toFixed(1)} turns/s, ${s.eventsPerSecond.toFixed(0)} events/s,`,
    `event→effect p50 ${s.eventToEffect.p50 ?? '-'} / p99 ${s.eventToEffect.p99 ?? '-'} ms,`,
    `turn p50 ${s.turn.p50.toFixed(0)} ms (overhead ${s.turn.overheadP50.toFixed(0)} ms),`,
    `pg ${s.usage.pgTps.toFixed(0)} tps, redis ${s.usage.redisOpsPerSecond.toFixed(0)} ops/s; cores: ${top}`,
    s.broken.length ? `; BROKE: ${s.broken.join('; ')}` : '',
  ].join(' ');
}
