/**
 * Runs a command through the sandbox helper: Restricted mode under Landlock + seccomp with a
 * private scratch directory, Unrestricted with resource limits only; both in a pids cgroup
 * when the machine has one. The scratch directory and the cgroup are removed afterwards.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { runCommand } from '../process/run-command.ts';
import type { RunCommandResult } from '../process/run-command.ts';
import type { OutputCaptureOptions } from '../process/output-capture.ts';
import { commandEnv } from './command-env.ts';
import { limitArgs } from './limits.ts';
import type { ResourceLimits } from './limits.ts';
import type { PidsCgroups } from './pids-cgroup.ts';

export interface SandboxSettings {
  /** Path of the bedrock-sandbox executable. */
  readonly helperPath: string;
  /** The probe found a working sandbox; Restricted runs are refused otherwise. */
  readonly sandboxAvailable: boolean;
  readonly restrictedLimits: ResourceLimits;
  readonly unrestrictedLimits: ResourceLimits;
  /** Per-run pids cgroups, or null when the machine has no writable pids hierarchy. */
  readonly cgroups: PidsCgroups | null;
  /** Give Restricted runs a private writable scratch directory (TMPDIR). */
  readonly scratch: boolean;
  /** Where scratch directories are created. */
  readonly scratchRoot: string;
  /** Environment the command env is derived from (secrets removed). */
  readonly baseEnv: NodeJS.ProcessEnv;
}

export type RunMode = 'restricted' | 'unrestricted';

export interface SandboxedRunRequest {
  readonly mode: RunMode;
  readonly argv: readonly string[];
  readonly cwd: string;
  readonly timeoutMs: number;
  readonly signal?: AbortSignal;
  readonly onOutput?: (text: string) => void;
  readonly capture?: OutputCaptureOptions;
}

export interface SandboxedRunResult extends RunCommandResult {
  /** The sandbox could not be applied, so the command did not run. */
  readonly setupError?: string;
}

/** Exit status the helper uses when it cannot restrict itself. */
const HELPER_SETUP_FAILURE = 125;
let runSequence = 0;

export async function runSandboxed(settings: SandboxSettings, request: SandboxedRunRequest): Promise<SandboxedRunResult> {
  const restricted = request.mode === 'restricted';
  if (restricted && !settings.sandboxAvailable) {
    throw new Error('refusing to run Restricted work without the kernel sandbox');
  }
  const limits = restricted ? settings.restrictedLimits : settings.unrestrictedLimits;
  const scratchDir = restricted && settings.scratch ? await mkdtemp(join(settings.scratchRoot, 'bedrock-scratch-')) : undefined;
  let cgroupDir: string | undefined;
  if (settings.cgroups) {
    try {
      cgroupDir = await settings.cgroups.create(`run-${process.pid}-${++runSequence}`, limits.processes);
    } catch {
      cgroupDir = undefined; // rlimits and the group kill still apply
    }
  }
  const argv = [
    settings.helperPath,
    ...limitArgs(limits),
    ...(restricted ? ['--restricted'] : []),
    ...(scratchDir ? ['--scratch', scratchDir] : []),
    ...(cgroupDir ? ['--cgroup', cgroupDir] : []),
    '--',
    ...request.argv,
  ];
  const env = commandEnv(settings.baseEnv, scratchDir ? { TMPDIR: scratchDir } : {});
  try {
    const result = await runCommand({
      argv,
      cwd: request.cwd,
      env,
      timeoutMs: request.timeoutMs,
      ...(request.signal ? { signal: request.signal } : {}),
      ...(request.onOutput ? { onOutput: request.onOutput } : {}),
      ...(request.capture ? { capture: request.capture } : {}),
    });
    const setupFailed = result.exitCode === HELPER_SETUP_FAILURE && result.stderr.includes('bedrock-sandbox:');
    return setupFailed ? { ...result, setupError: result.stderr.trim() } : result;
  } finally {
    if (cgroupDir && settings.cgroups) await settings.cgroups.destroy(cgroupDir);
    if (scratchDir) await rm(scratchDir, { recursive: true, force: true });
  }
}
