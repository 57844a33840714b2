/**
 * The spawner: a tiny Node process, started once by the runner, that starts sandbox helpers on
 * request and hands their pipes back over its IPC channel, so that the runner's event loop never
 * waits for a fork. The runner then reads and writes the helper's pipes itself, exactly as if it
 * had spawned it; the spawner reports the helper's exit and forwards kills. docs/tool-runner.md,
 * "Off the critical path" (why, and what a fork from the runner costs).
 */
import { spawn as spawnProcess } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { EventEmitter } from 'node:events';
import type { Socket } from 'node:net';

/**
 * The spawner's whole program (CommonJS, run with `node -e`, so that it needs no file of its own
 * next to a bundle; no imports but node:child_process). A helper's pipes stop reading at once
 * (before the loop runs again), so no byte is consumed here before the runner has them. Each stdio
 * pipe is a Unix socket, which Node passes over the IPC channel with SCM_RIGHTS. Written by hand
 * rather than with a process-pool library: what is needed is the passing of the pipes, which none
 * of them does, and the script is short.
 */
const SPAWNER_SCRIPT = `
'use strict';
const { spawn } = require('node:child_process');
const children = new Map();
const send = (m, h) => { if (process.connected) process.send(m, h, undefined, () => {}); };
process.on('message', (m) => {
  if (m.t === 'kill') { const c = children.get(m.id); if (c) c.kill(m.signal); return; }
  if (m.t !== 'spawn') return;
  let child;
  try {
    child = spawn(m.file, m.args, { cwd: m.cwd, env: m.env, detached: true, stdio: ['ignore', 'pipe', 'pipe', 'pipe', 'pipe'] });
  } catch (e) {
    send({ t: 'error', id: m.id, message: String((e && e.message) || e) });
    return;
  }
  if (child.pid === undefined) {
    child.once('error', (e) => send({ t: 'error', id: m.id, message: e.message }));
    return;
  }
  for (const s of child.stdio) if (s && s._handle) { s._handle.reading = false; s._handle.readStop(); }
  children.set(m.id, child);
  child.on('error', () => {});
  child.on('exit', (code, signal) => { children.delete(m.id); send({ t: 'exit', id: m.id, code, signal }); });
  send({ t: 'spawned', id: m.id, pid: child.pid });
  for (const fd of [1, 2, 3, 4]) send({ t: 'fd', id: m.id, fd }, child.stdio[fd]);
});
process.on('disconnect', () => { for (const c of children.values()) c.kill('SIGKILL'); process.exit(0); });
`;

/** Heap of the spawner, MiB: it holds a map of its children and nothing else. */
const SPAWNER_HEAP_MIB = 16;

type Message =
  | { t: 'spawned'; id: number; pid: number }
  | { t: 'fd'; id: number; fd: 1 | 2 | 3 | 4 }
  | { t: 'exit'; id: number; code: number | null; signal: NodeJS.Signals | null }
  | { t: 'error'; id: number; message: string };

/**
 * A helper started by the spawner: what the runner uses of a ChildProcess. Its exit and kills go
 * through the spawner, its parent: only it can reap it and know the pid still names it.
 */
export class SpawnedHelper extends EventEmitter {
  exitCode: number | null = null;
  signalCode: NodeJS.Signals | null = null;
  readonly stdio: [null, Socket | null, Socket | null, Socket | null, Socket | null] = [null, null, null, null, null];
  referenced = true;

  constructor(
    readonly pid: number,
    private readonly onKill: (signal: NodeJS.Signals) => boolean,
    private readonly onRef: () => void,
  ) {
    super();
  }

  get stdout(): Socket | null {
    return this.stdio[1];
  }

  get stderr(): Socket | null {
    return this.stdio[2];
  }

  kill(signal: NodeJS.Signals | number = 'SIGTERM'): boolean {
    if (this.exitCode !== null || this.signalCode !== null) return false;
    return this.onKill(typeof signal === 'number' ? 'SIGKILL' : signal);
  }

  ref(): void {
    this.referenced = true;
    this.onRef();
  }

  unref(): void {
    this.referenced = false;
    this.onRef();
  }

  /** Called once, with the helper's exit as its parent saw it. */
  exited(code: number | null, signal: NodeJS.Signals | null): void {
    if (this.exitCode !== null || this.signalCode !== null) return;
    this.exitCode = code;
    this.signalCode = signal;
    this.referenced = false;
    this.onRef();
    this.emit('exit', code, signal);
  }
}

export interface Spawner {
  /** Starts `file` with stdio ignore, pipe ×4 in a new session; resolves once its pipes are here. */
  spawn(file: string, args: readonly string[], options: { cwd: string; env: NodeJS.ProcessEnv }): Promise<SpawnedHelper>;
  /** Times the spawner process was started (1 after the first request; more after it died). */
  readonly starts: number;
  /** The spawner's pid, or undefined while none runs. */
  readonly pid: number | undefined;
  /** Ends the spawner (and whatever it still supervises). */
  close(): Promise<void>;
}

interface Pending {
  readonly resolve: (helper: SpawnedHelper) => void;
  readonly reject: (err: Error) => void;
  helper?: SpawnedHelper;
  fds: number;
}

/**
 * The spawner is restarted on the next request when it died. A helper it started dies with it
 * (`PR_SET_PDEATHSIG` once its run started) or is emptied out of its cgroup by the runner: every
 * helper whose spawner died is reported as killed (`SIGKILL`), so its run ends and its cgroup is
 * released (cgroup.kill takes whatever is left). Without a working spawner (it cannot start, as
 * under a runtime whose child processes have no IPC channel), requests fail and the caller
 * starts its helper itself.
 */
export function createSpawner(): Spawner {
  let proc: ChildProcess | undefined;
  let starts = 0;
  let closed = false;
  let nextId = 0;
  const pending = new Map<number, Pending>();
  const live = new Map<number, SpawnedHelper>();

  // The spawner holds the runner open only while a run it started is referenced.
  const updateRef = (): void => {
    if (!proc) return;
    const wanted = [...live.values()].some((h) => h.referenced) || pending.size > 0;
    const channel = proc.channel as { ref?: () => void; unref?: () => void } | undefined;
    if (wanted) {
      proc.ref();
      channel?.ref?.();
    } else {
      proc.unref();
      channel?.unref?.();
    }
  };

  const onMessage = (m: Message, handle: unknown): void => {
    if (m.t === 'fd') {
      const p = pending.get(m.id);
      const socket = handle as Socket | undefined;
      if (!p?.helper || !socket) {
        socket?.destroy();
        return;
      }
      p.helper.stdio[m.fd] = socket;
      if (++p.fds === 4) {
        pending.delete(m.id);
        live.set(m.id, p.helper);
        p.resolve(p.helper);
        updateRef();
      }
      return;
    }
    if (m.t === 'spawned') {
      const p = pending.get(m.id);
      const owner = proc;
      if (!p) return;
      p.helper = new SpawnedHelper(m.pid, (signal) => (owner?.connected ? owner.send({ t: 'kill', id: m.id, signal }) : false), updateRef);
      return;
    }
    if (m.t === 'exit') {
      const helper = live.get(m.id) ?? pending.get(m.id)?.helper;
      live.delete(m.id);
      const p = pending.get(m.id);
      if (p) {
        // Gone before its pipes arrived (it cannot, as they are sent first; be safe).
        pending.delete(m.id);
        p.reject(new Error('the sandbox helper exited at once'));
      }
      helper?.exited(m.code, m.signal);
      updateRef();
      return;
    }
    const p = pending.get(m.id);
    pending.delete(m.id);
    p?.reject(new Error(`the spawner could not start the sandbox helper: ${m.message}`));
    updateRef();
  };

  const start = (): ChildProcess => {
    starts++;
    const child = spawnProcess(process.execPath, [`--max-old-space-size=${SPAWNER_HEAP_MIB}`, '-e', SPAWNER_SCRIPT], {
      cwd: '/',
      env: {},
      stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
      serialization: 'json',
    });
    const gone = (): void => {
      if (proc !== child) return;
      proc = undefined;
      // Its helpers are gone or about to be emptied out of their cgroups by their runs.
      for (const [id, p] of pending) {
        pending.delete(id);
        p.reject(new Error('the spawner died'));
      }
      for (const [id, helper] of live) {
        live.delete(id);
        helper.exited(null, 'SIGKILL');
      }
    };
    child.on('message', onMessage);
    child.on('error', gone);
    child.on('exit', gone);
    return child;
  };

  return {
    get starts() {
      return starts;
    },
    get pid() {
      return proc?.pid;
    },
    spawn(file, args, options) {
      if (closed) return Promise.reject(new Error('the spawner is closed'));
      if (!proc || !proc.connected) proc = start();
      const id = ++nextId;
      const owner = proc;
      return new Promise<SpawnedHelper>((resolve, reject) => {
        pending.set(id, { resolve, reject, fds: 0 });
        updateRef();
        const sent = owner.send({ t: 'spawn', id, file, args, cwd: options.cwd, env: options.env }, (err) => {
          if (!err) return;
          const p = pending.get(id);
          pending.delete(id);
          p?.reject(err);
          updateRef();
        });
        if (!sent && !owner.connected) {
          pending.delete(id);
          reject(new Error('the spawner is not running'));
          updateRef();
        }
      });
    },
    async close() {
      closed = true;
      const child = proc;
      if (!child || child.exitCode !== null || child.signalCode !== null) return;
      child.ref();
      const gone = new Promise<void>((resolve) => child.once('exit', () => resolve()));
      child.disconnect();
      await gone;
    },
  };
}
