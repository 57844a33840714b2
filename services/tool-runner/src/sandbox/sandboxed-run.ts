/**
 * Runs a command through the sandbox helper, always as the tool user (never root, never the
 * runner's uid, when the runner may switch users), under Landlock and seccomp in both modes
 * (`RunMode`), with a private scratch and, where the machine has one, a fresh cgroup of its own.
 * A workspace run runs as its owner's uid and sees only its view (`SandboxedRunRequest.workspace`).
 * docs/tool-runner.md, "The sandbox (both modes)".
 */
import { stat } from 'node:fs/promises';
import type { Stats } from 'node:fs';
import type { RunMode, SandboxSettings, ToolUser } from './sandbox-settings.ts';
import { runCommand } from '../process/run-command.ts';
import type { RunCommandResult } from '../process/run-command.ts';
import type { OutputCaptureOptions } from '../process/output-capture.ts';
import { commandEnv } from './command-env.ts';
import { limitArgs } from './limits.ts';
import type { WarmHelper } from './warm-helpers.ts';

const NOBODY = 65534;

/** The uid and gid a run in `cwd` gets. */
export async function resolveToolUser(user: ToolUser, cwd: string): Promise<{ uid: number; gid: number }> {
  if (user.uid !== 'owner') return { uid: user.uid, gid: user.gid };
  return toolUserFor(user, await stat(cwd).catch(() => undefined));
}

/** The uid and gid a run in a directory of these stats gets (undefined: it could not be stat'ed). */
export function toolUserFor(user: ToolUser, cwdStats: Pick<Stats, 'uid' | 'gid'> | undefined): { uid: number; gid: number } {
  if (user.uid !== 'owner') return { uid: user.uid, gid: user.gid };
  return cwdStats && cwdStats.uid !== 0
    ? { uid: cwdStats.uid, gid: cwdStats.gid === 0 ? user.gid : cwdStats.gid }
    : { uid: NOBODY, gid: user.gid === 0 ? NOBODY : user.gid };
}

export interface SandboxedRunRequest {
  readonly mode: RunMode;
  readonly argv: readonly string[];
  readonly cwd: string;
  readonly timeoutMs: number;
  readonly signal?: AbortSignal;
  readonly onOutput?: (text: string) => void;
  readonly capture?: OutputCaptureOptions;
  /** Run as this user (the job's owner) instead of the settings' tool user. */
  readonly user?: { readonly uid: number; readonly gid: number };
  /** The working directory's stats, when the caller has them already (spares a second stat). */
  readonly cwdStats?: Pick<Stats, 'uid' | 'gid'>;
  /**
   * The run's workspace (a real path containing cwd): its view, and Landlock's read confinement. A
   * workspace run (a job with its owner's uid and a workspace) runs as that uid, reads only the
   * view's directories (Landlock), and where the runner may mount sees only them: the helper builds
   * a fresh root with the system directories, the workspace at its own path, its scratch as /tmp
   * and a /proc of its own pid namespace (--view).
   */
  readonly workspace?: string;
}

export interface SandboxedRunResult extends RunCommandResult {
  /** The sandbox could not be applied, so the command did not run. */
  readonly setupError?: string;
  /** The kernel's OOM killer killed processes of the run at its memory limit (bytes). */
  readonly oomKilled?: { readonly limit: number; readonly mechanism: string };
}

/** Exit status the helper uses when it cannot restrict itself. */
const HELPER_SETUP_FAILURE = 125;
let runSequence = 0;

/**
 * Runs `request` in the sandbox of its mode. Both modes run in their own fresh cgroup (pids,
 * memory, cpu) when the machine has one, usually with a helper that joined it ahead of the run
 * (warm-helpers.ts); the cgroup is emptied when the run ends and removed in the background.
 */
export async function runSandboxed(settings: SandboxSettings, request: SandboxedRunRequest): Promise<SandboxedRunResult> {
  const restricted = request.mode === 'restricted';
  if (restricted && !settings.sandboxAvailable) {
    throw new Error('refusing to run Restricted work without the kernel sandbox');
  }
  const limits = settings.limits[request.mode];
  const env = commandEnv(settings.baseEnv);
  const user =
    request.user ??
    (!settings.toolUser
      ? undefined
      : request.cwdStats
        ? toolUserFor(settings.toolUser, request.cwdStats)
        : await resolveToolUser(settings.toolUser, request.cwd));
  const bounds = settings.cgroups?.bounds;
  const cgroupLimits = {
    processes: limits.processes,
    ...(bounds?.memory ? { memory: limits.memory } : {}),
    ...(bounds?.cpu ? { cpus: limits.cpus } : {}),
  };
  const netRuleset = restricted ? undefined : await settings.netRuleset?.spec(settings.denyPorts);
  // A helper started ahead, already in its own fresh cgroup, takes the cgroup migration
  // (an RCU grace period) off this run's critical path; none waiting: start one now. From
  // taking a waiting helper to supervising it there is no await, so its exit cannot go unseen.
  let warm: WarmHelper | undefined;
  let cgroupDir: string | undefined;
  const plainArgs = !request.cwd.includes('\0') && request.argv.every((a) => !a.includes('\0'));
  if (settings.cgroups && settings.warmHelpers && plainArgs) {
    warm = settings.warmHelpers.take(env);
    if (warm) {
      try {
        // Its own limit, set before the helper forks; the helper itself is the one task more.
        settings.cgroups.setLimits(warm.cgroupDir, { ...cgroupLimits, processes: limits.processes + 1 });
        cgroupDir = warm.cgroupDir;
      } catch {
        warm.discard();
        warm = undefined;
      }
    }
  }
  if (settings.cgroups && !warm) {
    try {
      cgroupDir = await settings.cgroups.create(`run-${process.pid}-${++runSequence}`, cgroupLimits);
    } catch {
      cgroupDir = undefined; // rlimits and the group kill still apply
    }
  }
  const options = [
    // With a pids cgroup, RLIMIT_NPROC would count every tool of the shared tool uid together;
    // with a memory cgroup, memory.max bounds the run's real memory and RLIMIT_AS (address
    // space, which runtimes reserve far beyond what they use) is left alone.
    ...limitArgs(cgroupDir ? { ...limits, processes: 0, ...(bounds?.memory ? { memory: 0 } : {}) } : limits),
    ...confinementArgs(settings, { mode: request.mode, user, netRuleset, workspace: request.workspace }),
    ...(cgroupDir && !warm && settings.cgroups ? settings.cgroups.dirs(cgroupDir).flatMap((d) => ['--cgroup', d]) : []),
    '--',
    ...request.argv,
  ];
  try {
    warm?.start(request.cwd, options);
    const result = await runCommand({
      argv: [settings.helperPath, ...options],
      cwd: request.cwd,
      env,
      timeoutMs: request.timeoutMs,
      ...(warm ? { started: warm.child } : {}),
      ...(request.signal ? { signal: request.signal } : {}),
      ...(request.onOutput ? { onOutput: request.onOutput } : {}),
      ...(request.capture ? { capture: request.capture } : {}),
    });
    const setupFailed = result.exitCode === HELPER_SETUP_FAILURE && result.stderr.includes('bedrock-sandbox:');
    if (setupFailed) return { ...result, setupError: result.stderr.trim() };
    // Read before the cgroup is released (removed) below.
    const oomKills = cgroupDir && bounds?.memory ? (settings.cgroups?.oomKills(cgroupDir) ?? 0) : 0;
    return oomKills > 0
      ? { ...result, oomKilled: { limit: limits.memory, mechanism: bounds?.version === 'v2' ? 'memory.max' : 'memory.limit_in_bytes' } }
      : result;
  } finally {
    // The helper has exited, so its tree is gone; whatever else is in the cgroup is killed
    // now, and the cgroup is removed (and a helper started for the next run) after the
    // result is out, off this run's critical path.
    if (cgroupDir && settings.cgroups) settings.cgroups.release(cgroupDir);
    if (settings.warmHelpers) {
      const helpers = settings.warmHelpers;
      setImmediate(() => helpers.refill());
    }
  }
}

/**
 * The helper's confinement options, the same for a tool run and an MCP server of the same mode
 * (mcp/sandboxed-server.ts): the tool user; Restricted (read-only, no network) or the
 * Unrestricted write scope and port rules; the workspace and its view; the private scratch.
 */
export function confinementArgs(
  settings: SandboxSettings,
  request: {
    readonly mode: RunMode;
    readonly user?: { readonly uid: number; readonly gid: number } | undefined;
    readonly netRuleset?: string | undefined;
    readonly workspace?: string | undefined;
  },
): string[] {
  const view = Boolean(request.workspace && settings.views);
  return [
    ...(request.user ? ['--uid', String(request.user.uid), '--gid', String(request.user.gid)] : []),
    ...(request.mode === 'restricted'
      ? ['--restricted']
      : [
          '--write-scope',
          settings.unrestrictedWrite,
          ...[...settings.denyPorts].flatMap((p) => ['--deny-port', String(p)]),
          ...(request.netRuleset ? ['--net-ruleset', request.netRuleset] : []),
        ]),
    ...(request.workspace
      ? ['--workspace', request.workspace, ...(settings.viewPaths ?? []).flatMap((p) => ['--system-dir', p]), ...(view ? ['--view'] : [])]
      : []),
    ...(settings.scratch || view
      ? [
          '--private-tmp',
          settings.scratchRoot,
          ...(settings.scratchSize ? ['--scratch-size', String(settings.scratchSize)] : []),
          ...(settings.scratchInodes ? ['--scratch-inodes', String(settings.scratchInodes)] : []),
          ...(view ? [] : settings.hidePaths.flatMap((p) => ['--hide', p])),
        ]
      : []),
  ];
}
