/**
 * The load test's figures (bench/loadtest.ts): throughput, latency percentiles by tool, errors
 * by kind, the runner's and the generator's CPU and memory, printed and, with --report, as JSON.
 */
import { writeFileSync } from 'node:fs';
import type { ProcessCpu } from './loadtest-runner.ts';
import { fmtMs, quantile } from './stats.ts';

/** What one phase of the run (warm-up or measured) saw. */
export interface Phase {
  readonly latencies: Map<string, number[]>;
  readonly errors: Map<string, number>;
  readonly samples: Set<string>;
  completed: number;
  transportErrors: number;
  toolErrors: number;
  started: number;
  elapsedS: number;
}

export interface FiguresInput {
  readonly phase: Phase;
  readonly machine: {
    readonly cpus: number;
    readonly cpuModel: string;
    readonly kernel: string;
    readonly node: string;
    readonly loadAverage1m: number;
  };
  readonly loadAverageAfter: number;
  /** The runner measured through /proc, if any. */
  readonly measuredPid: number | undefined;
  readonly cpuBefore: ProcessCpu | undefined;
  readonly cpuAfter: ProcessCpu | undefined;
  readonly generatorCpu: NodeJS.CpuUsage;
  readonly memory: { rss: number; peakRss: number } | undefined;
  /** The run's settings, as the report records them. */
  readonly settings: Record<string, unknown>;
  /** --report: where the JSON goes. */
  readonly reportFile: string | undefined;
}

export function printFigures(input: FiguresInput): void {
  const { phase, machine, loadAverageAfter, measuredPid, cpuBefore, cpuAfter, generatorCpu, memory } = input;

  const round = (n: number, digits = 2) => (Number.isFinite(n) ? Number(n.toFixed(digits)) : null);
  const stats = (v: readonly number[]) => ({
    n: v.length,
    mean: round(v.reduce((s, x) => s + x, 0) / v.length),
    p50: round(quantile(v, 0.5)),
    p90: round(quantile(v, 0.9)),
    p99: round(quantile(v, 0.99)),
    max: round(quantile(v, 1)),
  });
  const all = [...phase.latencies.values()].flat();
  const elapsedS = phase.elapsedS;
  const throughput = phase.completed / elapsedS;
  const cpuSeconds = (user: number, system: number) => ({
    userS: round(user),
    systemS: round(system),
    totalS: round(user + system),
    percentOfOneCore: round(((user + system) / elapsedS) * 100, 1),
    msPerRun: phase.completed ? round(((user + system) * 1000) / phase.completed) : null,
  });
  const runnerCpu = cpuBefore && cpuAfter ? cpuSeconds(cpuAfter.user - cpuBefore.user, cpuAfter.system - cpuBefore.system) : undefined;
  const toolsCpu =
    cpuBefore && cpuAfter
      ? cpuSeconds(cpuAfter.childrenUser - cpuBefore.childrenUser, cpuAfter.childrenSystem - cpuBefore.childrenSystem)
      : undefined;
  const generator = cpuSeconds(generatorCpu.user / 1e6, generatorCpu.system / 1e6);
  const MiB = 1024 * 1024;

  console.log(`\nthroughput: ${phase.completed} runs in ${elapsedS.toFixed(1)} s = ${throughput.toFixed(1)} runs/s`);
  console.log('latency (request to result):');
  const row = (name: string, v: number[]) =>
    `  ${name.padEnd(15)} n=${String(v.length).padEnd(7)} p50 ${fmtMs(quantile(v, 0.5)).padEnd(10)} p90 ${fmtMs(quantile(v, 0.9)).padEnd(10)} p99 ${fmtMs(quantile(v, 0.99)).padEnd(10)} max ${fmtMs(quantile(v, 1))}`;
  for (const [tool, v] of phase.latencies) console.log(row(tool, v));
  console.log(row('all', all));
  const errorTotal = phase.transportErrors + phase.toolErrors;
  console.log(
    errorTotal === 0 ? 'errors: none' : `errors: ${errorTotal} (${[...phase.errors].map(([kind, n]) => `${kind} ${n}`).join(', ')})`,
  );
  for (const sample of phase.samples) console.log(`  e.g. ${sample}`);
  if (runnerCpu && toolsCpu && memory) {
    console.log(`runner (pid ${measuredPid}) over the measured ${elapsedS.toFixed(1)} s:`);
    console.log(
      `  CPU: runner process ${runnerCpu.totalS} s (user ${runnerCpu.userS} + system ${runnerCpu.systemS}) = ${runnerCpu.percentOfOneCore}% of one core, ${runnerCpu.msPerRun} ms per run`,
    );
    console.log(
      `       tools it ran, with their sandbox helpers ${toolsCpu.totalS} s = ${toolsCpu.percentOfOneCore}% of one core, ${toolsCpu.msPerRun} ms per run`,
    );
    console.log(`  memory: peak RSS ${(memory.peakRss / MiB).toFixed(1)} MiB (RSS at the end ${(memory.rss / MiB).toFixed(1)} MiB)`);
  } else {
    console.log('runner CPU and memory: not measured (the runner was not started here; --runner-pid PID reads them from /proc)');
  }
  console.log(`load generator: CPU ${generator.totalS} s = ${generator.percentOfOneCore}% of one core (on the same ${machine.cpus} CPUs)`);

  if (input.reportFile) {
    const report = {
      timestamp: new Date().toISOString(),
      machine: { ...machine, loadAverage1mAfter: loadAverageAfter },
      settings: input.settings,
      completed: phase.completed,
      elapsedS: round(elapsedS, 3),
      throughputPerS: round(throughput),
      latencyMs: { all: stats(all), byTool: Object.fromEntries([...phase.latencies].map(([tool, v]) => [tool, stats(v)])) },
      errors: {
        total: errorTotal,
        transport: phase.transportErrors,
        tool: phase.toolErrors,
        byKind: Object.fromEntries(phase.errors),
        samples: [...phase.samples],
      },
      runnerResources:
        runnerCpu && toolsCpu && memory
          ? { pid: measuredPid, cpu: runnerCpu, toolsCpu, peakRssBytes: memory.peakRss, rssEndBytes: memory.rss }
          : null,
      generatorCpu: generator,
    };
    try {
      writeFileSync(input.reportFile, `${JSON.stringify(report, null, 2)}\n`);
    } catch (err) {
      console.error(`loadtest: cannot write the report to ${input.reportFile}: ${(err as Error).message}`);
      process.exit(1);
    }
    console.log(`report: ${input.reportFile}`);
  }
}
