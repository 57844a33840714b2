/**
 * Clones a repository into a new (empty) workspace as its owner, through the sandbox helper in
 * Unrestricted mode with the workspace as the working directory: the tool user, Landlock (writes
 * to the workspace and a private scratch only), the network rules (none of the system's own ports)
 * and the owner's quota. Git runs with no terminal, credential helper or hooks (cloneArgv) and
 * few protocols (GIT_ENV).
 */
import { Code, ConnectError } from '@connectrpc/connect';
import { runSandboxed } from '../sandbox/sandboxed-run.ts';
import type { SandboxSettings } from '../sandbox/sandbox-settings.ts';
import type { Owner } from './backend.ts';
import { lastLines } from './run.ts';

export interface CloneRequest {
  readonly url: string;
  /** The new, empty workspace (owned by `owner`). */
  readonly dir: string;
  readonly owner: Owner;
  readonly timeoutMs: number;
  readonly signal?: AbortSignal;
}

/**
 * Git's own environment for the clone; commandEnv adds GIT_TERMINAL_PROMPT=0 and strips the
 * runner's secrets. No protocols but https, http, ssh and git, so no `ext::` or file:// through
 * redirects or submodules.
 */
const GIT_ENV = {
  GIT_ALLOW_PROTOCOL: 'https:http:ssh:git',
  GIT_CONFIG_NOSYSTEM: '1',
  GIT_SSH_COMMAND: 'ssh -o BatchMode=yes -o StrictHostKeyChecking=accept-new',
};

/** The URL as messages show it: a password in it is masked. */
export function shownUrl(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password) parsed.password = '***';
    return parsed.href;
  } catch {
    return url; // scp-like: no password
  }
}

export function cloneArgv(url: string): string[] {
  return [
    'git',
    '-c',
    'core.hooksPath=/dev/null',
    '-c',
    'credential.helper=',
    '-c',
    'core.fsmonitor=false',
    'clone',
    '--quiet',
    '--',
    url,
    '.',
  ];
}

/** Clones, or throws FAILED_PRECONDITION with git's last lines (a timeout too). */
export async function cloneInto(settings: SandboxSettings, request: CloneRequest): Promise<void> {
  const result = await runSandboxed(
    {
      ...settings,
      // The workspace's owner, whatever tool user the runner's other work uses.
      ...(settings.toolUser ? { toolUser: { uid: request.owner.uid, gid: request.owner.gid } } : {}),
      baseEnv: { ...settings.baseEnv, ...GIT_ENV },
    },
    {
      mode: 'unrestricted',
      argv: cloneArgv(request.url),
      cwd: request.dir,
      // A workspace run: where the runner may mount, the new workspace in a view of its own (at
      // its own path under a fresh root), so the owner needs no search permission on the
      // directories above the workspace root (a 0700 data directory); Landlock's read rules always.
      workspace: request.dir,
      timeoutMs: request.timeoutMs,
      ...(request.signal ? { signal: request.signal } : {}),
      capture: { headBytes: 4000, tailBytes: 8000 },
    },
  );
  if (result.setupError) throw new ConnectError(`git clone could not start under the sandbox: ${result.setupError}`, Code.Internal);
  if (result.spawnError) throw new ConnectError(`git clone could not start: ${result.spawnError}`, Code.Internal);
  if (result.timedOut) {
    throw new ConnectError(
      `git clone of ${shownUrl(request.url)} did not finish within ${Math.round(request.timeoutMs / 1000)} s (BEDROCK_WORKSPACE_CLONE_TIMEOUT): ${lastLines(result.output, 3)}`,
      Code.FailedPrecondition,
    );
  }
  if (result.exitCode !== 0) {
    throw new ConnectError(
      `git clone of ${shownUrl(request.url)} failed: ${lastLines(result.output, 6) || `exit ${result.exitCode ?? result.signal}`}`,
      Code.FailedPrecondition,
    );
  }
}
