/**
 * Cancel latency, from the cancel message to the tool's process group being gone (every process
 * killed and reaped), for a running tree of sleeps (children and grandchildren): `bus`, a
 * CancelSignal on the Redis cancel channel to a runner on the Redis transport (the production
 * path), and `direct`, the runner's own cancel (what ToolRunnerService.CancelTool calls). Prints
 * median and p99 against the 100 ms target over BENCH_ROUNDS rounds. Asserts nothing.
 */
import { execSync } from 'node:child_process';
import { chmodSync, chownSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { create } from '@bufbuild/protobuf';
import { CancelSignalSchema, Mode, ToolExecJobSchema } from '@bedrock/contracts';
import { createRedisTransport } from '@bedrock/platform';
import { createLogger } from '@bedrock/platform/server';
import { readToolRunnerConfig } from '../src/config.ts';
import { createToolRunner } from '../src/create-tool-runner.ts';
import { summary, quantile } from './stats.ts';

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 40);
const redisUrl = process.env.REDIS_URL || 'redis://127.0.0.1:6379';
const prefix = `bedrock-bench-cancel-${process.pid}`;
const cwd = mkdtempSync(join(tmpdir(), 'bedrock-cancel-bench-'));
// Tools run as the tool user (65534 by default): the working directory must be theirs.
if (process.getuid?.() === 0) chownSync(cwd, 65534, 65534);
else chmodSync(cwd, 0o777);

const transport = createRedisTransport({ redisUrl, prefix, onError: () => {} });
// The runner gets its own transport, as a separate process would; the bench publishes on this one.
const runnerTransport = createRedisTransport({ redisUrl, prefix, onError: () => {} });
const runner = createToolRunner(
  readToolRunnerConfig(
    {},
    { runner: { id: `bench-${process.pid}`, consume: true }, server: { host: '127.0.0.1', grpcPort: 0, metricsPort: 0 } },
  ),
  { transport: runnerTransport, logger: createLogger({ service: 'tool-runner', level: 'silent' }) },
);
await runner.start();

function groupAlive(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Starts a sleep tree through the runner; resolves with its pgid once every sleep runs. */
async function startTree(id: string): Promise<{ pgid: number; done: Promise<unknown> }> {
  let resolvePgid!: (n: number) => void;
  const pgidKnown = new Promise<number>((resolve) => (resolvePgid = resolve));
  let text = '';
  const job = create(ToolExecJobSchema, {
    toolUseId: id,
    conversationId: 'bench',
    toolName: 'bash',
    inputJson: JSON.stringify({ command: 'sleep 60 & (sleep 60 & sleep 60) & sleep 0.05; echo "pgid=$$"; wait' }),
    cwd,
    mode: Mode.RESTRICTED,
  });
  const done = runner.executor.execute(job, (chunk) => {
    text += chunk;
    const m = /pgid=(\d+)/.exec(text);
    if (m) resolvePgid(Number(m[1]));
  });
  return { pgid: await pgidKnown, done };
}

/** Per round: ms to the group being gone, and ms to the cancelled result being ready. */
async function measure(cancel: (id: string) => Promise<unknown> | unknown): Promise<{ gone: number[]; result: number[] }> {
  const gone: number[] = [];
  const result: number[] = [];
  for (let i = 0; i < ROUNDS; i++) {
    const id = `cancel-${i}-${Math.random().toString(36).slice(2, 6)}`;
    const { pgid, done } = await startTree(id);
    const t0 = performance.now();
    const resultAt = done.then((r) => {
      if (!(r as { cancelled?: boolean }).cancelled) throw new Error('result not marked cancelled');
      return performance.now();
    });
    await cancel(id);
    while (groupAlive(pgid)) await new Promise((resolve) => setImmediate(resolve));
    gone.push(performance.now() - t0);
    result.push((await resultAt) - t0);
  }
  return { gone, result };
}

const bus = await measure((id) =>
  transport.cancels.publish(create(CancelSignalSchema, { conversationId: 'bench', target: { case: 'toolUseId', value: id } })),
);
const direct = await measure((id) => runner.executor.cancel(id));

console.log(`cancel latency (sleep tree of 4 processes, Restricted), ${ROUNDS} rounds`);
console.log(`  cancel message -> process group gone`);
console.log(`    bus (Redis)  ${summary(bus.gone)}`);
console.log(`    direct       ${summary(direct.gone)}`);
console.log(`  cancel message -> result with cancelled=true ready`);
console.log(`    bus (Redis)  ${summary(bus.result)}`);
console.log(`    direct       ${summary(direct.result)}`);
const verdict = (v: number[]): string => (quantile(v, 0.99) <= 100 ? 'within' : 'OVER');
console.log(`  target 100 ms (p99, group gone): bus ${verdict(bus.gone)}, direct ${verdict(direct.gone)}`);

await runner.stop();
await runnerTransport.close();
await transport.close();
rmSync(cwd, { recursive: true, force: true });
execSync(`redis-cli -u ${redisUrl} --scan --pattern '${prefix}:*' | xargs -r redis-cli -u ${redisUrl} del > /dev/null`);
