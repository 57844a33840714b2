/**
 * `make bench BENCH=apply` (issue 3's benchmark), against the local PostgreSQL and Redis: events
 * applied per second by one replica beside a single-row UPDATE transaction on the same database,
 * and the median and p99 from an event's arrival on `conversation-events` to its effect on the
 * next queue; one outbox row per event and per effect (before) in alternating windows. Prints
 * figures; asserts nothing. docs/conversation.md, "Benchmark: applying events".
 */
import { loadavg } from 'node:os';
import pg from 'pg';
import { create } from '@bufbuild/protobuf';
import { ConversationEventJobSchema, QUEUE_CONVERSATION_EVENTS, QUEUE_TOOL_EXEC, StopReason, ToolExecJobSchema } from '@bedrock/contracts';
import { createRedisTransport } from '@bedrock/platform';
import { createLogger } from '@bedrock/platform/server';
import { readConversationConfig } from '../src/config.ts';
import { createConversationService } from '../src/create-conversation-service.ts';
import type { ConversationEvent } from '../src/core/index.ts';
import type { ConversationRecord } from '../src/store/conversation-store.ts';
import { createTestDatabase } from '@bedrock/testkit/database';
import { deleteKeys } from '../../../packages/platform/test/redis-helpers.ts';
import { cpuPer, cpuSnapshot, formatSplit, type CpuSplit } from '../../../bench/support/cpu-split.ts';

/** Workers of every measurement (the applier's events and the single-row UPDATE alike), in the same run. */
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 8);
const DURATION_MS = Number(process.env.BENCH_DURATION_MS ?? 4000);
const LATENCY_SAMPLES = Number(process.env.BENCH_LATENCY_SAMPLES ?? 300);

const usage = { inputTokens: 1000, outputTokens: 50, cacheCreationInputTokens: 0, cacheReadInputTokens: 0 };

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? NaN;
}

async function main(): Promise<void> {
  const db = await createTestDatabase('bench');
  const prefix = `bench-${process.pid}`;
  const transport = createRedisTransport({ redisUrl: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', prefix, onError: () => undefined });
  const pool = new pg.Pool({ connectionString: db.url, max: CONCURRENCY + 2 });
  const configFor = (url: string) =>
    readConversationConfig(
      {},
      {
        log: { level: 'error' },
        server: { grpcPort: 0, metricsPort: 0, host: '127.0.0.1' },
        database: { url },
        conversations: { sandbox: 'unavailable' },
        recovery: { interval: 3_600_000 },
      },
    );
  const config = configFor(db.url);
  const service = createConversationService(config, { pool, transport, logger: createLogger({ service: 'bench', level: 'error' }) });
  await service.start();
  // "Before": the same service writing one outbox row per effect (as before migration 025), on a database of its own.
  const dbBefore = await createTestDatabase('bench_before');
  const transportBefore = createRedisTransport({
    redisUrl: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379',
    prefix: `${prefix}-before`,
    onError: () => undefined,
  });
  const poolBefore = new pg.Pool({ connectionString: dbBefore.url, max: CONCURRENCY + 2 });
  const before = createConversationService(configFor(dbBefore.url), {
    pool: poolBefore,
    transport: transportBefore,
    logger: createLogger({ service: 'bench', level: 'error' }),
    groupCommit: false,
  });
  await before.start();
  try {
    // --- 1. baseline: the cheapest possible write transaction ---------------------------
    await pool.query('CREATE TABLE bench_counter (id INT PRIMARY KEY, v BIGINT NOT NULL)');
    await pool.query('INSERT INTO bench_counter SELECT g, 0 FROM generate_series(1, $1) g', [CONCURRENCY]);
    const runBaseline = () =>
      runFor(DURATION_MS, CONCURRENCY, async (worker) => {
        const c = await pool.connect();
        try {
          await c.query('BEGIN');
          await c.query('UPDATE bench_counter SET v = v + 1 WHERE id = $1', [worker + 1]);
          await c.query('COMMIT');
        } finally {
          c.release();
        }
      });
    const baseline = await runBaseline();

    // --- 2. applied events: a realistic turn cycle per conversation ---------------------
    // user message → (request_llm) response with one bash call → (execute_tool) result →
    // (request_llm) end_turn → idle. Each step is one applyEvent plus its publish. Measured
    // for one outbox row per event (now) and one per effect (before), in alternating windows.
    const makeSide = async (name: string, svc: typeof service) => {
      const ids: string[] = [];
      for (let i = 0; i < CONCURRENCY; i++) {
        const r = await svc.store.create(
          svc.applier.newConversation({
            id: `bench-${name}-${i}`,
            ownerId: 'bench',
            slug: `bench-${name}-${i}`,
            cwd: '/tmp',
            model: 'bench',
            sandboxAvailable: false,
          }),
        );
        ids.push(r.id);
      }
      const latest = new Map<string, ConversationRecord>();
      for (const id of ids) latest.set(id, (await svc.store.get(id))!);
      return {
        name,
        svc,
        ids,
        latest,
        step: new Map<string, number>(),
        counts: new Map<string, number>(),
        rates: [] as number[],
        cpu: [] as CpuSplit[],
      };
    };
    type Side = Awaited<ReturnType<typeof makeSide>>;
    const applyFor = (side: Side, durationMs = DURATION_MS) =>
      runFor(durationMs, CONCURRENCY, async (worker) => {
        const { svc, ids, latest, step, counts } = side;
        const id = ids[worker]!;
        const record = latest.get(id)!;
        const n = step.get(id) ?? 0;
        const phase = record.state.phase;
        let event: ConversationEvent;
        if (phase.kind === 'idle') event = { type: 'user_message', text: `message ${n}`, images: [] };
        else if (phase.kind === 'llm_requesting' && record.state.llmRequests % 2 === 1) {
          event = {
            type: 'llm_response',
            requestId: phase.requestId,
            stopReason: 'tool_use',
            usage,
            content: [{ type: 'tool_use', id: `t${n}`, name: 'bash', input: { command: 'true' } }],
          };
        } else if (phase.kind === 'llm_requesting') {
          event = {
            type: 'llm_response',
            requestId: phase.requestId,
            stopReason: 'end_turn',
            usage,
            content: [{ type: 'text', text: 'done' }],
          };
        } else if (phase.kind === 'tool_executing') {
          event = { type: 'tool_complete', result: { toolUseId: phase.current.id, content: 'ok', isError: false } };
        } else throw new Error(`unexpected phase ${phase.kind}`);
        step.set(id, n + 1);
        const result = await svc.applier.apply(id, event);
        if (result.kind !== 'applied') throw new Error(`event ${event.type} was ${result.kind}`);
        latest.set(id, result.record);
        counts.set(event.type, (counts.get(event.type) ?? 0) + 1);
      });
    const now = await makeSide('now', service);
    const old = await makeSide('before', before);
    const baselines: number[] = [baseline.perSecond];
    const baselineCpu: CpuSplit[] = [baseline.cpu];
    // Both sides warm up first (JIT, caches, connections), unmeasured: without it the side
    // measured first ran ~10% slower in a run where both sides were the same code.
    for (const side of [now, old]) {
      await applyFor(side, DURATION_MS / 4);
      side.counts.clear();
    }
    for (const side of [now, old, old, now]) {
      const run = await applyFor(side);
      side.rates.push(run.perSecond);
      side.cpu.push(run.cpu);
    }
    const baselineAfter = await runBaseline();
    baselines.push(baselineAfter.perSecond);
    baselineCpu.push(baselineAfter.cpu);
    const applied = { perSecond: (now.rates[0]! + now.rates[1]!) / 2 };
    const counts = now.counts;

    // --- 3. latency: tool result in → next tool job out, through the queues ---------------
    // Both services, one after the other (group commit, then one statement per event).
    const stages = {
      count: 0,
      queueIn: [] as number[],
      apply: [] as number[],
      write: [] as number[],
      publish: [] as number[],
      queueOut: [] as number[],
    };
    const latencyOf = async (svc: typeof service, svcTransport: typeof transport, name: string, samples: number): Promise<number[]> => {
      const conv = await svc.store.create(
        svc.applier.newConversation({
          id: `bench-latency-${name}`,
          ownerId: 'bench',
          slug: `bench-latency-${name}`,
          cwd: '/tmp',
          model: 'bench',
          sandboxAvailable: false,
        }),
      );
      const calls = Array.from({ length: samples + 1 }, (_, i) => ({
        type: 'tool_use' as const,
        id: `L${i}`,
        name: 'bash',
        input: { command: 'true' },
      }));
      await svc.applier.apply(conv.id, { type: 'user_message', text: 'go', images: [] });
      const rec = (await svc.store.get(conv.id))!;
      if (rec.state.phase.kind !== 'llm_requesting') throw new Error('latency setup failed');
      await svc.applier.apply(conv.id, {
        type: 'llm_response',
        requestId: rec.state.phase.requestId,
        stopReason: 'tool_use',
        usage,
        content: calls,
      });
      const arrivals = new Map<string, number>();
      const latencies: number[] = [];
      // Where the time goes: queue in (added → the applier starts), apply (read, decide, write, publish), queue out (published → the consumer has it).
      const original = svc.applier.apply;
      let appliedAt = 0;
      const originalPublish = svc.publisher.publishCommitted;
      svc.publisher.publishCommitted = async (...args: Parameters<typeof originalPublish>) => {
        const start = performance.now();
        await originalPublish(...args);
        if (args[0] === conv.id) stages.publish.push(performance.now() - start);
      };
      const originalWrite = svc.store.writeApplied;
      svc.store.writeApplied = async (...args: Parameters<typeof originalWrite>) => {
        const start = performance.now();
        const result = await originalWrite(...args);
        if (args[0].id === conv.id) stages.write.push(performance.now() - start);
        return result;
      };
      svc.applier.apply = async (...args: Parameters<typeof original>) => {
        const start = performance.now();
        const sentAt = arrivals.get(`L${stages.count}`);
        const result = await original(...args);
        appliedAt = performance.now();
        if (sentAt !== undefined && args[0] === conv.id) {
          stages.queueIn.push(start - sentAt);
          stages.apply.push(appliedAt - start);
        }
        return result;
      };
      const events = svcTransport.queues.producer(QUEUE_CONVERSATION_EVENTS, ConversationEventJobSchema);
      let done!: () => void;
      const finished = new Promise<void>((r) => (done = r));
      const runner = svcTransport.queues.consume(QUEUE_TOOL_EXEC, ToolExecJobSchema, async (job) => {
        // Tool jobs of the throughput part are still queued: only this conversation's count.
        if (job.data.conversationId !== conv.id) return;
        const index = Number(job.data.toolUseId.slice(1));
        const sentAt = arrivals.get(`L${index - 1}`);
        if (sentAt !== undefined) {
          latencies.push(performance.now() - sentAt);
          stages.queueOut.push(performance.now() - appliedAt);
        }
        stages.count = index;
        if (index >= samples) return done();
        arrivals.set(job.data.toolUseId, performance.now());
        await events.add(
          `bench-result-${conv.id}-${job.data.toolUseId}`,
          create(ConversationEventJobSchema, {
            eventId: `bench-result-${conv.id}-${job.data.toolUseId}`,
            conversationId: conv.id,
            event: { case: 'toolComplete', value: { toolUseId: job.data.toolUseId, content: 'ok' } },
          }),
        );
      });
      await finished;
      await runner.close(0);
      svc.applier.apply = original;
      svc.store.writeApplied = originalWrite;
      svc.publisher.publishCommitted = originalPublish;
      return latencies;
    };
    // In alternating rounds (the first runs of a process are slower), each on a conversation of its own.
    const latencies: number[] = [];
    const latenciesBefore: number[] = [];
    const ROUNDS = 4;
    for (let round = 0; round < ROUNDS; round++) {
      const n = Math.ceil(LATENCY_SAMPLES / ROUNDS);
      const pair = [
        async () => latencies.push(...(await latencyOf(service, transport, `now-${round}`, n))),
        async () => latenciesBefore.push(...(await latencyOf(before, transportBefore, `before-${round}`, n))),
      ];
      if (round % 2) pair.reverse();
      for (const run of pair) await run();
    }
    latencies.sort((a, b) => a - b);
    latenciesBefore.sort((a, b) => a - b);
    const med = (list: number[]) =>
      percentile(
        [...list].sort((a, b) => a - b),
        50,
      ).toFixed(2);

    const baselineRate = (baselines[0]! + baselines[1]!) / 2;
    const ratio = applied.perSecond / baselineRate;
    const ratioOf = (side: Side) => (side.rates[0]! + side.rates[1]!) / 2 / baselineRate;
    console.log(
      `concurrency ${CONCURRENCY}, ${DURATION_MS} ms per measurement, load average ${loadavg()
        .map((l) => l.toFixed(1))
        .join(' ')}`,
    );
    console.log(`single-row UPDATE transactions: ${baselines.map((b) => b.toFixed(0)).join(' and ')}/s (before and after the rest)`);
    console.log(
      `events applied (read, transition, write, publish), group commit: ${now.rates.map((r) => r.toFixed(0)).join(' and ')}/s  (${[...counts].map(([k, v]) => `${k} ${v}`).join(', ')})`,
    );
    console.log(`events applied, one statement per event (before): ${old.rates.map((r) => r.toFixed(0)).join(' and ')}/s`);
    console.log(
      `ratio events/baseline: group commit ${ratio.toFixed(3)}, one statement per event ${ratioOf(old).toFixed(3)}; goal ≥ 0.5 — ${ratio >= 0.5 ? 'met' : 'missed'} (each event is ~${(1 / ratio).toFixed(1)} baseline transactions of work)`,
    );
    const mean = (list: CpuSplit[]): CpuSplit => ({
      node: list.reduce((a, c) => a + c.node, 0) / list.length,
      postgres: list.reduce((a, c) => a + c.postgres, 0) / list.length,
      redis: list.reduce((a, c) => a + c.redis, 0) / list.length,
    });
    console.log(`CPU per single-row UPDATE transaction:        ${formatSplit(mean(baselineCpu))}`);
    console.log(`CPU per event, group commit:                  ${formatSplit(mean(now.cpu))}`);
    console.log(`CPU per event, one statement per event:       ${formatSplit(mean(old.cpu))}`);
    console.log(
      `event arrival → effect on queue, ${latencies.length} samples: group commit median ${percentile(latencies, 50).toFixed(2)} ms, p99 ${percentile(latencies, 99).toFixed(2)} ms; one statement per event median ${percentile(latenciesBefore, 50).toFixed(2)} ms, p99 ${percentile(latenciesBefore, 99).toFixed(2)} ms (goal ≤ 2 / ≤ 10 ms)`,
    );
    console.log(
      `  median by stage (both sides): queue in (added → applier starts) ${med(stages.queueIn)} ms, apply (decide, write, publish) ${med(stages.apply)} ms of which the write ${med(stages.write)} ms and publishing ${med(stages.publish)} ms, queue out (published → consumer has it) ${med(stages.queueOut)} ms`,
    );
    void StopReason;
  } finally {
    await service.stop();
    await before.stop();
    await transport.close();
    await transportBefore.close();
    // The queued jobs of a run (tens of thousands) would otherwise stay in Redis.
    await deleteKeys(prefix);
    await deleteKeys(`${prefix}-before`);
    await pool.end();
    await poolBefore.end();
    await db.drop();
    await dbBefore.drop();
  }
}

async function runFor(
  durationMs: number,
  concurrency: number,
  work: (worker: number) => Promise<void>,
): Promise<{ perSecond: number; count: number; cpu: CpuSplit }> {
  let count = 0;
  const cpuBefore = cpuSnapshot();
  const start = performance.now();
  const deadline = start + durationMs;
  await Promise.all(
    Array.from({ length: concurrency }, async (_, worker) => {
      while (performance.now() < deadline) {
        await work(worker);
        count++;
      }
    }),
  );
  const perSecond = (count * 1000) / (performance.now() - start);
  return { perSecond, count, cpu: cpuPer(cpuBefore, cpuSnapshot(), count) };
}

await main();
