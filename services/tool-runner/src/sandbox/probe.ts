/**
 * Asks the helper what this kernel can do. The helper asks the kernel for its Landlock ABI
 * (landlock_create_ruleset with the version flag, not /sys: securityfs is often not mounted)
 * and applies the whole Restricted sandbox in a child to check that a write and a socket are
 * really refused, so "available" means "works here", not "compiled in".
 */
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';

export interface SandboxProbe {
  /** The full Restricted sandbox works on this machine. */
  readonly sandboxAvailable: boolean;
  /** Landlock ABI version the kernel reports, 0 when none. */
  readonly landlockAbi: number;
  readonly seccompAvailable: boolean;
  /** Tools can be switched to the tool user (the probe ran as it). */
  readonly toolUser: boolean;
  /** Each run can get a private mount namespace (private scratch tmpfs, hidden paths). */
  readonly privateMounts: boolean;
  /** Workspace runs can get a view of their own: a new root (pivot_root) and pid namespace with its own /proc. */
  readonly views: boolean;
  /** Why the sandbox is unavailable, empty when it is available. */
  readonly reason: string;
}

const UNAVAILABLE = {
  sandboxAvailable: false,
  landlockAbi: 0,
  seccompAvailable: false,
  toolUser: false,
  privateMounts: false,
  views: false,
} as const;

/** Probes as the tool user when `user` is given. */
export async function probeSandbox(helperPath: string, user?: { uid: number; gid: number }): Promise<SandboxProbe> {
  if (!existsSync(helperPath)) {
    return {
      ...UNAVAILABLE,
      reason: `sandbox helper not found at ${helperPath} (build it: npm run build -w services/tool-runner)`,
    };
  }
  const stdout = await new Promise<string>((resolve) => {
    const args = user ? ['--uid', String(user.uid), '--gid', String(user.gid), '--probe'] : ['--probe'];
    execFile(helperPath, args, { timeout: 10_000 }, (err, out) => resolve(err ? `!${err.message}` : out));
  });
  if (stdout.startsWith('!')) {
    return { ...UNAVAILABLE, reason: `sandbox probe failed: ${stdout.slice(1)}` };
  }
  try {
    const parsed = JSON.parse(stdout) as {
      landlock_abi: number;
      seccomp: boolean;
      sandbox: boolean;
      tool_uid: number;
      private_mounts: boolean;
      views?: boolean;
      error: string;
    };
    const reason = parsed.sandbox ? '' : parsed.landlock_abi === 0 ? 'Landlock is not available on this kernel' : parsed.error;
    return {
      sandboxAvailable: parsed.sandbox,
      landlockAbi: parsed.landlock_abi,
      seccompAvailable: parsed.seccomp,
      toolUser: user !== undefined && parsed.tool_uid === user.uid,
      privateMounts: parsed.private_mounts,
      views: parsed.views === true,
      reason,
    };
  } catch {
    return { ...UNAVAILABLE, reason: `unexpected probe output: ${stdout.slice(0, 200)}` };
  }
}
