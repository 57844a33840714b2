/**
 * Throughput of the pure state machine: `transition()` calls per second on one core, over a
 * realistic mix of events. The (state, context, event) triples are precomputed with the property
 * tests' driver (services/conversation/src/core/arbitraries.ts: mostly answers to what each state
 * waits for, plus noise: stale ids, duplicates, user actions, work_lost) so that only
 * `transition` is timed. Prints a figure and its ratio to the 1,000,000/s goal; asserts nothing.
 *
 *   npx tsx services/conversation/bench/transition.bench.ts      (or: make bench BENCH=transition)
 */
import fc from 'fast-check';
import { transition } from '../src/core/index.ts';
import type { ConversationContext, ConversationEvent, ConversationState } from '../src/core/index.ts';
import { runChoices, scenarioArb } from '../src/core/arbitraries.ts';

const GOAL = 1_000_000;
const WARMUP_MS = 700;
const MEASURE_MS = 2500;
const PER_TYPE_MS = 250;

interface Call {
  readonly state: ConversationState;
  readonly ctx: ConversationContext;
  readonly event: ConversationEvent;
}

function buildMix(): Call[] {
  const scenarios = fc.sample(scenarioArb({ maxLength: 60 }), { numRuns: 1500, seed: 20261125 });
  const calls: Call[] = [];
  for (const sc of scenarios) {
    for (const s of runChoices(sc.ctx, sc.choices).steps) calls.push({ state: s.before, ctx: sc.ctx, event: s.event });
  }
  return calls;
}

const nowNs = (): bigint => process.hrtime.bigint();
let sink = 0;

/** Loops over `calls` until `ms` have passed; returns calls made and seconds taken. */
function loop(calls: readonly Call[], ms: number): { n: number; seconds: number; cpuSeconds: number } {
  const cpu0 = process.cpuUsage();
  const start = nowNs();
  const budget = BigInt(ms) * 1_000_000n;
  let n = 0;
  let elapsed = 0n;
  while (elapsed < budget) {
    for (let i = 0; i < calls.length; i++) {
      const c = calls[i]!;
      const r = transition(c.state, c.ctx, c.event);
      sink += r.ok ? r.effects.length : 1;
    }
    n += calls.length;
    elapsed = nowNs() - start;
  }
  const cpu = process.cpuUsage(cpu0);
  return { n, seconds: Number(elapsed) / 1e9, cpuSeconds: (cpu.user + cpu.system) / 1e6 };
}

function fmt(n: number): string {
  return Math.round(n).toLocaleString('en-US');
}

const calls = buildMix();
const byType = new Map<string, Call[]>();
for (const c of calls) {
  const list = byType.get(c.event.type) ?? [];
  list.push(c);
  byType.set(c.event.type, list);
}
const accepted = calls.filter((c) => {
  const r = transition(c.state, c.ctx, c.event);
  return r.ok && r.state !== c.state;
}).length;

console.log(`transition(): ${fmt(calls.length)} precomputed (state, context, event) triples from 1500 driven scenarios`);
console.log(`  mix: ${[...byType].sort((a, b) => b[1].length - a[1].length).map(([t, l]) => `${t} ${((100 * l.length) / calls.length).toFixed(1)}%`).join(', ')}`);
console.log(`  ${((100 * accepted) / calls.length).toFixed(1)}% change the state; the rest are no-ops or rejections`);

loop(calls, WARMUP_MS);
const { n, seconds, cpuSeconds } = loop(calls, MEASURE_MS);
const rate = n / seconds;
console.log(`  ${fmt(rate)} transitions/s on one core (${fmt(n)} calls in ${seconds.toFixed(2)} s wall, after ${WARMUP_MS} ms warm-up)`);
console.log(`  ratio to the goal of ${fmt(GOAL)}/s: ${(rate / GOAL).toFixed(2)}x`);
// On a busy machine the process is descheduled part of the time; per CPU-second is the steadier figure.
console.log(`  per CPU-second of this process: ${fmt(n / cpuSeconds)} transitions/s (${(n / cpuSeconds / GOAL).toFixed(2)}x the goal; ${((100 * cpuSeconds) / seconds).toFixed(0)}% of the wall time was on CPU)`);

console.log('  per event type:');
for (const [type, list] of [...byType].sort((a, b) => b[1].length - a[1].length)) {
  const t = loop(list, PER_TYPE_MS);
  console.log(`    ${type.padEnd(26)} ${fmt(t.n / t.seconds).padStart(12)}/s`);
}
if (sink === -1) console.log(sink);
