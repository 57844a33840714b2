/**
 * Sandboxed versus plain execution of `bash -c true`, in the same run, interleaved so that
 * machine load hits every variant alike:
 *   plain         spawn bash -c true (no helper)
 *   limits        through the helper with resource limits only (Unrestricted mode)
 *   restricted    through the helper with Landlock + seccomp + capabilities dropped
 *   bash tool     the whole Restricted bash tool: scratch dir, pids cgroup, helper, capture
 * Prints median and p99 of each and the ratios to plain. Asserts nothing.
 */
import { spawn } from 'node:child_process';
import { tmpdir } from 'node:os';
import { Mode } from '@bedrock/contracts';
import { DEFAULT_HELPER_PATH } from '../src/config.ts';
import { DEFAULT_RESTRICTED_LIMITS, DEFAULT_UNRESTRICTED_LIMITS, limitArgs } from '../src/sandbox/limits.ts';
import { createSandboxSettings } from '../src/sandbox/sandbox-settings.ts';
import { executeTool } from '../src/tools/execute-tool.ts';
import { fmtMs, quantile } from './stats.ts';

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 150);

function run(argv: string[]): Promise<number> {
  const t0 = performance.now();
  return new Promise((resolve, reject) => {
    const child = spawn(argv[0] as string, argv.slice(1), { stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    child.stdout.resume();
    child.stderr.resume();
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolve(performance.now() - t0) : reject(new Error(`${argv.join(' ')} exited ${code}`))));
  });
}

const { settings, probe } = await createSandboxSettings({
  runnerId: `bench-${process.pid}`,
  helperPath: DEFAULT_HELPER_PATH,
  scratch: true,
  scratchRoot: tmpdir(),
  pidsCgroup: 'auto',
  restrictedLimits: DEFAULT_RESTRICTED_LIMITS,
  unrestrictedLimits: DEFAULT_UNRESTRICTED_LIMITS,
});
if (!probe.sandboxAvailable) {
  console.log(`sandbox unavailable here (${probe.reason}): nothing to compare`);
  process.exit(0);
}

const variants: Record<string, () => Promise<number>> = {
  plain: () => run(['bash', '-c', 'true']),
  limits: () => run([DEFAULT_HELPER_PATH, ...limitArgs(DEFAULT_UNRESTRICTED_LIMITS), '--', 'bash', '-c', 'true']),
  restricted: () => run([DEFAULT_HELPER_PATH, ...limitArgs(DEFAULT_RESTRICTED_LIMITS), '--restricted', '--', 'bash', '-c', 'true']),
  'bash tool': async () => {
    const t0 = performance.now();
    const r = await executeTool(
      { toolName: 'bash', inputJson: '{"command":"true"}', cwd: tmpdir(), mode: Mode.RESTRICTED },
      { sandbox: settings, signal: new AbortController().signal, capture: {} },
    );
    if (r.isError) throw new Error(r.content);
    return performance.now() - t0;
  },
};

const samples: Record<string, number[]> = Object.fromEntries(Object.keys(variants).map((k) => [k, []]));
for (const fn of Object.values(variants)) await fn(); // warm-up
for (let i = 0; i < ROUNDS; i++) {
  for (const [name, fn] of Object.entries(variants)) samples[name]?.push(await fn());
}
settings.cgroups?.close();

const plainMedian = quantile(samples.plain ?? [], 0.5);
console.log(`bash -c true, ${ROUNDS} rounds interleaved (Landlock ABI ${probe.landlockAbi}, pids cgroup ${settings.cgroups ? 'on' : 'off'})`);
for (const [name, v] of Object.entries(samples)) {
  const median = quantile(v, 0.5);
  console.log(`  ${name.padEnd(11)} median ${fmtMs(median).padEnd(10)} p99 ${fmtMs(quantile(v, 0.99)).padEnd(10)} ratio to plain (median) ${(median / plainMedian).toFixed(2)}x`);
}
