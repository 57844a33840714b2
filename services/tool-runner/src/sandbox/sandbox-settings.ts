/** Builds the sandbox settings of a runner: probes the kernel, finds a pids cgroup hierarchy. */
import { probeSandbox } from './probe.ts';
import type { SandboxProbe } from './probe.ts';
import { createPidsCgroups, findPidsCgroupRoot } from './pids-cgroup.ts';
import type { SandboxSettings } from './sandboxed-run.ts';
import type { ResourceLimits } from './limits.ts';

export interface SandboxSettingsInput {
  readonly runnerId: string;
  readonly helperPath: string;
  readonly scratch: boolean;
  readonly scratchRoot: string;
  /** `auto`, `off` or a directory. */
  readonly pidsCgroup: string;
  readonly restrictedLimits: ResourceLimits;
  readonly unrestrictedLimits: ResourceLimits;
  readonly baseEnv?: NodeJS.ProcessEnv;
}

export async function createSandboxSettings(input: SandboxSettingsInput): Promise<{ settings: SandboxSettings; probe: SandboxProbe }> {
  const probe = await probeSandbox(input.helperPath);
  const root = input.pidsCgroup === 'off' ? null : input.pidsCgroup === 'auto' ? findPidsCgroupRoot() : input.pidsCgroup;
  let cgroups = null;
  if (root) {
    try {
      cgroups = createPidsCgroups(root, input.runnerId);
    } catch {
      cgroups = null;
    }
  }
  return {
    probe,
    settings: {
      helperPath: input.helperPath,
      sandboxAvailable: probe.sandboxAvailable,
      restrictedLimits: input.restrictedLimits,
      unrestrictedLimits: input.unrestrictedLimits,
      cgroups,
      scratch: input.scratch,
      scratchRoot: input.scratchRoot,
      baseEnv: input.baseEnv ?? process.env,
    },
  };
}
