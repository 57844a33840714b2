/**
 * One service replica as an OS process: its own environment, log file and readiness probe
 * (`/readyz` on its metrics port). Runs the TypeScript entry point with Node (through tsx)
 * or with Deno.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { openSync, closeSync, mkdirSync, writeFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';

export type Runtime = 'node' | 'deno';
export type ServiceName = 'conversation' | 'llm-gateway' | 'tool-runner' | 'web-bff';

export const ROOT = new URL('../../../', import.meta.url).pathname;

export interface ProcessSpec {
  /** e.g. `conversation-1`. */
  readonly name: string;
  readonly service: ServiceName;
  readonly env: Record<string, string>;
  readonly metricsPort: number;
}

export interface ServiceProcess extends ProcessSpec {
  readonly logFile: string;
  pid(): number | undefined;
  /** Sends a signal to the whole process group (the service and anything it spawned). */
  kill(signal?: NodeJS.Signals): void;
  /** Resolves with the exit code (or signal) once the process has exited. */
  exited(): Promise<number | string>;
  start(): Promise<void>;
  waitReady(timeoutMs?: number): Promise<void>;
}

export interface ProcessOptions {
  readonly dir: string;
  readonly runtime: Runtime;
  /** Keep running after this process exits (the local cluster); false for tests. */
  readonly detached: boolean;
}

function command(runtime: Runtime, service: ServiceName): [string, string[]] {
  const entry = join(ROOT, 'services', service, 'src', 'main.ts');
  if (runtime === 'deno') {
    const deno = join(ROOT, 'node_modules', '.bin', 'deno');
    return [deno, ['run', '--allow-all', '--node-modules-dir=manual', entry]];
  }
  return [process.execPath, ['--import', 'tsx', entry]];
}

export function serviceProcess(spec: ProcessSpec, options: ProcessOptions): ServiceProcess {
  const logDir = join(options.dir, 'logs');
  const pidDir = join(options.dir, 'pids');
  mkdirSync(logDir, { recursive: true });
  mkdirSync(pidDir, { recursive: true });
  const logFile = join(logDir, `${spec.name}.log`);
  const pidFile = join(pidDir, `${spec.name}.pid`);
  let child: ChildProcess | null = null;
  let exit: Promise<number | string> = Promise.resolve('not started');

  return {
    ...spec,
    logFile,
    pid: () => child?.pid,
    kill(signal = 'SIGTERM') {
      const pid = child?.pid;
      if (!pid || child?.exitCode !== null || child?.signalCode !== null) return;
      try {
        process.kill(-pid, signal);
      } catch {
        // already gone
      }
    },
    exited: () => exit,
    async start() {
      const fd = openSync(logFile, 'a');
      const [cmd, args] = command(options.runtime, spec.service);
      child = spawn(cmd, args, {
        cwd: ROOT,
        env: { ...process.env, ...spec.env },
        stdio: ['ignore', fd, fd],
        // Its own process group, so a kill reaches the service's children too.
        detached: true,
      });
      closeSync(fd);
      const c = child;
      exit = new Promise((resolve) => c.once('exit', (code, signal) => resolve(code ?? signal ?? 'unknown')));
      if (options.detached) c.unref();
      writeFileSync(pidFile, String(c.pid));
      void exit.then(() => {
        if (!options.detached) rmSync(pidFile, { force: true });
      });
    },
    async waitReady(timeoutMs = 60_000) {
      const deadline = Date.now() + timeoutMs;
      const url = `http://127.0.0.1:${spec.metricsPort}/readyz`;
      let exited = false;
      void exit.then(() => (exited = true));
      while (Date.now() < deadline) {
        if (exited) throw new Error(`${spec.name} exited before it was ready; see ${logFile}`);
        try {
          const res = await fetch(url, { signal: AbortSignal.timeout(1000) });
          if (res.ok) return;
        } catch {
          // not listening yet
        }
        await new Promise((r) => setTimeout(r, 200));
      }
      throw new Error(`${spec.name} was not ready within ${timeoutMs} ms; see ${logFile}`);
    },
  };
}
