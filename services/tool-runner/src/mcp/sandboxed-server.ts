/**
 * The command line that starts an MCP stdio server under the sandbox helper: the same
 * confinement as a tool run of the same mode (sandboxed-run.ts) — the tool user, Landlock and
 * seccomp, the workspace's view, a private scratch — but long-lived, with stdin and stdout piped
 * to the runner (the protocol) and stderr kept apart (`--separate-stderr`, the server's log).
 */
import { confinementArgs } from '../sandbox/sandboxed-run.ts';
import type { SandboxSettings, RunMode } from '../sandbox/sandbox-settings.ts';

export interface ServerSandboxRequest {
  readonly mode: RunMode;
  readonly argv: readonly string[];
  readonly user?: { readonly uid: number; readonly gid: number };
  readonly workspace?: string;
  /** The cgroup directories the server joins (one per hierarchy), when it has one. */
  readonly cgroupDirs?: readonly string[];
  /** The port rules of an Unrestricted run (a holder's spec), when prebuilt. */
  readonly netRuleset?: string;
}

/**
 * The helper's arguments for `request.argv`. Its resource limits are a fresh cgroup of its own when
 * the machine has one (`cgroupDirs`), else the helper's rlimits without RLIMIT_AS (runtimes such as
 * Node reserve far more address space than they use).
 */
export function serverHelperArgs(settings: SandboxSettings, request: ServerSandboxRequest): string[] {
  const limits = settings.limits[request.mode];
  const cgroup = (request.cgroupDirs?.length ?? 0) > 0;
  return [
    // A long-lived process: no CPU-time limit (0 leaves a limit unchanged), no RLIMIT_AS.
    ...['--mem', '0', '--cpu', '0', '--nproc', String(cgroup ? 0 : limits.processes)],
    ...['--fsize', String(limits.fileSize), '--nofile', String(limits.openFiles)],
    ...confinementArgs(settings, request),
    ...(request.cgroupDirs ?? []).flatMap((d) => ['--cgroup', d]),
    '--separate-stderr',
    '--',
    ...request.argv,
  ];
}
