/**
 * Steer latency (issue 17): from `SendMessage(delivery: STEER)` to the steering message being in
 * the next LLM request, during a turn of quick tools, in the distributed pipeline (every service
 * its own process, Redis between them, the local PostgreSQL). The time is taken where the local
 * Messages API server receives the request that carries it. Prints median and p99; asserts nothing.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createClient, type Client } from '@connectrpc/connect';
import { createConnectTransport } from '@connectrpc/connect-node';
import { ConversationService, DeliveryMode, StateKind } from '@bedrock/contracts';
import { startCluster } from '@bedrock/cluster';
import { startMessagesApiServer, type ReceivedRequest, type ScriptedResponse } from '@bedrock/offline-model';

/** Turns timed, one steer each (BENCH_STEERS, default 20), after a warm-up turn. */
const STEERS = Number(process.env.BENCH_STEERS ?? 20);
/** Tools per turn: `true`, one tool per model step, so a tool boundary comes every few milliseconds. */
const TOOLS = 10;
/** The steer goes out once this many tools have run (while the next one, the third, runs). */
const STEER_AFTER = 2;

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

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? NaN;
}

/** Text of every block of the request, and how many tool results it carries. */
function read(request: ReceivedRequest): { texts: string[]; toolResults: number } {
  const texts: string[] = [];
  let toolResults = 0;
  for (const message of request.body?.messages ?? []) {
    const content = typeof message.content === 'string' ? [{ type: 'text', text: message.content }] : message.content;
    for (const block of content as { type: string; text?: string }[]) {
      if (block.type === 'tool_result') toolResults++;
      if (block.type === 'text' && block.text) texts.push(block.text);
    }
  }
  return { texts, toolResults };
}

async function main(): Promise<void> {
  /** turn marker → what the benchmark waits for in that turn. */
  const turns = new Map<string, { steerText: string; onBoundary: () => void; onSteerSeen: (at: number) => void }>();
  const responder = (request: ReceivedRequest): ScriptedResponse => {
    const { texts, toolResults } = read(request);
    const turn = [...turns.entries()].find(([marker]) => texts.includes(marker))?.[1];
    if (turn) {
      if (texts.includes(turn.steerText)) turn.onSteerSeen(performance.now());
      if (toolResults === STEER_AFTER) turn.onBoundary();
    }
    if (toolResults < TOOLS) return { kind: 'message', content: [{ type: 'tool_use', name: 'bash', input: { command: 'true' } }] };
    return { kind: 'message', content: [{ type: 'text', text: 'done' }] };
  };
  const llm = await startMessagesApiServer({ fallback: responder });
  const dir = mkdtempSync(join(tmpdir(), 'bedrock-bench-steer-'));
  const cluster = await startCluster({
    dir,
    databaseUrl: `postgres://postgres@127.0.0.1:5432/bedrock_bench_steer_${process.pid}`,
    redisUrl: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379',
    redisPrefix: `bench-steer-${process.pid}`,
    env: { ANTHROPIC_API_KEY: 'bench', ANTHROPIC_BASE_URL: llm.url, LOG_LEVEL: 'error', BEDROCK_DEFAULT_MODEL: 'claude-haiku-4-5' },
  });
  try {
    const api = client(cluster.httpUrl, cluster.token);
    const samples: number[] = [];
    for (let i = 0; i <= STEERS; i++) {
      const marker = `turn-${i}`;
      const steerText = `steer-${i}: also list the hidden files`;
      const conv = (await api.createConversation({ cwd: '/tmp' })).conversation!;
      let boundary!: () => void;
      let seen!: (at: number) => void;
      const atBoundary = new Promise<void>((r) => (boundary = r));
      const steerSeen = new Promise<number>((r) => (seen = r));
      turns.set(marker, { steerText, onBoundary: boundary, onSteerSeen: seen });
      const watch = new AbortController();
      let idle!: () => void;
      const reachedIdle = new Promise<void>((r) => (idle = r));
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
      await api.sendMessage({ conversationId: conv.id, text: marker });
      await atBoundary;
      const t0 = performance.now();
      await api.sendMessage({ conversationId: conv.id, text: steerText, delivery: DeliveryMode.STEER });
      const ms = (await steerSeen) - t0;
      if (i > 0) samples.push(ms); // the first turn warms up
      await reachedIdle;
      watch.abort();
      turns.delete(marker);
    }
    samples.sort((a, b) => a - b);
    console.log(
      `steer latency, SendMessage(STEER) → in the next LLM request, during a turn of ${TOOLS} quick tools, ${cluster.processes.length} processes over Redis, ${samples.length} turns:`,
    );
    console.log(
      `  median ${percentile(samples, 50).toFixed(1)} ms, p99 ${percentile(samples, 99).toFixed(1)} ms, max ${samples.at(-1)!.toFixed(1)} ms`,
    );
  } finally {
    await cluster.stop();
    await llm.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
process.exit(0);
