/**
 * bash: `bash -c` in the conversation's working directory (so `cd` does not persist), stdin
 * on /dev/null, its own process group, combined output with head and tail kept, a default
 * timeout with a longer opt-in, the whole group killed on timeout or cancel, and a non-zero
 * exit reported as an error result carrying the exit code.
 */
import { stat } from 'node:fs/promises';
import type { Stats } from 'node:fs';
import { BASH_DEFAULT_TIMEOUT_MS, BASH_MAX_TIMEOUT_MS } from '@bedrock/contracts';
import { runSandboxed } from '../sandbox/sandboxed-run.ts';
import { CANCELLED_OUTCOME, errorOutcome } from './tool-types.ts';
import type { ToolContext, ToolOutcome } from './tool-types.ts';

export interface BashInput {
  readonly command: string;
  /** Default BASH_DEFAULT_TIMEOUT_MS / 1000, at most BASH_MAX_TIMEOUT_MS / 1000. */
  readonly timeout_seconds?: number;
}

export function bashTimeoutMs(input: BashInput): number {
  if (input.timeout_seconds === undefined) return BASH_DEFAULT_TIMEOUT_MS;
  return Math.min(Math.max(1, input.timeout_seconds) * 1000, BASH_MAX_TIMEOUT_MS);
}

export async function workingDirectoryProblem(cwd: string): Promise<string | undefined> {
  const found = await workingDirectory(cwd);
  return typeof found === 'string' ? found : undefined;
}

/** The working directory's stats, or what is wrong with it. */
export async function workingDirectory(cwd: string): Promise<Stats | string> {
  try {
    const st = await stat(cwd);
    return st.isDirectory() ? st : `The working directory ${cwd} is not a directory.`;
  } catch {
    return `The working directory ${cwd} does not exist.`;
  }
}

export async function runBash(input: BashInput, ctx: ToolContext): Promise<ToolOutcome> {
  const cwd = await workingDirectory(ctx.cwd);
  if (typeof cwd === 'string') return errorOutcome(cwd);
  const timeoutMs = bashTimeoutMs(input);
  const result = await runSandboxed(ctx.sandbox, {
    mode: ctx.mode,
    argv: ['bash', '-c', input.command],
    cwd: ctx.cwd,
    timeoutMs,
    signal: ctx.signal,
    capture: ctx.capture,
    ...(ctx.onOutput ? { onOutput: ctx.onOutput } : {}),
    ...(ctx.user ? { user: ctx.user } : { cwdStats: cwd }),
    ...(ctx.workspace ? { workspace: ctx.workspace } : {}),
  });
  const display = {
    exitCode: result.exitCode ?? -1,
    totalBytes: result.totalBytes,
    truncated: result.truncated,
    timedOut: result.timedOut,
  };
  if (result.cancelled)
    return {
      ...CANCELLED_OUTCOME,
      content: withNote(result.output, 'Cancelled by the user; the command and everything it started were killed.'),
      display,
    };
  if (result.spawnError) return errorOutcome(`The command could not be started: ${result.spawnError}`);
  if (result.setupError) return errorOutcome(`The sandbox could not be applied, so the command did not run: ${result.setupError}`);
  if (result.oomKilled) {
    // The kernel killed part (or all) of the run at its memory limit: say so, whatever the exit status.
    const note = `killed: the run went past its memory limit of ${formatBytes(result.oomKilled.limit)} (${result.oomKilled.mechanism}); the kernel's OOM killer ended the largest process. Its scratch (/tmp) counts against that limit too.`;
    return {
      content: withNote(result.totalBytes === 0 ? '' : result.output, note),
      isError: true,
      exitCode: result.exitCode ?? -1,
      cancelled: false,
      display: { ...display, oomKilled: true },
    };
  }
  if (result.timedOut) {
    return errorOutcome(
      withNote(
        result.output,
        `Timed out after ${timeoutMs / 1000}s; the command and everything it started were killed. Pass a larger timeout_seconds (up to ${BASH_MAX_TIMEOUT_MS / 1000}) if it needs longer.`,
      ),
      display,
    );
  }
  if (result.exitCode === null) {
    return { ...errorOutcome(withNote(result.output, `Killed by signal ${result.signal ?? 'unknown'}.`), display) };
  }
  const body = result.totalBytes === 0 ? '(no output)' : result.output;
  if (result.exitCode !== 0) {
    return {
      content: withNote(body, `Exit code ${result.exitCode}.`),
      isError: true,
      exitCode: result.exitCode,
      cancelled: false,
      display,
    };
  }
  return { content: body, isError: false, exitCode: 0, cancelled: false, display };
}

function formatBytes(bytes: number): string {
  return bytes % 1024 ** 3 === 0 ? `${bytes / 1024 ** 3} GiB` : `${Math.round(bytes / 1024 ** 2)} MiB`;
}

function withNote(output: string, note: string): string {
  if (output === '') return `[${note}]`;
  return `${output}${output.endsWith('\n') ? '' : '\n'}[${note}]`;
}
