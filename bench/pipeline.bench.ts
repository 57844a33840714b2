/**
 * Issue 7's benchmark, against the local PostgreSQL and Redis: N tool calls of `true` (or `think`,
 * BENCH_TOOL) in one turn through the whole distributed pipeline (every service its own process,
 * Redis between them) versus the same turn in one process (the embedded mode), with the overhead
 * per queue hop; and the time from the Cancel RPC to the idle state on a watcher's stream. Prints
 * figures; asserts nothing. The BENCH_* settings are below; the figures are in docs/testing.md.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { loadavg } from 'node:os';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { createClient, type Client } from '@connectrpc/connect';
import { createConnectTransport } from '@connectrpc/connect-node';
import { ConversationService, StateKind } from '@bedrock/contracts';
import { startCluster } from '@bedrock/cluster';
import { startEmbedded } from '@bedrock/embedded';
import { startMessagesApiServer, type ScriptedResponse } from '@bedrock/offline-model';
import { startOtlpReceiver } from '@bedrock/testkit/otlp-receiver';
import { stageTable, toolStages, tracesOf, type Stage } from './support/turn-stages.ts';

/** Tool calls in each timed turn (BENCH_TOOLS, default 40). */
const TOOLS = Number(process.env.BENCH_TOOLS ?? 40);
/**
 * BENCH_TOOL: `bash` (the default), each call `bash -c true` in the sandbox; or `think`, a tool the
 * runner answers without starting a process: the same turn, queues, writes and streams, without
 * the kernel's part of a tool (the helper, its namespaces, the fork and exec of bash).
 */
const TOOL = process.env.BENCH_TOOL ?? 'bash';
if (TOOL !== 'bash' && TOOL !== 'think') throw new Error(`BENCH_TOOL=${TOOL}: use bash or think`);
const TOOL_CALL = TOOL === 'think' ? { name: 'think', input: { thoughts: 'next' } } : { name: 'bash', input: { command: 'true' } };
const TOOL_LABEL = TOOL === 'think' ? '`think` (no process started)' : '`true`';
/** Turns timed in each mode after a warm-up one (BENCH_TURNS, default 5); the median is reported (one turn is noisy on a shared machine). */
const TURNS = Number(process.env.BENCH_TURNS ?? 5);

async function medianTurn(
  api: Client<typeof ConversationService>,
  llm: { enqueue(...r: ScriptedResponse[]): void },
  conversations: Set<string>,
): Promise<number> {
  await timedTurn(api, llm, conversations); // warm-up
  const turns: number[] = [];
  for (let i = 0; i < TURNS; i++) turns.push(await timedTurn(api, llm, conversations));
  return turns.sort((a, b) => a - b)[Math.floor(turns.length / 2)]!;
}
/** Cancels timed in the distributed pipeline, Cancel RPC → idle on a watcher (BENCH_CANCELS, default 20): median and p99. */
const CANCELS = Number(process.env.BENCH_CANCELS ?? 20);
/**
 * BENCH_STAGES=1: tracing on in every process, to a receiver in this one, and a table of where
 * each tool's time goes, read from the spans (support/turn-stages.ts). The turn figures then
 * include tracing's own cost: compare them only with runs that had it on too.
 */
const STAGES_ON = process.env.BENCH_STAGES === '1';
/** BENCH_DISTRIBUTED=0 skips the distributed part: the one-process figures only. */
const DISTRIBUTED = process.env.BENCH_DISTRIBUTED !== '0';
/** Goal per tool in one process, ms (issue 31). */
const GOAL_PER_TOOL_MS = 6;

const load = (): string =>
  loadavg()
    .map((l) => l.toFixed(1))
    .join(' ');

interface Side {
  readonly name: string;
  readonly api: Client<typeof ConversationService>;
  readonly turns: number[];
  /** The event loop's stalls during this side's turns, ms (the one process's loop: the runner's too). */
  readonly stalls: number[];
  /** The conversations of its turns (their traces, with BENCH_STAGES=1). */
  readonly conversations: Set<string>;
}

/** Measures how late a 1 ms timer fires, attributed to the side whose turn runs. */
function stallMeter(): { during<T>(side: Side, work: () => Promise<T>): Promise<T>; stop(): void } {
  let current: Side | undefined;
  let last = performance.now();
  const timer = setInterval(() => {
    const at = performance.now();
    current?.stalls.push(Math.max(0, at - last - 1));
    last = at;
  }, 1);
  return {
    async during(side, work) {
      last = performance.now();
      current = side;
      try {
        return await work();
      } finally {
        current = undefined;
      }
    },
    stop: () => clearInterval(timer),
  };
}

/** Runs the sides' turns in alternation (a warm-up turn each first), so that both see the same machine. */
async function alternateTurns(sides: Side[], llm: { enqueue(...r: ScriptedResponse[]): void }): Promise<void> {
  for (const side of sides) await timedTurn(side.api, llm, side.conversations);
  const meter = stallMeter();
  for (let i = 0; i < TURNS; i++) {
    for (const side of sides) side.turns.push(await meter.during(side, () => timedTurn(side.api, llm, side.conversations)));
  }
  meter.stop();
}

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

function client(baseUrl: string, token: string): Client<typeof ConversationService> {
  return createClient(
    ConversationService,
    createConnectTransport({
      baseUrl,
      httpVersion: '1.1',
      interceptors: [
        (next) => (req) => {
          req.header.set('authorization', `Bearer ${token}`);
          return next(req);
        },
      ],
    }),
  );
}

async function createDatabase(url: string): Promise<void> {
  const admin = new URL(url);
  const name = admin.pathname.slice(1);
  admin.pathname = '/postgres';
  const c = new pg.Client({ connectionString: admin.toString() });
  await c.connect();
  await c.query(`DROP DATABASE IF EXISTS ${name}`);
  await c.query(`CREATE DATABASE ${name}`);
  await c.end();
}

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? NaN;
}

/** One turn: a response with TOOLS calls of TOOL_CALL, then a closing answer. Returns ms from send to idle. */
async function timedTurn(
  api: Client<typeof ConversationService>,
  llm: { enqueue(...r: ScriptedResponse[]): void },
  conversations: Set<string>,
): Promise<number> {
  llm.enqueue(
    {
      kind: 'message',
      content: Array.from({ length: TOOLS }, () => ({ type: 'tool_use' as const, ...TOOL_CALL })),
    },
    { kind: 'message', content: [{ type: 'text', text: 'done' }] },
  );
  const conv = (await api.createConversation({ cwd: '/tmp' })).conversation!;
  conversations.add(conv.id);
  const watch = new AbortController();
  let idle!: () => void;
  const reachedIdle = new Promise<void>((r) => (idle = r));
  const started = performance.now();
  void (async () => {
    try {
      for await (const res of api.watchConversation({ conversationId: conv.id }, { signal: watch.signal })) {
        const ev = res.event?.kind;
        if (ev?.case === 'stateChanged' && ev.value.state?.kind === StateKind.IDLE) idle();
      }
    } catch {
      // aborted below
    }
  })();
  await api.sendMessage({ conversationId: conv.id, text: 'run the tools' });
  await reachedIdle;
  const ms = performance.now() - started;
  watch.abort();
  return ms;
}

async function cancelLatencies(
  api: Client<typeof ConversationService>,
  llm: { enqueue(...r: ScriptedResponse[]): void },
): Promise<number[]> {
  const samples: number[] = [];
  for (let i = 0; i < CANCELS; i++) {
    llm.enqueue({ kind: 'message', content: [{ type: 'tool_use', name: 'bash', input: { command: 'sleep 300' } }] });
    const conv = (await api.createConversation({ cwd: '/tmp' })).conversation!;
    const watch = new AbortController();
    let running!: () => void;
    let idle!: (at: number) => void;
    const toolRunning = new Promise<void>((r) => (running = r));
    const reachedIdle = new Promise<number>((r) => (idle = r));
    void (async () => {
      try {
        for await (const res of api.watchConversation({ conversationId: conv.id }, { signal: watch.signal })) {
          const ev = res.event?.kind;
          if (ev?.case === 'stateChanged' && ev.value.state?.kind === StateKind.TOOL_EXECUTING) running();
          if (ev?.case === 'stateChanged' && ev.value.state?.kind === StateKind.IDLE) idle(performance.now());
        }
      } catch {
        // aborted below
      }
    })();
    await api.sendMessage({ conversationId: conv.id, text: 'sleep' });
    await toolRunning;
    const t0 = performance.now();
    await api.cancel({ conversationId: conv.id });
    samples.push((await reachedIdle) - t0);
    watch.abort();
  }
  return samples.sort((a, b) => a - b);
}

async function main(): Promise<void> {
  const llm = await startMessagesApiServer();
  const env = { ANTHROPIC_API_KEY: 'bench', ANTHROPIC_BASE_URL: llm.url, LOG_LEVEL: 'error' };
  const receiver = STAGES_ON ? await startOtlpReceiver() : undefined;
  if (receiver) {
    // Every process (this one's embedded services, the cluster's children) exports its spans
    // here; the batches go every 200 ms and none is dropped for a full queue.
    Object.assign(process.env, {
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
      OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: '',
      OTEL_SDK_DISABLED: '',
      OTEL_TRACES_EXPORTER: '',
      OTEL_BSP_SCHEDULE_DELAY: '200',
      OTEL_BSP_MAX_QUEUE_SIZE: '200000',
      OTEL_BSP_MAX_EXPORT_BATCH_SIZE: '2000',
    });
  }
  const stageColumns: { name: string; stages: Map<Stage, number[]> }[] = [];
  const printStages = async () => {
    if (!receiver) return;
    await receiver.close();
    console.log(`where each tool's time goes, from the traces (BENCH_STAGES=1: tracing on, the figures above include it):`);
    for (const line of stageTable(stageColumns)) console.log(line);
  };

  // --- in one process: the embedded mode's in-process queues, on the same PostgreSQL server;
  // the sandbox helpers started by the spawner process (BEDROCK_SANDBOX_SPAWNER=process, the
  // default), and by the runner's own loop (`inline`), timed turn by turn in alternation ----
  const sides: Side[] = [];
  const stops: (() => Promise<void>)[] = [];
  for (const spawner of ['process', 'inline'] as const) {
    const dataDir = mkdtempSync(join(tmpdir(), 'bedrock-bench-embedded-'));
    const databaseUrl = `postgres://postgres@127.0.0.1:5432/bedrock_bench_local_${spawner}_${process.pid}`;
    await createDatabase(databaseUrl);
    const embedded = await startEmbedded({
      env: {
        ...process.env,
        ...env,
        BEDROCK_DATA_DIR: dataDir,
        BEDROCK_PORT: '0',
        BEDROCK_GRPC_PORT: '0',
        DATABASE_URL: databaseUrl,
        BEDROCK_DEFAULT_MODEL: 'claude-haiku-4-5',
        BEDROCK_SANDBOX_SPAWNER: spawner,
      },
    });
    sides.push({ name: spawner, api: client(embedded.httpUrl, embedded.token), turns: [], stalls: [], conversations: new Set() });
    stops.push(async () => {
      await embedded.stop();
      rmSync(dataDir, { recursive: true, force: true });
    });
  }
  const loadBefore = load();
  await alternateTurns(sides, llm);
  const loadAfter = load();
  // Stopping flushes the spans still buffered.
  for (const stop of stops) await stop();
  if (receiver) {
    for (const side of sides) {
      stageColumns.push({
        name: `one process, ${side.name}`,
        stages: toolStages(receiver.spans, tracesOf(receiver.spans, side.conversations)),
      });
    }
  }
  console.log(
    `${TOOLS} tool calls of ${TOOL_LABEL} in one turn, one process, send → idle, ${TURNS} turns each in alternation (load average ${loadBefore} → ${loadAfter}):`,
  );
  for (const side of sides) {
    const perTool = median(side.turns) / TOOLS;
    const range = `${(Math.min(...side.turns) / TOOLS).toFixed(1)}–${(Math.max(...side.turns) / TOOLS).toFixed(1)}`;
    console.log(
      `  helpers started by ${side.name === 'process' ? 'the spawner process' : "the runner's own loop"} (${side.name}): ` +
        `${perTool.toFixed(1)} ms per tool median (range ${range}), goal ≤ ${GOAL_PER_TOOL_MS} ms${perTool <= GOAL_PER_TOOL_MS ? ' — met' : ' — missed'}; ` +
        `event loop stalls: p99 ${percentile(
          [...side.stalls].sort((a, b) => a - b),
          99,
        ).toFixed(1)} ms, ` +
        `${(side.stalls.filter((x) => x >= 2).reduce((a, b) => a + b, 0) / (side.turns.length * TOOLS)).toFixed(2)} ms per tool in stalls ≥ 2 ms`,
    );
  }
  const inProcess = median(sides[0]!.turns);
  if (!DISTRIBUTED) {
    await llm.close();
    await printStages();
    return;
  }

  // --- distributed: every service its own process ----------------------------------------
  const dir = mkdtempSync(join(tmpdir(), 'bedrock-bench-cluster-'));
  const cluster = await startCluster({
    dir,
    databaseUrl: `postgres://postgres@127.0.0.1:5432/bedrock_bench_${process.pid}`,
    redisUrl: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379',
    redisPrefix: `bench-${process.pid}`,
    // Its turns run in /tmp, a host path: off by default in the cluster since workspaces came.
    env: { ...env, BEDROCK_DEFAULT_MODEL: 'claude-haiku-4-5', BEDROCK_HOST_PATHS: 'on' },
  });
  let clusterStopped = false;
  try {
    const remote = client(cluster.httpUrl, cluster.token);
    const distributedConversations = new Set<string>();
    const distributed = await medianTurn(remote, llm, distributedConversations);
    const cancels = await cancelLatencies(remote, llm);

    // Queue hops in the turn: each tool goes out to a runner and its result comes back (2 per
    // tool); each of the 2 LLM requests goes out to a gateway and its result comes back.
    const hops = 2 * TOOLS + 4;
    console.log(
      `${TOOLS} tool calls of ${TOOL_LABEL} in one turn (2 LLM requests), send → idle on the watch stream, median of ${TURNS} turns:`,
    );
    console.log(`  one process, in-process queues:             ${inProcess.toFixed(0)} ms (${(inProcess / TOOLS).toFixed(1)} ms per tool)`);
    console.log(
      `  distributed, ${cluster.processes.length} processes over Redis:        ${distributed.toFixed(0)} ms (${(distributed / TOOLS).toFixed(1)} ms per tool)`,
    );
    console.log(`  ratio distributed / one process: ${(distributed / inProcess).toFixed(2)}`);
    console.log(`  overhead per queue hop (${hops} hops): ${((distributed - inProcess) / hops).toFixed(2)} ms`);
    console.log(
      `cancel RPC → idle on a watcher's stream, ${cancels.length} samples: median ${percentile(cancels, 50).toFixed(1)} ms, p99 ${percentile(cancels, 99).toFixed(1)} ms`,
    );
    // Stopping flushes the spans still buffered.
    clusterStopped = true;
    await cluster.stop();
    if (receiver) {
      stageColumns.push({ name: 'distributed', stages: toolStages(receiver.spans, tracesOf(receiver.spans, distributedConversations)) });
    }
    await printStages();
  } finally {
    if (!clusterStopped) await cluster.stop();
    await llm.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
process.exit(0);
