/**
 * Runs one command through the sandbox helper, with stdin on /dev/null, reading its output as it
 * comes (so a full pipe never blocks it), and kills the command's whole process group on timeout
 * and on abort. The helper's exit means the whole group is gone (see `runCommand`).
 */
import { spawn } from 'node:child_process';
import type { Readable } from 'node:stream';
import { StringDecoder } from 'node:string_decoder';
import { OutputCapture } from './output-capture.ts';
import type { OutputCaptureOptions } from './output-capture.ts';
import { killGroup } from './process-group.ts';

/** What is used of the process: a ChildProcess, or a helper another process started (its pipes passed here). */
export interface StartedProcess {
  readonly pid?: number | undefined;
  readonly stdio: ArrayLike<unknown>;
  readonly stdout: Readable | null;
  readonly stderr: Readable | null;
  on(event: 'exit', listener: (code: number | null, signal: NodeJS.Signals | null) => void): this;
  on(event: 'error', listener: (err: Error) => void): this;
}

export interface RunCommandOptions {
  /** Program and arguments; argv[0] is looked up on PATH. */
  readonly argv: readonly string[];
  readonly cwd: string;
  readonly env: NodeJS.ProcessEnv;
  /** Wall-clock limit, ms; the group is killed when it passes. */
  readonly timeoutMs: number;
  /** Aborting kills the group at once (cancel). */
  readonly signal?: AbortSignal;
  readonly capture?: OutputCaptureOptions;
  /** Live output, decoded as UTF-8 without splitting characters across calls. */
  readonly onOutput?: (text: string) => void;
  /** Called with the command's process group id once the helper reports it. */
  readonly onGroup?: (pgid: number) => void;
  /**
   * A helper already started (with stdio ignore, pipe, pipe, pipe, ...) and just sent its run:
   * supervised like a spawned one; `argv`, `cwd` and `env` are then not used.
   */
  readonly started?: StartedProcess;
}

export interface RunCommandResult {
  /** Exit status, or null when killed by a signal. */
  readonly exitCode: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly timedOut: boolean;
  readonly cancelled: boolean;
  /** Combined output, head and tail kept around a marker. */
  readonly output: string;
  readonly totalBytes: number;
  readonly truncated: boolean;
  /** What the process wrote on its own stderr pipe (the sandbox helper's errors; at most 4 KB). */
  readonly stderr: string;
  /** Set when the process could not be started at all. */
  readonly spawnError?: string;
  /** The helper's pid. */
  readonly pid: number;
  /** The command's process group, 0 if never reported. */
  readonly pgid: number;
}

/** After the command exits and its group is killed, how long to wait for the pipe to close, ms. */
const PIPE_CLOSE_GRACE_MS = 500;
const STDERR_LIMIT = 4096;
/** How long a kill waits for the helper to report the command's group, ms. */
const REPORT_WAIT_MS = 200;

/**
 * The helper is a supervisor: it runs the command in a new session and process group, reports
 * that group on fd 3, reaps the tree as it dies, kills whatever the command leaves behind when it
 * exits (nothing a tool starts outlives the tool, so a backgrounded child cannot hold the output
 * pipe open), and exits last. So the helper's exit means the whole group is gone.
 */
export function runCommand(options: RunCommandOptions): Promise<RunCommandResult> {
  return new Promise((resolve) => {
    const capture = new OutputCapture(options.capture);
    const decoder = new StringDecoder('utf8');
    let stderr = '';
    let timedOut = false;
    let cancelled = false;
    let exitCode: number | null = null;
    let exitSignal: NodeJS.Signals | null = null;
    let exited = false;
    let outputClosed = false;
    let settled = false;
    let graceTimer: NodeJS.Timeout | undefined;

    const [file, ...args] = options.argv;
    const child: StartedProcess =
      options.started ??
      spawn(file as string, args, {
        cwd: options.cwd,
        env: options.env,
        detached: true,
        stdio: ['ignore', 'pipe', 'pipe', 'pipe'],
      });
    const pid = child.pid ?? 0;
    let pgid = 0;
    let killWanted = false;

    // The kill goes to the command's group, which the helper reports right after forking.
    // Before that report, wait for it (killing the helper instead would orphan the command's
    // children to PID 1), but not forever: after REPORT_WAIT_MS kill the helper, whose death
    // takes the command with it (PR_SET_PDEATHSIG).
    const kill = (): void => {
      killWanted = true;
      if (pgid > 0) killGroup(pgid);
      else if (pid > 0) {
        setTimeout(() => {
          if (pgid === 0 && !exited) killGroup(pid);
        }, REPORT_WAIT_MS).unref();
      }
    };
    const report = child.stdio[3] as NodeJS.ReadableStream | null;
    let reportText = '';
    report?.on('data', (chunk: Buffer) => {
      reportText += chunk.toString('utf8');
      const match = /pgid (\d+)\n/.exec(reportText);
      if (match && pgid === 0) {
        pgid = Number(match[1]);
        options.onGroup?.(pgid);
        if (killWanted && !exited) killGroup(pgid);
      }
    });
    report?.on('error', () => {});
    const onAbort = (): void => {
      if (exited) return;
      cancelled = true;
      kill();
    };
    const timer = setTimeout(() => {
      if (exited) return;
      timedOut = true;
      kill();
    }, options.timeoutMs);

    const finish = (spawnError?: string): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      clearTimeout(graceTimer);
      options.signal?.removeEventListener('abort', onAbort);
      const tail = decoder.end();
      if (tail) options.onOutput?.(tail);
      resolve({
        exitCode,
        signal: exitSignal,
        timedOut,
        cancelled,
        output: capture.render(),
        totalBytes: capture.totalBytes,
        truncated: capture.truncated,
        stderr,
        pid,
        pgid,
        ...(spawnError === undefined ? {} : { spawnError }),
      });
    };
    const maybeFinish = (): void => {
      if (exited && outputClosed) finish();
    };

    child.on('error', (err) => {
      exited = true;
      finish(err.message);
    });
    if (options.signal?.aborted) onAbort();
    else options.signal?.addEventListener('abort', onAbort, { once: true });

    child.stdout?.on('data', (chunk: Buffer) => {
      capture.push(chunk);
      if (options.onOutput) {
        const text = decoder.write(chunk);
        if (text) options.onOutput(text);
      }
    });
    child.stdout?.on('close', () => {
      outputClosed = true;
      maybeFinish();
    });
    child.stderr?.on('data', (chunk: Buffer) => {
      if (stderr.length < STDERR_LIMIT) stderr += chunk.toString('utf8').slice(0, STDERR_LIMIT - stderr.length);
    });
    child.on('exit', (code, sig) => {
      exited = true;
      exitCode = code;
      exitSignal = sig;
      // The helper has killed and reaped the tree; without its report (helper missing or
      // dead early), kill what can be reached.
      if (pgid === 0 && pid > 0) killGroup(pid);
      // Something that escaped may still hold the pipe: do not wait for it forever.
      graceTimer = setTimeout(() => {
        child.stdout?.destroy();
        outputClosed = true;
        maybeFinish();
      }, PIPE_CLOSE_GRACE_MS);
      maybeFinish();
    });
  });
}
