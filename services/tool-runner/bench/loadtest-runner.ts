/**
 * The load test's own tool-runner: the real service started as a child process on loopback and
 * ephemeral ports, with the default settings and service credentials of its own, so that its CPU
 * and memory can be read from /proc apart from the load generator's. It runs the production
 * bundle by default (see `RunnerBuild`); docs/tool-runner.md, "Load-testing a runner".
 */
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { generateServiceCredentials } from '@bedrock/platform/server';
import { DEFAULT_HELPER_PATH } from '../src/config.ts';

const REPO_ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const MAIN = fileURLToPath(new URL('../src/main.ts', import.meta.url));

/** Settings of the environment the child never inherits: it runs on the defaults plus what is set here. */
const NOT_INHERITED = /^(BEDROCK_|REDIS_|OTEL_|LOG_LEVEL$|ANTHROPIC_|DATABASE_URL$)/;

/**
 * `bundle`: what the image runs, `node main.js`, built here into a temporary directory by the same
 * code as `make bundles`. `source`: src/main.ts through tsx, whose loader adds to the RSS (how much: docs/tool-runner.md).
 */
export type RunnerBuild = 'bundle' | 'source';

export interface OwnRunnerOptions {
  /** The production bundle (default) or the TypeScript source through tsx. */
  readonly build?: RunnerBuild;
  /** Consume the tool-exec queues (the queue path) under `redisPrefix` on `redisUrl`; else gRPC only, no Redis. */
  readonly consume: boolean;
  readonly redisUrl: string;
  readonly redisPrefix: string;
  /** Extra settings (`--runner-env`), applied last. */
  readonly env: Readonly<Record<string, string>>;
  /** How long the start may take, ms. */
  readonly startTimeoutMs?: number;
}

export interface OwnRunner {
  readonly pid: number;
  readonly build: RunnerBuild;
  readonly runnerId: string;
  readonly grpcUrl: string;
  /** A token the runner accepts on its ToolRunnerService (peer `loadtest`). */
  readonly token: string;
  /** The environment the runner was started with, beyond the inherited non-Bedrock variables (no runnerDir in it). */
  readonly settings: Readonly<Record<string, string>>;
  /** Set once the process has exited (e.g. killed during the run). */
  exited(): { code: number | null; signal: string | null } | undefined;
  /** The last lines the runner wrote (for a one-line diagnosis). */
  lastLines(): readonly string[];
  /** SIGTERM, then SIGKILL after `graceMs`; removes its credentials and bundle. */
  stop(graceMs?: number): Promise<void>;
}

/** Thrown when the runner cannot be started: its message is one line meant for the operator. */
export class RunnerStartError extends Error {}

export async function startOwnRunner(options: OwnRunnerOptions): Promise<OwnRunner> {
  if (!existsSync(DEFAULT_HELPER_PATH))
    throw new RunnerStartError(
      `the sandbox helper is not built (${DEFAULT_HELPER_PATH}): run make setup, or npm run build -w services/tool-runner`,
    );
  const build = options.build ?? 'bundle';
  const runnerDir = mkdtempSync(join(tmpdir(), 'bedrock-loadtest-runner-'));
  let command: string[];
  try {
    command = build === 'bundle' ? [await bundle(runnerDir)] : ['--import', 'tsx', MAIN];
  } catch (err) {
    rmSync(runnerDir, { recursive: true, force: true });
    throw new RunnerStartError(`bundling the tool-runner failed: ${(err as Error).message.split('\n')[0]}`);
  }
  const credentials = generateServiceCredentials(['loadtest']);
  const peersFile = join(runnerDir, 'peers');
  writeFileSync(peersFile, credentials.peersFile, { mode: 0o600 });
  const runnerId = `loadtest-${process.pid}-${Math.random().toString(36).slice(2, 8)}`;
  const settings: Record<string, string> = {
    BEDROCK_HOST: '127.0.0.1',
    BEDROCK_GRPC_PORT: '0',
    BEDROCK_METRICS_PORT: '0',
    BEDROCK_SERVICE_PEERS_FILE: peersFile,
    BEDROCK_RUNNER_ID: runnerId,
    BEDROCK_RUNNER_CONSUME: String(options.consume),
    // The bundle's default helper path is beside main.js (as in the image); use the one built here.
    ...(build === 'bundle' ? { NODE_ENV: 'production', BEDROCK_SANDBOX_HELPER: DEFAULT_HELPER_PATH } : {}),
    ...(options.consume ? { REDIS_URL: options.redisUrl, BEDROCK_REDIS_PREFIX: options.redisPrefix } : {}),
    ...options.env,
  };
  const inherited = Object.fromEntries(Object.entries(process.env).filter(([name]) => !NOT_INHERITED.test(name)));
  const child = spawn(process.execPath, command, {
    cwd: REPO_ROOT,
    env: { ...inherited, ...settings },
    stdio: ['ignore', 'pipe', 'pipe'],
    // Its own process group: a Ctrl-C meant for the load test reaches the runner only as the load test's orderly stop.
    detached: true,
  });
  // Never left behind, whatever way this process ends.
  const killOnExit = () => child.kill('SIGKILL');
  process.on('exit', killOnExit);

  const lines: string[] = [];
  const keep = (line: string) => {
    lines.push(line);
    if (lines.length > 40) lines.shift();
  };
  let exit: { code: number | null; signal: string | null } | undefined;
  const exitedPromise = new Promise<void>((resolve) => {
    child.on('exit', (code, signal) => {
      exit = { code, signal };
      process.off('exit', killOnExit);
      resolve();
    });
  });
  createInterface({ input: child.stderr! }).on('line', keep);

  const stdout = createInterface({ input: child.stdout! });
  const grpcPort = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new RunnerStartError(`the runner started here was not ready within ${(options.startTimeoutMs ?? 60_000) / 1000} s`));
    }, options.startTimeoutMs ?? 60_000);
    stdout.on('line', (line) => {
      keep(line);
      const entry = parseJson(line);
      if (entry?.msg === 'tool-runner started' && typeof entry.grpc_port === 'number') {
        clearTimeout(timer);
        resolve(entry.grpc_port);
      }
    });
    void exitedPromise.then(() => {
      clearTimeout(timer);
      reject(new RunnerStartError(`the runner started here exited before it was ready (${describeExit(exit)}): ${diagnosis(lines)}`));
    });
  }).catch((err: unknown) => {
    rmSync(runnerDir, { recursive: true, force: true });
    throw err;
  });

  return {
    pid: child.pid!,
    build,
    runnerId,
    grpcUrl: `http://127.0.0.1:${grpcPort}`,
    token: credentials.tokens.loadtest!,
    settings: { ...settings, BEDROCK_SERVICE_PEERS_FILE: '(a file of its own, peer loadtest)' },
    exited: () => exit,
    lastLines: () => [...lines],
    async stop(graceMs = 20_000) {
      if (!exit) {
        child.kill('SIGTERM');
        const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
        await exitedPromise;
        clearTimeout(timer);
      }
      rmSync(runnerDir, { recursive: true, force: true });
    },
  };
}

/** `dist/tool-runner/main.js` as the image has it, under `dir`; returns its path. */
async function bundle(dir: string): Promise<string> {
  const { bundleService } = await import('../../../packages/deploy-check/src/bundle.ts');
  return (await bundleService('tool-runner', join(dir, 'dist'))).mainFile;
}

function parseJson(line: string): Record<string, unknown> | undefined {
  if (!line.startsWith('{')) return undefined;
  try {
    return JSON.parse(line) as Record<string, unknown>;
  } catch {
    return undefined;
  }
}

export function describeExit(exit: { code: number | null; signal: string | null } | undefined): string {
  return exit?.signal ? `signal ${exit.signal}` : `exit ${exit?.code ?? '?'}`;
}

/** The most telling line of what the runner wrote: its last error log entry, else the first `Error` line of stderr, else the last line. */
export function diagnosis(lines: readonly string[]): string {
  for (let i = lines.length - 1; i >= 0; i--) {
    const entry = parseJson(lines[i] as string);
    if (entry && (entry.level === 'error' || entry.level === 'fatal')) {
      const err = entry.err as { message?: string } | undefined;
      return [entry.msg, err?.message].filter(Boolean).join(': ');
    }
  }
  const error = lines.find((line) => /^\w*Error\b/.test(line.trim()));
  return (error ?? lines.at(-1) ?? 'no output').trim().slice(0, 300);
}

/** Seconds of CPU a process has used (its own, and that of its children it has reaped: the tools and their helpers). */
export interface ProcessCpu {
  readonly user: number;
  readonly system: number;
  readonly childrenUser: number;
  readonly childrenSystem: number;
}

let clockTicks: number | undefined;
function ticksPerSecond(): number {
  if (clockTicks === undefined) {
    try {
      clockTicks = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
    } catch {
      clockTicks = 100;
    }
  }
  return clockTicks;
}

/** From /proc/<pid>/stat (utime, stime, cutime, cstime: fields 14 to 17). */
export function readProcessCpu(pid: number): ProcessCpu {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  // The command name (field 2) may hold spaces and parentheses: count from the last ')'.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const hz = ticksPerSecond();
  const at = (i: number) => Number(fields[i]) / hz;
  return { user: at(11), system: at(12), childrenUser: at(13), childrenSystem: at(14) };
}

/** From /proc/<pid>/status: resident set now and its peak over the process's life (VmHWM), bytes. */
export function readProcessMemory(pid: number): { rss: number; peakRss: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (name: string) => Number(new RegExp(`^${name}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? Number.NaN) * 1024;
  return { rss: kb('VmRSS'), peakRss: kb('VmHWM') };
}
