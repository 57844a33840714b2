/**
 * What a run's cgroups cost the runner's own process, outside the run: creating them (as a warm
 * helper's refill does) and emptying and removing them after the result (`release`), over
 * BENCH_ROUNDS rounds against the machine's real hierarchies (the runner's defaults, as
 * `BEDROCK_PIDS_CGROUP=auto` finds them). Prints the process CPU and the event loop's busy time
 * per run; and, interleaved in the same run, the mechanism behind `procsOf` reading
 * `cgroup.procs` synchronously: one empty cgroup's `cgroup.procs` read with `readFileSync` and
 * with the promise `readFile`, CPU per read. Needs root and a writable cgroup hierarchy (skips
 * otherwise). Asserts nothing; figures in docs/tool-runner.md, "Off the critical path".
 */
import { readFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { createPidsCgroups, findCgroupRoots } from '../src/sandbox/pids-cgroup.ts';

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 300);
const READS = Number(process.env.BENCH_READS ?? 2000);

const roots = process.getuid?.() === 0 ? findCgroupRoots() : null;
if (!roots) {
  console.log('cgroup bench: skipped (needs root and a writable cgroup hierarchy)');
  process.exit(0);
}
const cgroups = createPidsCgroups(roots, `bench-cgroup-${process.pid}`);
const { bounds } = cgroups;
console.log(
  `cgroup v${bounds.version === 'v2' ? 2 : 1}, bounded: pids${bounds.memory ? ', memory' : ''}${bounds.cpu ? ', cpu' : ''} ` +
    `(${cgroups.bases.length} director${cgroups.bases.length === 1 ? 'y' : 'ies'} per run); ${ROUNDS} rounds`,
);

const limits = { processes: 256, ...(bounds.memory ? { memory: 1 << 30 } : {}), ...(bounds.cpu ? { cpus: 1 } : {}) };
const elu0 = performance.eventLoopUtilization();
const cpu0 = process.cpuUsage();
const t0 = performance.now();
for (let i = 0; i < ROUNDS; i++) {
  const dir = await cgroups.create(`run-${i}`, limits);
  cgroups.release(dir);
  // Runs do not follow each other back to back: let the removal go on as it would between them.
  await new Promise((resolve) => setTimeout(resolve, 2));
}
await cgroups.close();
const cpu = process.cpuUsage(cpu0);
const elu = performance.eventLoopUtilization(elu0);
console.log(
  `create + release per run: process CPU ${((cpu.user + cpu.system) / ROUNDS / 1000).toFixed(3)} ms, ` +
    `event loop busy ${(elu.active / ROUNDS).toFixed(3)} ms, wall ${((performance.now() - t0) / ROUNDS).toFixed(2)} ms (2 ms of it the pause)`,
);

// One empty cgroup's cgroup.procs, read both ways in alternating blocks.
const probe = createPidsCgroups(roots, `bench-cgroup-read-${process.pid}`);
const dir = await probe.create('read', { processes: 1 });
const file = join(dir, 'cgroup.procs');
const perRead = { sync: [] as number[], promise: [] as number[] };
for (let block = 0; block < 10; block++) {
  let c = process.cpuUsage();
  for (let i = 0; i < READS / 10; i++) readFileSync(file, 'utf8');
  let used = process.cpuUsage(c);
  perRead.sync.push((used.user + used.system) / (READS / 10));
  c = process.cpuUsage();
  for (let i = 0; i < READS / 10; i++) await readFile(file, 'utf8');
  used = process.cpuUsage(c);
  perRead.promise.push((used.user + used.system) / (READS / 10));
}
await probe.destroy(dir);
await probe.close();
const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
console.log(
  `cgroup.procs of an empty cgroup, CPU per read (median of 10 blocks of ${READS / 10}): readFileSync ${median(perRead.sync).toFixed(1)} µs, ` +
    `promise readFile ${median(perRead.promise).toFixed(1)} µs (${(median(perRead.promise) / median(perRead.sync)).toFixed(1)}x)`,
);
