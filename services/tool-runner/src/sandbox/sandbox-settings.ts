/**
 * A runner's sandbox settings (`SandboxSettings`, the run modes, the tool user) and how they are
 * built: probes the kernel (as the tool user), finds a pids cgroup hierarchy, prepares the scratch
 * root, and works out which ports tools may not reach.
 */
import type { UidRange } from '@bedrock/platform/config';
import { chmodSync, mkdirSync, statSync } from 'node:fs';
import { probeSandbox } from './probe.ts';
import type { SandboxProbe } from './probe.ts';
import { createPidsCgroups, findCgroupRoots } from './pids-cgroup.ts';
import type { PidsCgroups } from './pids-cgroup.ts';
import { createNetRulesetHolder } from './net-ruleset-holder.ts';
import { createWarmHelpers } from './warm-helpers.ts';
import { createSpawner } from './spawner.ts';
import { commandEnv } from './command-env.ts';
import type { NetRulesetHolder } from './net-ruleset-holder.ts';
import type { ResourceLimits } from './limits.ts';
import type { WarmHelpers } from './warm-helpers.ts';
import type { LimitsConfig, SandboxConfig } from '../config.ts';

/**
 * Restricted: read-only, no network. Unrestricted: writes to the working directory, its scratch and
 * home only (unless the operator widened it: `unrestrictedWrite`), network except the system's own ports.
 */
export type RunMode = 'restricted' | 'unrestricted';

export interface ToolUser {
  /** A uid ≥ 1, or `owner`: the working directory's owner unless that is root (then 65534). */
  readonly uid: number | 'owner';
  readonly gid: number;
}

export interface SandboxSettings {
  /** Path of the bedrock-sandbox executable. */
  readonly helperPath: string;
  /** The probe found a working sandbox; Restricted runs are refused otherwise. */
  readonly sandboxAvailable: boolean;
  /** The resource limits of each mode. */
  readonly limits: Readonly<Record<RunMode, ResourceLimits>>;
  /** Per-run cgroups (pids, and memory and cpu where offered), or null when the machine has no writable pids hierarchy. */
  readonly cgroups: PidsCgroups | null;
  /** Helpers started ahead, each already in its own fresh pids cgroup (with `cgroups` only). */
  readonly warmHelpers?: WarmHelpers;
  /** Give runs a private writable scratch directory (TMPDIR, HOME), which the helper creates and removes. */
  readonly scratch: boolean;
  /** Where each run's private scratch lives (see the helper's --private-tmp). */
  readonly scratchRoot: string;
  /** Size of each run's scratch tmpfs, bytes, and its inodes (0: unbounded). */
  readonly scratchSize?: number;
  readonly scratchInodes?: number;
  /** Workspace runs get a view of their own (the helper's --view: the runner may mount and make pid namespaces). */
  readonly views?: boolean;
  /** The system directories of a workspace run's view and Landlock read rules (default: the helper's list). */
  readonly viewPaths?: readonly string[];
  /** The uids and gids a job may ask tools to run as (BEDROCK_TOOL_UIDS). */
  readonly toolUids: { readonly first: number; readonly last: number };
  /** Where workspaces live (BEDROCK_WORKSPACE_ROOT): a job's workspace must be directly inside it. */
  readonly workspaceRoot: string;
  /** Who tools run as; null when the runner cannot switch users (tools then run as the runner's uid). */
  readonly toolUser: ToolUser | null;
  /** What Unrestricted tools may write. */
  readonly unrestrictedWrite: 'workspace' | 'host';
  /** TCP ports tools may never connect to; compositions add the ports of their own endpoints. */
  readonly denyPorts: Set<number>;
  /** Paths hidden from tools in their private mount namespace. */
  readonly hidePaths: readonly string[];
  /** Prebuilt Unrestricted port rules (Landlock ABI ≥ 4); without it each run builds its own. */
  readonly netRuleset?: NetRulesetHolder;
  /** Environment the command env is derived from (secrets removed): a snapshot of the runner's, taken at start. */
  readonly baseEnv: NodeJS.ProcessEnv;
}

export interface SandboxSettingsInput {
  readonly runnerId: string;
  /** The runner's `sandbox` settings (config.ts). */
  readonly sandbox: SandboxConfig;
  /** The resource limits of each mode (config.ts `limits`). */
  readonly limits: LimitsConfig;
  /** Where workspaces live, and the uids their tools may run as (config.ts `workspaces`). */
  readonly workspaces: { readonly root: string; readonly toolUids: UidRange };
  /** Environment the command env is derived from. Default a copy of process.env, taken now. */
  readonly baseEnv?: NodeJS.ProcessEnv;
}

export interface SandboxSetup {
  readonly settings: SandboxSettings;
  readonly probe: SandboxProbe;
  /** One line for the start-up log when tools cannot be given their own user, else undefined. */
  readonly toolUserWarning?: string;
  /** One line for the start-up log: which bounds and which isolation of workspace runs this host enforces, and which it cannot. */
  readonly boundsLine: string;
}

/** What this host enforces, in one line for the start-up log. */
export function describeBounds(probe: SandboxProbe, cgroups: PidsCgroups | null, scratchSize: number): string {
  const b = cgroups?.bounds;
  const enforced: string[] = [];
  const missing: string[] = [];
  (b?.pids ? enforced : missing).push(
    b?.pids ? `processes (pids.max, cgroup ${b.version})` : 'processes per run (no pids cgroup: RLIMIT_NPROC per user)',
  );
  (b?.memory ? enforced : missing).push(
    b?.memory
      ? `memory per run (${b.version === 'v2' ? 'memory.max' : 'memory.limit_in_bytes'}${b.swap ? ', no swap' : ', swap not bounded: no memsw accounting'})`
      : 'memory per run (no memory cgroup: RLIMIT_AS per process)',
  );
  (b?.cpu ? enforced : missing).push(b?.cpu ? `CPU (${b.version === 'v2' ? 'cpu.max' : 'cpu.cfs_quota_us'})` : 'CPU share (no cpu cgroup)');
  if (probe.privateMounts) enforced.push(`scratch size ${Math.round(scratchSize / 1024 ** 2)} MiB (tmpfs size=)`);
  else missing.push('scratch size (no tmpfs without CAP_SYS_ADMIN: a directory under the scratch root)');
  if (probe.views) enforced.push("workspace views (own root and pid namespace: other users' files and processes are not there)");
  else
    missing.push(
      'workspace views (cannot mount or make pid namespaces: reads are confined by Landlock only, and processes stay visible without a pid namespace)',
    );
  return `bounds enforced: ${enforced.join('; ')}. Not enforced here: ${missing.length ? missing.join('; ') : 'none'}.`;
}

const NOBODY = 65534;

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
  const config = input.sandbox;
  const wanted = config.toolUid;
  const gid = config.toolGid;
  const probeUid = wanted === 'owner' ? NOBODY : wanted;
  let probe = await probeSandbox(config.helper, { uid: probeUid, gid });
  let toolUser: ToolUser | null = { uid: wanted, gid };
  let toolUserWarning: string | undefined;
  if (!probe.toolUser) {
    // Not root (or no CAP_SETUID): tools can only run as this process's own user.
    const self = await probeSandbox(config.helper);
    if (self.sandboxAvailable || !probe.sandboxAvailable) probe = self;
    toolUser = null;
    toolUserWarning =
      `tools run as this process's own user (uid ${process.getuid?.() ?? '?'}): it cannot switch them to uid ${probeUid} ` +
      '(run it as root or with CAP_SETUID/CAP_SETGID); the kernel sandbox still applies, but files this user can read are readable to tools';
  }
  const root = config.pidsCgroup === 'off' ? null : config.pidsCgroup === 'auto' ? findCgroupRoots() : config.pidsCgroup;
  let cgroups = null;
  if (root) {
    try {
      cgroups = createPidsCgroups(root, input.runnerId);
    } catch {
      cgroups = null;
    }
  }
  prepareScratchRoot(config.scratchRoot);
  // The runner's environment as it was at start (the commands' environment is derived from it once).
  const baseEnv = input.baseEnv ?? { ...process.env };
  const warmHelpers =
    cgroups && probe.sandboxAvailable && config.warmHelpers > 0
      ? createWarmHelpers({
          helperPath: config.helper,
          cgroups,
          env: () => commandEnv(baseEnv),
          size: config.warmHelpers,
          // Under Deno a helper's pipes handed over the spawner's IPC channel never deliver (its
          // runs hung in deno.e2e): there the runner starts its helpers itself.
          ...(config.spawner === 'process' && !('Deno' in globalThis) ? { spawner: createSpawner() } : {}),
        })
      : undefined;
  return {
    probe,
    ...(toolUserWarning ? { toolUserWarning } : {}),
    boundsLine: describeBounds(probe, cgroups, config.scratchSize),
    settings: {
      helperPath: config.helper,
      sandboxAvailable: probe.sandboxAvailable,
      limits: input.limits,
      cgroups,
      ...(warmHelpers ? { warmHelpers } : {}),
      scratch: config.scratch,
      scratchRoot: config.scratchRoot,
      scratchSize: config.scratchSize,
      scratchInodes: config.scratchInodes,
      views: probe.views && probe.privateMounts,
      viewPaths: config.viewPaths,
      toolUids: input.workspaces.toolUids,
      workspaceRoot: input.workspaces.root,
      toolUser,
      unrestrictedWrite: config.unrestrictedWrite,
      denyPorts: new Set(config.denyPorts),
      hidePaths: config.hidePaths,
      ...(probe.landlockAbi >= 4 ? { netRuleset: createNetRulesetHolder(config.helper) } : {}),
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
