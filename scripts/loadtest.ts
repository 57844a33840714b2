/**
 * `make loadtest [ARGS="--max 256 --step 30s --report FILE"]`: ramps synthetic conversations
 * through the public API of a local cluster until a service-level objective breaks, and prints
 * each step (docs/capacity.md; apps/cluster/src/loadtest/loadtest.ts).
 */
import { writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { runLoadtest } from '@bedrock/cluster/loadtest';

const USAGE = `usage: make loadtest ARGS="[--start N] [--max N] [--step 30s] [--model-ms 200] [--think-ms 1000] [--report FILE]"`;
const { values } = parseArgs({
  options: {
    start: { type: 'string', default: '1' },
    max: { type: 'string', default: '256' },
    step: { type: 'string', default: '30s' },
    'model-ms': { type: 'string', default: '200' },
    'think-ms': { type: 'string', default: '1000' },
    'p99-ms': { type: 'string', default: '50' },
    report: { type: 'string' },
    help: { type: 'boolean', default: false },
  },
});
if (values.help) {
  console.log(USAGE);
  process.exit(0);
}
const whole = (name: string, text: string) => {
  if (!/^\d+$/.test(text) || Number(text) < 1) {
    console.error(`--${name} takes a whole number of 1 or more, not "${text}"\n${USAGE}`);
    process.exit(2);
  }
  return Number(text);
};
const seconds = /^(\d+)s$/.exec(values.step);
if (!seconds) {
  console.error(`--step takes seconds such as 30s, not "${values.step}"\n${USAGE}`);
  process.exit(2);
}
// Doubling from --start up to --max: 1 (the quiet baseline), 2, 4, … conversations.
const steps: number[] = [];
for (let n = whole('start', values.start); n <= whole('max', values.max); n *= 2) steps.push(n);

const report = await runLoadtest({
  databaseUrl: process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres',
  redisUrl: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379',
  steps,
  stepMs: Number(seconds[1]) * 1000,
  modelMs: whole('model-ms', values['model-ms']),
  thinkMs: whole('think-ms', values['think-ms']),
  eventToEffectP99Ms: whole('p99-ms', values['p99-ms']),
  overheadFactor: 2,
  progress: (line) => console.log(line),
});
const { broke, held } = report.ceiling;
console.log(
  broke
    ? `ceiling: ${held ?? 0} conversations held every objective; at ${broke.conversations}: ${broke.broken.join('; ')} (busiest: ${broke.busiest.component}, ${broke.busiest.cores.toFixed(2)} cores)`
    : `no objective broke up to ${held} conversations (raise --max)`,
);
if (values.report) {
  writeFileSync(values.report, `${JSON.stringify(report, null, 2)}\n`);
  console.log(`report written to ${values.report}`);
}
process.exit(0);
