/**
 * Builds the sandbox settings of a runner: probes the kernel (as the tool user), finds a pids
 * cgroup hierarchy, prepares the scratch root, and works out which ports tools may not reach.
 */
import { chmodSync, mkdirSync, statSync } from 'node:fs';
import { probeSandbox } from './probe.ts';
import type { SandboxProbe } from './probe.ts';
import { createPidsCgroups, findPidsCgroupRoot } from './pids-cgroup.ts';
import { createNetRulesetHolder } from './net-ruleset-holder.ts';
import { createWarmHelpers } from './warm-helpers.ts';
import { commandEnv } from './command-env.ts';
import type { SandboxSettings, ToolUser } from './sandboxed-run.ts';
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
  /** The user tools run as (a uid ≥ 1, or `owner` of the working directory). Default 65534. */
  readonly toolUid?: number | 'owner';
  readonly toolGid?: number;
  readonly unrestrictedWrite?: 'workspace' | 'host';
  /** TCP ports tools may never connect to. */
  readonly toolDenyPorts?: readonly number[];
  readonly toolHidePaths?: readonly string[];
  readonly baseEnv?: NodeJS.ProcessEnv;
  /** Helpers kept started ahead, each in its own fresh pids cgroup (with a pids cgroup only). Default 2. */
  readonly warmHelpers?: number;
}

export interface SandboxSetup {
  readonly settings: SandboxSettings;
  readonly probe: SandboxProbe;
  /** One line for the start-up log when tools cannot be given their own user, else undefined. */
  readonly toolUserWarning?: string;
}

const NOBODY = 65534;
const DEFAULT_WARM_HELPERS = 2;

/** The scratch root: created if missing, 0711 (tools may enter their own run's directory, not list others). */
function prepareScratchRoot(root: string): void {
  // Only a directory made here gets its mode set: an existing one (an operator's choice, even
  // /tmp itself) is never changed — chmod of a shared directory would lock other users out.
  const created = mkdirSync(root, { recursive: true, mode: 0o711 }) !== undefined;
  const st = statSync(root);
  if (!st.isDirectory()) throw new Error(`BEDROCK_SANDBOX_SCRATCH_ROOT ${root} is not a directory`);
  if (created && st.uid === process.getuid?.()) chmodSync(root, 0o711);
}

export async function createSandboxSettings(input: SandboxSettingsInput): Promise<SandboxSetup> {
  const wanted = input.toolUid ?? NOBODY;
  const gid = input.toolGid ?? NOBODY;
  const probeUid = wanted === 'owner' ? NOBODY : wanted;
  let probe = await probeSandbox(input.helperPath, { uid: probeUid, gid });
  let toolUser: ToolUser | null = { uid: wanted, gid };
  let toolUserWarning: string | undefined;
  if (!probe.toolUser) {
    // Not root (or no CAP_SETUID): tools can only run as this process's own user.
    const self = await probeSandbox(input.helperPath);
    if (self.sandboxAvailable || !probe.sandboxAvailable) probe = self;
    toolUser = null;
    toolUserWarning =
      `tools run as this process's own user (uid ${process.getuid?.() ?? '?'}): it cannot switch them to uid ${probeUid} ` +
      '(run it as root or with CAP_SETUID/CAP_SETGID); the kernel sandbox still applies, but files this user can read are readable to tools';
  }
  const root = input.pidsCgroup === 'off' ? null : input.pidsCgroup === 'auto' ? findPidsCgroupRoot() : input.pidsCgroup;
  let cgroups = null;
  if (root) {
    try {
      cgroups = createPidsCgroups(root, input.runnerId);
    } catch {
      cgroups = null;
    }
  }
  prepareScratchRoot(input.scratchRoot);
  const baseEnv = input.baseEnv ?? process.env;
  const warmCount = input.warmHelpers ?? DEFAULT_WARM_HELPERS;
  const warmHelpers =
    cgroups && probe.sandboxAvailable && warmCount > 0
      ? createWarmHelpers({ helperPath: input.helperPath, cgroups, env: () => commandEnv(baseEnv), size: warmCount })
      : undefined;
  return {
    probe,
    ...(toolUserWarning ? { toolUserWarning } : {}),
    settings: {
      helperPath: input.helperPath,
      sandboxAvailable: probe.sandboxAvailable,
      restrictedLimits: input.restrictedLimits,
      unrestrictedLimits: input.unrestrictedLimits,
      cgroups,
      ...(warmHelpers ? { warmHelpers } : {}),
      scratch: input.scratch,
      scratchRoot: input.scratchRoot,
      toolUser,
      unrestrictedWrite: input.unrestrictedWrite ?? 'workspace',
      denyPorts: new Set(input.toolDenyPorts ?? []),
      hidePaths: input.toolHidePaths ?? [],
      ...(probe.landlockAbi >= 4 ? { netRuleset: createNetRulesetHolder(input.helperPath) } : {}),
      baseEnv,
    },
  };
}

/** Ends what the settings started: waiting helpers, per-run cgroups (after their background removal), the port-rules holder. */
export async function closeSandboxSettings(settings: SandboxSettings): Promise<void> {
  await settings.warmHelpers?.close();
  await settings.cgroups?.close();
  settings.netRuleset?.close();
}
