/**
 * `make bench BENCH=transition` (or `npx tsx services/conversation/bench/transition.bench.ts`):
 * the pure state machine's `transition()` calls per CPU-second on one core, over precomputed
 * triples grouped by outcome and by event type. The goal (≥ 1,000,000/s) is for each
 * state-changing event type. Prints figures and ratios to the goal; asserts nothing. How it
 * measures, and the figures: docs/state-machine.md, "Performance".
 *
 * The measurement runs in PROCESSES fresh processes, one after another, and each figure is the
 * median over them (with the lowest and highest beside it): between processes of the same code,
 * V8's inline caches settle differently (the phases, events and effects come in many shapes), and
 * one process's figure for a group moved by ±30% from one process to the next.
 */
import { spawnSync } from 'node:child_process';
import os from 'node:os';
import fc from 'fast-check';
import { transition } from '../src/core/index.ts';
import type { ConversationContext, ConversationEvent, ConversationState } from '../src/core/index.ts';
import { runChoices, scenarioArb } from '../test/core-support/scenario-runs.ts';

/**
 * The goal of each state-changing event type, in calls per CPU-second of this process ("on one
 * core"): on a shared machine the process is descheduled part of the wall time, which says nothing
 * about the code. Wall-clock rates and the share of the wall time spent on CPU are printed beside.
 */
const GOAL = 1_000_000;
const WARMUP_MS = 1000;
/**
 * After a warm-up on the whole mix, ROUNDS rounds each run every group for SLICE_MS in turn, and a
 * group's figure is the median of its rounds. Interleaving means a load spike from other processes
 * hits all groups alike instead of whichever happened to run during it.
 */
const ROUNDS = 7;
const SLICE_MS = 120;
/** Fresh processes measured; BENCH_TRANSITION_PROCESSES overrides (1: one process, as before). */
const PROCESSES = Math.max(1, Number(process.env.BENCH_TRANSITION_PROCESSES ?? 5) || 5);
/** Set in a measuring child: it prints its groups' figures as one JSON line. */
const CHILD = process.env.BENCH_TRANSITION_CHILD === '1';

/**
 * What `transition` does with a triple, classified once: it changes the state, it is a no-op (same
 * state object back), or it is rejected. No-ops and rejections are cheap and would flatter a mixed
 * figure, so they are reported apart.
 */
type Outcome = 'changes' | 'noop' | 'rejected';

interface Call {
  readonly state: ConversationState;
  readonly ctx: ConversationContext;
  readonly event: ConversationEvent;
  readonly outcome: Outcome;
}

/**
 * The (state, context, event) triples, precomputed with the property tests' driver
 * (test/core-support/scenario-runs.ts over event-driver.ts: mostly answers to what each state
 * waits for, plus noise: stale ids, duplicates, user actions, work_lost) so that only
 * `transition` is timed.
 */
function buildMix(): Call[] {
  const scenarios = fc.sample(scenarioArb({ maxLength: 60 }), { numRuns: 1500, seed: 20261125 });
  const calls: Call[] = [];
  for (const sc of scenarios) {
    for (const s of runChoices(sc.ctx, sc.choices).steps) {
      const r = transition(s.before, sc.ctx, s.event);
      const outcome: Outcome = !r.ok ? 'rejected' : r.state === s.before ? 'noop' : 'changes';
      calls.push({ state: s.before, ctx: sc.ctx, event: s.event, outcome });
    }
  }
  return calls;
}

const nowNs = (): bigint => process.hrtime.bigint();
let sink = 0;

interface Sample {
  /** Calls per wall-clock second. */
  readonly rate: number;
  /** Calls per CPU-second of this process (steadier when other processes compete for the core). */
  readonly cpuRate: number;
  /** CPU-seconds / wall seconds. */
  readonly onCpu: number;
}

/** Loops over `calls` (whole passes) until `ms` have passed. */
function loop(calls: readonly Call[], ms: number): Sample {
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
  const wall = Number(elapsed) / 1e9;
  const cpuSeconds = (cpu.user + cpu.system) / 1e6;
  return { rate: n / wall, cpuRate: n / cpuSeconds, onCpu: cpuSeconds / wall };
}

const median = (xs: readonly number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};
const fmt = (n: number): string => Math.round(n).toLocaleString('en-US');
const pct = (part: number, whole: number): string => `${((100 * part) / whole).toFixed(1)}%`;
const processes = (n: number): string => `${n} process${n > 1 ? 'es' : ''}`;

/** One group's figures in one process: medians of its rounds. */
interface Figures {
  readonly label: string;
  readonly count: number;
  readonly cpuRate: number;
  readonly rate: number;
}
/** What a measuring process reports. */
interface Report {
  readonly total: number;
  readonly changing: number;
  readonly overall: readonly Figures[];
  readonly perType: readonly Figures[];
  readonly onCpu: number;
  /** The machine's 1-minute load average when the measuring ended. */
  readonly loadAverage: number;
}

/** Builds the mix and measures every group side by side, in this process. */
function measure(): Report {
  const calls = buildMix();
  const changing = calls.filter((c) => c.outcome === 'changes');
  const byType = new Map<string, Call[]>();
  for (const c of changing) {
    const list = byType.get(c.event.type) ?? [];
    list.push(c);
    byType.set(c.event.type, list);
  }
  const types = [...byType].sort((a, b) => b[1].length - a[1].length);

  interface Group {
    readonly label: string;
    readonly calls: readonly Call[];
    readonly samples: Sample[];
  }
  const group = (label: string, list: readonly Call[]): Group => ({ label, calls: list, samples: [] });
  const overall = [
    group('whole mix', calls),
    group('state-changing', changing),
    group(
      'no-ops',
      calls.filter((c) => c.outcome === 'noop'),
    ),
    group(
      'rejections',
      calls.filter((c) => c.outcome === 'rejected'),
    ),
  ];
  const perType = types.map(([type, list]) => group(type, list));
  const all = [...overall, ...perType];

  loop(calls, WARMUP_MS);
  for (let round = 0; round < ROUNDS; round++) {
    for (const g of all) g.samples.push(loop(g.calls, SLICE_MS));
  }
  const figures = (g: Group): Figures => ({
    label: g.label,
    count: g.calls.length,
    cpuRate: median(g.samples.map((s) => s.cpuRate)),
    rate: median(g.samples.map((s) => s.rate)),
  });
  return {
    total: calls.length,
    changing: changing.length,
    overall: overall.map(figures),
    perType: perType.map(figures),
    onCpu: median(all.flatMap((g) => g.samples.map((s) => s.onCpu))),
    loadAverage: os.loadavg()[0]!,
  };
}

/** Runs this file again as a measuring child and reads its report. */
function measureInFreshProcess(): Report {
  const run = spawnSync(process.execPath, [...process.execArgv, process.argv[1]!], {
    env: { ...process.env, BENCH_TRANSITION_CHILD: '1' },
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const line = run.stdout.trim().split('\n').pop() ?? '';
  if (run.status !== 0 || !line.startsWith('{')) throw new Error(`a measuring process exited with ${run.status}: ${run.stdout}`);
  return JSON.parse(line) as Report;
}

if (CHILD) {
  console.log(JSON.stringify(measure()));
} else {
  console.log(
    `transition(): precomputed (state, context, event) triples from 1500 driven scenarios, measured in ${processes(PROCESSES)}, fresh, one after another`,
  );
  console.log(
    `  ${os.cpus()[0]?.model ?? 'unknown CPU'}, ${os.cpus().length} cores, Node ${process.version}, load average ${os.loadavg()[0]!.toFixed(2)}`,
  );
  console.log(
    `  per process: warm-up ${WARMUP_MS} ms on the whole mix, then ${ROUNDS} interleaved rounds of ${SLICE_MS} ms per group, medians; below: the median over the processes (lowest–highest)`,
  );
  const reports: Report[] = [];
  for (let i = 0; i < PROCESSES; i++) reports.push(measureInFreshProcess());
  const first = reports[0]!;
  const across = (pick: (r: Report) => readonly Figures[], label: string) => {
    const got = reports.map((r) => pick(r).find((f) => f.label === label)).filter((f): f is Figures => f !== undefined);
    const cpu = got.map((f) => f.cpuRate);
    return { cpu: median(cpu), low: Math.min(...cpu), high: Math.max(...cpu), rate: median(got.map((f) => f.rate)) };
  };
  const millions = (n: number): string => (n / 1e6).toFixed(2);
  const row = (label: string, share: string, f: ReturnType<typeof across>): string =>
    `  ${label.padEnd(26)} ${share.padStart(6)} ${fmt(f.cpu).padStart(12)}/s ${`(${millions(f.low)}–${millions(f.high)} M)`.padStart(15)} ${(f.cpu / GOAL).toFixed(2).padStart(6)}x ${fmt(f.rate).padStart(12)}/s`;

  console.log(
    `  ${fmt(first.total)} triples: ${first.overall
      .slice(1)
      .map((f) => `${f.label} ${pct(f.count, first.total)}`)
      .join(', ')}`,
  );
  console.log('');
  console.log(
    `  ${'group'.padEnd(26)} ${'share'.padStart(6)} ${'per CPU-second'.padStart(14)} ${'processes'.padStart(15)} ${'/goal'.padStart(7)} ${'wall'.padStart(14)}`,
  );
  for (const f of first.overall)
    console.log(
      row(
        f.label,
        pct(f.count, first.total),
        across((r) => r.overall, f.label),
      ),
    );
  console.log('');
  console.log('  state-changing events by type (share of the state-changing ones):');
  const perType = first.perType.map((f) => ({ label: f.label, count: f.count, fig: across((r) => r.perType, f.label) }));
  for (const t of perType) console.log(row(t.label, pct(t.count, first.changing), t.fig));

  const slowest = perType.reduce((a, b) => (a.fig.cpu <= b.fig.cpu ? a : b));
  const below = perType.filter((t) => t.fig.cpu < GOAL).map((t) => t.label);
  const onCpu = median(reports.map((r) => r.onCpu));
  console.log('');
  console.log(
    `  ${(100 * onCpu).toFixed(0)}% of the wall time was on CPU (median of the slices): below ~90% the machine was busy and the wall figures are low`,
  );
  const loads = reports.map((r) => r.loadAverage);
  console.log(`  load average at the end of each process: ${Math.min(...loads).toFixed(2)}–${Math.max(...loads).toFixed(2)}`);
  console.log(
    `  slowest state-changing type: ${slowest.label} at ${fmt(slowest.fig.cpu)}/s per CPU-second, median of ${processes(reports.length)} (${millions(slowest.fig.low)}–${millions(slowest.fig.high)} M; ${(slowest.fig.cpu / GOAL).toFixed(2)}x the goal of ${fmt(GOAL)}/s)`,
  );
  console.log(`  state-changing types below the goal: ${below.length ? below.join(', ') : 'none'}`);
}
if (sink === -1) console.log(sink);
