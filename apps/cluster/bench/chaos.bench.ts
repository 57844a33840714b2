/**
 * `make bench BENCH=chaos`: crash semantics under load on the shipped defaults, the scenario of
 * chaos.e2e.test.ts (support/chaos.ts). Prints the time until every conversation is at rest after each
 * fault kind (median and max over CHAOS_RUNS rounds, default 3) beside the same turn without the fault,
 * any broken promise, and what the cluster costs Redis idle and with every conversation running a tool.
 * docs/testing.md, "Crash semantics (chaos)".
 */
import { FAULT_KINDS, startChaos, type FaultKind } from '../test/support/chaos.ts';

const rounds = Number(process.env.CHAOS_RUNS ?? 3);
const conversations = Number(process.env.CHAOS_CONVERSATIONS ?? 20);
const seconds = (ms: number) => `${(ms / 1000).toFixed(1)} s`;
const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};

const chaos = await startChaos('chaosbench', { conversations });
try {
  const times = new Map<FaultKind, number[]>(FAULT_KINDS.map((k) => [k, []]));
  const quiet = new Map<FaultKind, number[]>(FAULT_KINDS.map((k) => [k, []]));
  for (let round = 1; round <= rounds; round++) {
    for (const kind of FAULT_KINDS) {
      // The same turn without the fault, just before: what the turn's rest takes anyway.
      const without = await chaos.fault(kind, false);
      const outcome = await chaos.fault(kind);
      times.get(kind)!.push(outcome.restMs);
      quiet.get(kind)!.push(without.restMs);
      console.log(
        `round ${round}: ${kind.padEnd(12)} at rest after ${seconds(outcome.restMs)}, without the fault ${seconds(without.restMs)} (held ${outcome.held})`,
      );
    }
  }
  console.log(`\ntime to rest after the fault, ${conversations} conversations, ${rounds} rounds, shipped defaults:`);
  console.log('fault         median   max     without the fault (median)');
  for (const [kind, xs] of times)
    console.log(
      `${kind.padEnd(12)}  ${seconds(median(xs)).padStart(6)}  ${seconds(Math.max(...xs)).padStart(6)}  ${seconds(median(quiet.get(kind)!)).padStart(6)}`,
    );

  const report = await chaos.check();
  console.log(
    `\n${report.toolCalls} tool calls, ${report.ledgerLines} ledger lines, ${report.interrupted} answered interrupted, ${report.lost} answered lost`,
  );
  console.log(
    report.problems.length === 0
      ? 'no tool ran twice, every tool_use answered once, every user message kept once'
      : `PROBLEMS:\n${report.problems.join('\n')}`,
  );

  const idle = await chaos.redisLoad(10_000, false);
  const busy = await chaos.redisLoad(5_000, true);
  const top = (xs: [string, number][]) =>
    xs
      .slice(0, 6)
      .map(([c, r]) => `${c} ${r.toFixed(1)}`)
      .join(', ');
  console.log(`\nRedis commands/s of the whole cluster (2 conversation, 2 gateway, 3 runner processes: 10 queue consumers):`);
  console.log(`  idle: ${idle.perSecond.toFixed(1)}/s (${top(idle.byCommand)})`);
  console.log(`  ${conversations} tools running: ${busy.perSecond.toFixed(1)}/s (${top(busy.byCommand)})`);
  console.log(
    `  so about ${(idle.perSecond / 10).toFixed(1)}/s per idle consumer and ${((busy.perSecond - idle.perSecond) / conversations).toFixed(1)}/s per running tool (lock renewal, heartbeat, recovery checks of 2 replicas)`,
  );
} finally {
  await chaos.close();
}
