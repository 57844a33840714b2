/**
 * One service replica as an OS process: its own environment, log file and readiness probe (`/readyz`
 * on its metrics port), run as its Runtime says. Supervised (the default for the cluster), a process
 * that exits without being asked to is started again after a back-off (SupervisionOptions), as
 * Kubernetes restarts a container. docs/local-cluster.md, "Supervision".
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { appendFileSync, openSync, closeSync, mkdirSync, readFileSync, writeFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import type { Logger } from '@bedrock/platform/server';

/**
 * How a service runs: `node` runs its TypeScript entry point through tsx, `deno` through Deno,
 * `bundle` runs the production bundle `<bundleDir>/<service>/main.js` with plain Node, as the
 * images do (a start compiles nothing: a restarted replica is ready sooner and takes less CPU).
 */
export type Runtime = 'node' | 'deno' | 'bundle';
export type ServiceName = 'conversation' | 'llm-gateway' | 'tool-runner' | 'web-bff';

export const ROOT = new URL('../../../', import.meta.url).pathname;

export interface ProcessSpec {
  /** e.g. `conversation-1`. */
  readonly name: string;
  readonly service: ServiceName;
  readonly env: Record<string, string>;
  readonly metricsPort: number;
}

/** One line of a process's life as the supervisor saw it. */
export interface ProcessEvent {
  readonly process: string;
  readonly kind: 'started' | 'exited' | 'restarting' | 'ready';
  /** Exit code or signal (`exited`). */
  readonly exit?: number | string;
  /** Automatic restarts so far. */
  readonly restarts: number;
  /** Back-off before the restart, ms (`restarting`). */
  readonly delayMs?: number;
  readonly pid?: number;
  readonly at: number;
}

export interface ServiceProcess extends ProcessSpec {
  readonly logFile: string;
  pid(): number | undefined;
  /** Running now (started and not exited). */
  running(): boolean;
  /** Automatic restarts after unexpected exits so far. */
  restarts(): number;
  /** What happened to this process, oldest first. */
  readonly events: readonly ProcessEvent[];
  /**
   * Sends a signal to the whole process group (the service and anything it spawned). If the
   * process dies of it and is supervised, it is restarted: use stop() to end it for good.
   */
  kill(signal?: NodeJS.Signals): void;
  /** Resolves with the exit code (or signal) once the current (or last) run has exited. */
  exited(): Promise<number | string>;
  /** Starts the process; if it is down (a restart pending), starts it now. No-op while it runs. */
  start(): Promise<void>;
  /** Ends it for good, no restart: SIGTERM to the group, SIGKILL after `graceMs` (default 15 s). */
  stop(graceMs?: number): Promise<void>;
  waitReady(timeoutMs?: number): Promise<void>;
}

export interface SupervisionOptions {
  /** First back-off before a restart, ms. Default 500. */
  readonly initialBackoffMs?: number;
  /** Longest back-off, ms. Default 30 000. */
  readonly maxBackoffMs?: number;
  /** A run that lasted this long resets the back-off, ms. Default 30 000. */
  readonly resetAfterMs?: number;
}

export interface ProcessOptions {
  readonly dir: string;
  readonly runtime: Runtime;
  /** For the `bundle` runtime: the folder holding `<service>/main.js` (cluster.ts builds it). */
  readonly bundleDir?: string;
  /**
   * Keep running after this process exits (left without a supervisor); false for tests. Without it
   * the process gets SIGTERM when this one exits, however it exits (short of SIGKILL).
   */
  readonly detached: boolean;
  /**
   * Restart the process when it exits without being asked to, with the same settings, after a
   * back-off that doubles while it keeps dying (SupervisionOptions), as restartPolicy Always does.
   * Each exit and restart is a JSON line (`"service":"cluster-supervisor"`) in the process's own log
   * file and in `logger`. Default false.
   */
  readonly supervise?: boolean | SupervisionOptions;
  /** Where restarts are logged besides the process's own log file. */
  readonly logger?: Logger;
  /** Every event, as it happens. */
  readonly onEvent?: (event: ProcessEvent) => void;
}

function command(runtime: Runtime, service: ServiceName, bundleDir: string | undefined): [string, string[]] {
  if (runtime === 'bundle') {
    if (!bundleDir) throw new Error('the bundle runtime needs the folder of the bundles (bundleDir)');
    return [process.execPath, [join(bundleDir, service, 'main.js')]];
  }
  const entry = join(ROOT, 'services', service, 'src', 'main.ts');
  if (runtime === 'deno') {
    const deno = join(ROOT, 'node_modules', '.bin', 'deno');
    return [deno, ['run', '--allow-all', '--node-modules-dir=manual', entry]];
  }
  return [process.execPath, ['--import', 'tsx', entry]];
}

const READY_POLL_MS = 200;

/**
 * Process groups of the services started here without `detached`, while they run. When this
 * process exits — returning, `process.exit`, or an uncaught exception — each gets SIGTERM (its
 * own graceful stop), so a test or a supervisor that dies leaves no service behind it, taking
 * work from the queues or CPU from the next run. A SIGKILL of this process runs no handler:
 * `make cluster-down` stops those through the pid files.
 */
const ownedGroups = new Set<number>();
let endOwnedOnExit = false;

function own(pid: number): void {
  ownedGroups.add(pid);
  if (endOwnedOnExit) return;
  endOwnedOnExit = true;
  process.once('exit', () => {
    for (const group of ownedGroups) {
      try {
        process.kill(-group, 'SIGTERM');
      } catch {
        // already gone
      }
    }
  });
}

export function serviceProcess(spec: ProcessSpec, options: ProcessOptions): ServiceProcess {
  const logDir = join(options.dir, 'logs');
  const pidDir = join(options.dir, 'pids');
  mkdirSync(logDir, { recursive: true });
  mkdirSync(pidDir, { recursive: true });
  const logFile = join(logDir, `${spec.name}.log`);
  const pidFile = join(pidDir, `${spec.name}.pid`);
  const supervision = options.supervise ? (options.supervise === true ? {} : options.supervise) : undefined;
  const initialBackoffMs = supervision?.initialBackoffMs ?? 500;
  const maxBackoffMs = supervision?.maxBackoffMs ?? 30_000;
  const resetAfterMs = supervision?.resetAfterMs ?? 30_000;
  const events: ProcessEvent[] = [];
  let child: ChildProcess | null = null;
  let alive = false;
  let exit: Promise<number | string> = Promise.resolve('not started');
  let stopped = false;
  let restarts = 0;
  let backoffMs = initialBackoffMs;
  let restartTimer: NodeJS.Timeout | undefined;

  const record = (event: Omit<ProcessEvent, 'process' | 'restarts' | 'at'>) => {
    const e: ProcessEvent = { process: spec.name, restarts, at: Date.now(), ...event };
    events.push(e);
    options.onEvent?.(e);
    return e;
  };

  /** A supervisor line in the process's own log, next to what the process wrote before it died. */
  const note = (level: 'info' | 'warn', msg: string, fields: Record<string, unknown>) => {
    const line = { level, time: new Date().toISOString(), service: 'cluster-supervisor', process: spec.name, ...fields, msg };
    try {
      appendFileSync(logFile, `${JSON.stringify(line)}\n`);
    } catch {
      // the log directory is gone (the test's temporary folder was removed)
    }
    options.logger?.[level]({ process: spec.name, ...fields }, msg);
  };

  async function probeReady(): Promise<boolean> {
    try {
      const res = await fetch(`http://127.0.0.1:${spec.metricsPort}/readyz`, { signal: AbortSignal.timeout(1000) });
      return res.ok;
    } catch {
      return false; // not listening yet
    }
  }

  function launch(): void {
    const fd = openSync(logFile, 'a');
    const [cmd, args] = command(options.runtime, spec.service, options.bundleDir);
    const c = spawn(cmd, args, {
      cwd: ROOT,
      env: { ...process.env, ...spec.env },
      stdio: ['ignore', fd, fd],
      // Its own process group, so a kill reaches the service's children too.
      detached: true,
    });
    closeSync(fd);
    child = c;
    alive = true;
    const startedAt = Date.now();
    exit = new Promise((resolve) =>
      c.once('exit', (code, signal) => {
        alive = false;
        resolve(code ?? signal ?? 'unknown');
      }),
    );
    if (options.detached && !supervision) c.unref();
    const pid = c.pid;
    if (!options.detached && pid !== undefined) {
      own(pid);
      void exit.then(() => ownedGroups.delete(pid));
    }
    writeFileSync(pidFile, String(c.pid));
    record({ kind: 'started', ...(c.pid ? { pid: c.pid } : {}) });
    void exit.then((how) => onExit(c, how, Date.now() - startedAt));
  }

  function onExit(c: ChildProcess, how: number | string, ranMs: number): void {
    if (child !== c) return;
    record({ kind: 'exited', exit: how });
    if (stopped || !supervision) {
      if (!options.detached || supervision) rmSync(pidFile, { force: true });
      return;
    }
    if (ranMs >= resetAfterMs) backoffMs = initialBackoffMs;
    const delayMs = backoffMs;
    backoffMs = Math.min(maxBackoffMs, backoffMs * 2);
    restarts++;
    record({ kind: 'restarting', delayMs, exit: how });
    note('warn', 'process exited unexpectedly; restarting it', { exit: how, ran_ms: ranMs, restart: restarts, delay_ms: delayMs });
    restartTimer = setTimeout(() => {
      restartTimer = undefined;
      if (stopped || alive) return;
      launch();
      void announceReady(child!);
    }, delayMs);
  }

  /** After an automatic restart: one line when the process is ready again. */
  async function announceReady(c: ChildProcess): Promise<void> {
    const started = Date.now();
    while (child === c && alive && !stopped) {
      if (await probeReady()) {
        record({ kind: 'ready', ...(c.pid ? { pid: c.pid } : {}) });
        note('info', 'restarted process is ready', { restart: restarts, child_pid: c.pid, ms: Date.now() - started });
        return;
      }
      await new Promise((r) => setTimeout(r, READY_POLL_MS));
    }
  }

  const self: ServiceProcess = {
    ...spec,
    logFile,
    events,
    pid: () => child?.pid,
    running: () => alive,
    restarts: () => restarts,
    kill(signal = 'SIGTERM') {
      const pid = child?.pid;
      if (!pid || !alive) return;
      try {
        process.kill(-pid, signal);
      } catch {
        // already gone
      }
    },
    exited: () => exit,
    async start() {
      stopped = false;
      if (restartTimer) {
        clearTimeout(restartTimer);
        restartTimer = undefined;
      }
      if (alive) return;
      launch();
    },
    async stop(graceMs = 15_000) {
      stopped = true;
      if (restartTimer) {
        clearTimeout(restartTimer);
        restartTimer = undefined;
      }
      if (!alive) return;
      self.kill('SIGTERM');
      let timer: NodeJS.Timeout | undefined;
      const late = new Promise<'late'>((r) => {
        timer = setTimeout(() => r('late'), graceMs);
      });
      if ((await Promise.race([exit, late])) === 'late') self.kill('SIGKILL');
      clearTimeout(timer);
      await exit;
    },
    async waitReady(timeoutMs = 60_000) {
      const deadline = Date.now() + timeoutMs;
      const run = exit;
      let exited = false;
      void run.then(() => (exited = true));
      while (Date.now() < deadline) {
        if (exited) throw new Error(`${spec.name} exited before it was ready; see ${logFile}; it ended with:\n${logTail(logFile)}`);
        if (await probeReady()) return;
        await new Promise((r) => setTimeout(r, READY_POLL_MS));
      }
      throw new Error(`${spec.name} was not ready within ${timeoutMs} ms; see ${logFile}`);
    },
  };
  return self;
}

/** The last lines of a log, so an error names the cause even after the directory is gone (CI). */
function logTail(file: string, lines = 20): string {
  try {
    return readFileSync(file, 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
  } catch (err) {
    return `(could not read the log: ${(err as Error).message})`;
  }
}
