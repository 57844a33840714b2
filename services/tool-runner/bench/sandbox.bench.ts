/**
 * Sandboxed versus plain execution of `bash -c true`, in the same run, interleaved so that
 * machine load hits every variant alike: from a plain spawn, through the helper alone, to the
 * whole Restricted bash tool through the executor, with helpers waiting and without, for a
 * host-path job and for a workspace job (its view); the variants are below. Prints median and p99
 * of each, the ratios to plain, and whole/plain against the 1.5x target. Asserts nothing.
 */
import { spawn } from 'node:child_process';
import { chmodSync, chownSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { create } from '@bufbuild/protobuf';
import { Mode, ToolExecJobSchema } from '@bedrock/contracts';
import { DEFAULT_HELPER_PATH, readToolRunnerConfig } from '../src/config.ts';
import { limitArgs } from '../src/sandbox/limits.ts';
import { closeSandboxSettings, createSandboxSettings } from '../src/sandbox/sandbox-settings.ts';
import { createToolExecutor } from '../src/tool-executor.ts';
import { fmtMs, quantile } from './stats.ts';

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 150);
const TARGET = 1.5;
const TOOL_ID = 65534;
/** The workspace owner's uid (in BEDROCK_TOOL_UIDS). */
const OWNER_ID = 200_000;

function run(argv: string[], cwd: string): Promise<number> {
  const t0 = performance.now();
  return new Promise((resolve, reject) => {
    const child = spawn(argv[0] as string, argv.slice(1), { cwd, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    child.stdout.resume();
    child.stderr.resume();
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolve(performance.now() - t0) : reject(new Error(`${argv.join(' ')} exited ${code}`))));
  });
}

// A working directory the tool user can read (the OS temp dir may not be listable by it), and
// a scratch root of the bench's own.
const cwd = mkdtempSync(join(tmpdir(), 'bedrock-bench-cwd-'));
chmodSync(cwd, 0o755);
if (process.getuid?.() === 0) chownSync(cwd, TOOL_ID, TOOL_ID);
const scratchRoot = join(tmpdir(), 'bedrock-scratch-bench');
// A workspace of its owner's, as the conversation service's jobs name them (ROOT/ws-<id>).
const workspaceRoot = mkdtempSync(join(tmpdir(), 'bedrock-bench-ws-'));
chmodSync(workspaceRoot, 0o755);
const workspace = join(workspaceRoot, 'ws-bench');
mkdirSync(workspace, { mode: 0o700 });
if (process.getuid?.() === 0) chownSync(workspace, OWNER_ID, OWNER_ID);

// The runner's defaults (limits, tool user, pids cgroup `auto`, warm helpers), this scratch root.
const { sandbox, limits, workspaces } = readToolRunnerConfig({}, { sandbox: { helper: DEFAULT_HELPER_PATH, scratchRoot } });
const { settings, probe } = await createSandboxSettings({
  runnerId: `bench-${process.pid}`,
  sandbox,
  limits,
  workspaces: { ...workspaces, root: workspaceRoot },
});
const { settings: coldSettings } = await createSandboxSettings({
  runnerId: `bench-cold-${process.pid}`,
  sandbox: { ...sandbox, warmHelpers: 0 },
  limits,
  workspaces: { ...workspaces, root: workspaceRoot },
});
if (!probe.sandboxAvailable) {
  console.log(`sandbox unavailable here (${probe.reason}): nothing to compare`);
  await closeSandboxSettings(settings);
  await closeSandboxSettings(coldSettings);
  process.exit(0);
}
const user = settings.toolUser ? ['--uid', String(TOOL_ID), '--gid', String(TOOL_ID)] : [];
const executor = createToolExecutor({ runnerId: 'bench', context: { sandbox: settings, capture: {} } });
const coldExecutor = createToolExecutor({ runnerId: 'bench', context: { sandbox: coldSettings, capture: {} } });
let sequence = 0;

async function toolCall(through: typeof executor, inWorkspace = false): Promise<number> {
  const job = create(ToolExecJobSchema, {
    toolUseId: `bench-${process.pid}-${++sequence}`,
    conversationId: 'bench',
    toolName: 'bash',
    inputJson: '{"command":"true"}',
    cwd: inWorkspace ? workspace : cwd,
    mode: Mode.RESTRICTED,
    ...(inWorkspace ? { toolUid: OWNER_ID, toolGid: OWNER_ID, workspacePath: workspace } : {}),
  });
  const t0 = performance.now();
  const result = await through.execute(job);
  const ms = performance.now() - t0;
  if (result.isError) throw new Error(result.content);
  return ms;
}

/**
 * The variants, each timed once per round in this order:
 *
 *   plain         spawn bash -c true (no helper)
 *   limits        through the helper with resource limits only (Unrestricted mode)
 *   helper        the sandbox helper alone, as a Restricted run uses it (tool user, Landlock,
 *                 seccomp, capabilities dropped), without scratch or pids cgroup
 *   bash tool     the whole Restricted bash tool through the executor, as a tool call runs:
 *                 job in, ToolCompleteEvent out (scratch, pids cgroup, helper, capture), with
 *                 the runner's helpers started ahead (src/sandbox/warm-helpers.ts)
 *   tool, cold    the same with no helper waiting (a burst beyond the pool): the run starts
 *                 its helper and its cgroup itself
 *   tool, view    the whole Restricted bash tool for a workspace job (its owner's uid, its
 *                 workspace): the helper builds the view (a fresh root, a pid namespace with
 *                 its own /proc, scratch as /tmp) and Landlock confines reads, helpers waiting
 *   view, cold    the same with no helper waiting
 */
const variants: Record<string, () => Promise<number>> = {
  plain: () => run(['bash', '-c', 'true'], cwd),
  limits: () => run([DEFAULT_HELPER_PATH, ...limitArgs(limits.unrestricted), '--', 'bash', '-c', 'true'], cwd),
  helper: () => run([DEFAULT_HELPER_PATH, ...limitArgs(limits.restricted), ...user, '--restricted', '--', 'bash', '-c', 'true'], cwd),
  'bash tool': () => toolCall(executor),
  'tool, cold': () => toolCall(coldExecutor),
  'tool, view': () => toolCall(executor, true),
  'view, cold': () => toolCall(coldExecutor, true),
};

const samples: Record<string, number[]> = Object.fromEntries(Object.keys(variants).map((k) => [k, []]));
for (const fn of Object.values(variants)) await fn(); // warm-up
for (let i = 0; i < ROUNDS; i++) {
  for (const [name, fn] of Object.entries(variants)) samples[name]?.push(await fn());
}
await closeSandboxSettings(settings);
await closeSandboxSettings(coldSettings);
rmSync(cwd, { recursive: true, force: true });
rmSync(workspaceRoot, { recursive: true, force: true });

const median = (name: string): number => quantile(samples[name] ?? [], 0.5);
const plainMedian = median('plain');
console.log(
  `bash -c true, ${ROUNDS} rounds interleaved (Landlock ABI ${probe.landlockAbi}, cgroup ${
    settings.cgroups
      ? Object.entries(settings.cgroups.bounds)
          .filter(([k, v]) => k !== 'version' && v === true)
          .map(([k]) => k)
          .join('+') +
        ' ' +
        settings.cgroups.bounds.version
      : 'off'
  }, private mounts ${probe.privateMounts ? 'on' : 'off'}, views ${settings.views ? 'on' : 'off'})`,
);
for (const [name, v] of Object.entries(samples)) {
  console.log(
    `  ${name.padEnd(11)} median ${fmtMs(quantile(v, 0.5)).padEnd(10)} p99 ${fmtMs(quantile(v, 0.99)).padEnd(10)} ratio to plain (median) ${(quantile(v, 0.5) / plainMedian).toFixed(2)}x`,
  );
}
const whole = median('bash tool') / plainMedian;
console.log(
  `  whole Restricted bash tool ${fmtMs(median('bash tool'))} | helper alone ${fmtMs(median('helper'))} | plain ${fmtMs(plainMedian)}: ` +
    `whole/plain ${whole.toFixed(2)}x (target <= ${TARGET}x: ${whole <= TARGET ? 'met' : 'missed'})`,
);
const viewed = median('tool, view') / plainMedian;
console.log(
  `  whole Restricted bash tool with the view ${fmtMs(median('tool, view'))}: view/plain ${viewed.toFixed(2)}x (target <= ${TARGET}x: ${viewed <= TARGET ? 'met' : 'missed'})`,
);
