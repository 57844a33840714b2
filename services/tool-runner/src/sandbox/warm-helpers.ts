/**
 * A few sandbox helpers started ahead of their runs, each already inside its own fresh pids cgroup
 * (`bedrock-sandbox --await-args --cgroup DIR`): moving a process into a cgroup waits for an RCU
 * grace period, which a helper started here pays in the background. It then waits for its run's
 * working directory and arguments on fd 4. docs/tool-runner.md, "Off the critical path" (the
 * costs).
 */
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import type { PidsCgroups } from './pids-cgroup.ts';
import type { SpawnedHelper, Spawner } from './spawner.ts';

/** A helper process: spawned here, or by the spawner process (its pipes passed back). */
export type HelperProcess = ChildProcess | SpawnedHelper;

export interface WarmHelper {
  readonly child: HelperProcess;
  /** Its own fresh cgroup, which the helper has joined (or is joining). */
  readonly cgroupDir: string;
  /** Sends the run: the helper enters `cwd` and runs as if `args` had been its command line. */
  start(cwd: string, args: readonly string[]): void;
  /** Not used after all: ends it and releases its cgroup. */
  discard(): void;
}

export interface WarmHelpers {
  /**
   * A waiting helper started with exactly `env`, or undefined (none ready: start one cold). The run
   * that takes it sets its cgroup's pids.max first.
   */
  take(env: NodeJS.ProcessEnv): WarmHelper | undefined;
  /** Starts helpers in the background up to the pool size (at start, and after each run's result is out). */
  refill(): void;
  /** How many helpers `take` could hand out now (their pipes are here; not yet gone). */
  waitingCount(): number;
  /** Ends the waiting helpers and removes their cgroups. */
  close(): Promise<void>;
}

export interface WarmHelpersOptions {
  readonly helperPath: string;
  readonly cgroups: PidsCgroups;
  /** The environment helpers start with (the commands' environment); read at each start. */
  readonly env: () => NodeJS.ProcessEnv;
  /** Helpers kept waiting. */
  readonly size: number;
  /**
   * Starts the helpers off this process's event loop (spawner.ts); without it, or when it
   * fails, they are spawned here (the fork blocks this thread for a few milliseconds).
   */
  readonly spawner?: Spawner;
}

interface Waiting {
  readonly child: HelperProcess;
  readonly cgroupDir: string;
  readonly env: NodeJS.ProcessEnv;
  ready: boolean;
  gone: boolean;
  readonly detach: () => void;
}

type Handle = { ref?: () => void; unref?: () => void } | null | undefined;

function sameEnv(a: NodeJS.ProcessEnv, b: NodeJS.ProcessEnv): boolean {
  if (a === b) return true;
  const keys = Object.keys(a);
  if (keys.length !== Object.keys(b).length) return false;
  return keys.every((k) => a[k] === b[k]);
}

let sequence = 0;

/**
 * Nothing of one run reaches another: each helper and each cgroup serves exactly one run and is
 * thrown away after it (the cgroup released by the run like a cold one). A helper that dies while
 * waiting is dropped with its cgroup. The helpers' pipes do not keep the process alive.
 */
export function createWarmHelpers(options: WarmHelpersOptions): WarmHelpers {
  const { cgroups } = options;
  const waiting: Waiting[] = [];
  const starting = new Set<Promise<void>>();
  let closed = false;

  const handles = (child: HelperProcess): Handle[] => [child as Handle, ...child.stdio.map((s) => s as Handle)];

  const STDIO = ['ignore', 'pipe', 'pipe', 'pipe', 'pipe'] as const;
  const spawnHere = (args: string[], env: NodeJS.ProcessEnv): ChildProcess =>
    spawn(options.helperPath, args, { cwd: '/', env, detached: true, stdio: [...STDIO] });

  async function startOne(): Promise<void> {
    const dir = await cgroups.create(`warm-${process.pid}-${++sequence}`, 1);
    const cgroupArgs = cgroups.dirs(dir).flatMap((d) => ['--cgroup', d]);
    if (closed) {
      cgroups.release(dir);
      return;
    }
    const env = options.env();
    const helperArgs = ['--await-args', ...cgroupArgs];
    const child: HelperProcess = options.spawner
      ? await options.spawner.spawn(options.helperPath, helperArgs, { cwd: '/', env }).catch(() => spawnHere(helperArgs, env))
      : spawnHere(helperArgs, env);
    if (closed) {
      for (const h of handles(child)) h?.ref?.();
      (child.stdio[4] as NodeJS.WritableStream | null)?.end();
      child.kill('SIGKILL');
      await whenGone(child);
      cgroups.release(dir);
      return;
    }
    const report = child.stdio[3];
    const args = child.stdio[4];
    const onReport = (chunk: Buffer): void => {
      if (chunk.toString('utf8').includes('ready\n')) entry.ready = true;
    };
    const onGone = (): void => {
      if (entry.gone) return;
      entry.gone = true;
      const at = waiting.indexOf(entry);
      if (at >= 0) {
        // Died while waiting: drop it with its cgroup.
        waiting.splice(at, 1);
        cgroups.release(dir);
      }
    };
    const ignore = (): void => {};
    const entry: Waiting = {
      child,
      cgroupDir: dir,
      env,
      ready: false,
      gone: false,
      detach: () => {
        report?.off('data', onReport);
        child.off('exit', onGone);
        child.off('error', onGone);
      },
    };
    report?.on('data', onReport);
    args?.on('error', ignore);
    child.on('exit', onGone);
    child.on('error', onGone);
    for (const h of handles(child)) h?.unref?.();
    waiting.push(entry);
  }

  function end(entry: Waiting): void {
    entry.detach();
    (entry.child.stdio[4] as NodeJS.WritableStream | null)?.end();
    if (!entry.gone && entry.child.exitCode === null && entry.child.signalCode === null) entry.child.kill('SIGKILL');
    for (const s of entry.child.stdio) (s as { destroy?: () => void } | null)?.destroy?.();
  }

  function whenGone(child: HelperProcess): Promise<void> {
    if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
    return new Promise((resolve) => {
      child.once('exit', () => resolve());
      child.once('error', () => resolve());
    });
  }

  return {
    waitingCount() {
      return waiting.filter((w) => !w.gone).length;
    },
    take(env) {
      const at = waiting.findIndex((w) => w.ready && !w.gone && sameEnv(w.env, env));
      const index = at >= 0 ? at : waiting.findIndex((w) => !w.gone && sameEnv(w.env, env));
      if (index < 0) return undefined;
      const [entry] = waiting.splice(index, 1) as [Waiting];
      entry.detach();
      for (const h of handles(entry.child)) h?.ref?.();
      return {
        child: entry.child,
        cgroupDir: entry.cgroupDir,
        start(cwd, args) {
          const stream = entry.child.stdio[4] as NodeJS.WritableStream | null;
          stream?.end(Buffer.from([cwd, ...args].map((a) => `${a}\0`).join(''), 'utf8'));
        },
        discard() {
          end(entry);
          void whenGone(entry.child).then(() => cgroups.release(entry.cgroupDir));
        },
      };
    },
    refill() {
      if (closed) return;
      while (waiting.filter((w) => !w.gone).length + starting.size < options.size) {
        const started: Promise<void> = startOne()
          .catch(() => {
            // No cgroup or no helper: runs start cold meanwhile.
          })
          .finally(() => starting.delete(started));
        starting.add(started);
      }
    },
    async close() {
      closed = true;
      await Promise.all([...starting]);
      const all = waiting.splice(0);
      await Promise.all(
        all.map(async (entry) => {
          // Waiting helpers do not hold the process open (unref'd at spawn); their exit must be
          // awaited with the handles held, or a process with nothing else to do ends mid-close.
          for (const h of handles(entry.child)) h?.ref?.();
          end(entry);
          await whenGone(entry.child);
          await cgroups.destroy(entry.cgroupDir);
        }),
      );
      await options.spawner?.close();
    },
  };
}
