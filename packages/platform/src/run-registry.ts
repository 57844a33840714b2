/**
 * The runs a worker has in progress — a tool call on a tool-runner, a model request on the llm-gateway —
 * each under its id with an AbortController: joined when started twice, cancelled by id or by conversation
 * (also before they start), aborted on shutdown. The one copy the two workers share (each had its own, with
 * different rules for the same cases); {@link followCancels} feeds the cancel bus into a registry
 * (docs/transports.md, "Cancel bus and runner registry").
 */
import type { CancelSignal } from '@bedrock/contracts';
import type { CancelBus } from './interfaces.ts';

export interface RunKey {
  /** Unique among the runs of one registry: a tool_use_id, an LLM request id. */
  readonly id: string;
  readonly conversationId: string;
}

/** Why a run's signal aborted: a cancel of the work, or the worker stopping. */
export type RunAbortCause = 'cancel' | 'shutdown';

/** The reason of an aborted run's signal. */
export class RunAbortedError extends Error {
  override readonly name = 'RunAbortedError';
  constructor(
    readonly by: RunAbortCause,
    message: string,
  ) {
    super(message);
  }
}

/** What the work of a run gets. */
export interface RunContext {
  /** Aborts on a cancel or a shutdown (already aborted when a cancel came first). */
  readonly signal: AbortSignal;
  /** Whether a cancel (not a shutdown) aborted the run or came before it. */
  readonly cancelled: boolean;
}

export interface RunOptions {
  /** Aborts the run as a shutdown when it aborts (e.g. a consumer's hand-back signal). Ignored when the call joins a run. */
  readonly signal?: AbortSignal;
}

export interface RunRegistryOptions {
  /** How long a cancel is remembered for a run that has not started (yet), ms. Default 10 minutes. */
  readonly earlyCancelTtlMs?: number;
  /** At most this many cancels are remembered (oldest forgotten first). Default 10 000. */
  readonly earlyCancelMax?: number;
  readonly now?: () => number;
}

export interface RunRegistry<R> {
  /**
   * Runs `work` under `key.id`, or joins the run of that id in progress (a job redelivered to the process
   * that still runs it: the work is not started twice). Settles as `work` does, whatever the outcome; the run
   * leaves the registry then (and its listener leaves `options.signal`). A run whose id has a remembered
   * cancel begins already aborted.
   */
  run(key: RunKey, work: (run: RunContext) => Promise<R>, options?: RunOptions): Promise<R>;
  /** The run of `id` in progress (to join), or undefined. */
  get(id: string): Promise<R> | undefined;
  has(id: string): boolean;
  /**
   * Aborts the run of `id` and remembers the cancel (for `earlyCancelTtlMs`), also when it found its run, so
   * a job retried or redelivered after its cancel (its result could not be sent) is not run again either.
   * False when it is not running here.
   */
  cancel(id: string): boolean;
  /** Aborts every run of the conversation; returns how many there were. Nothing is remembered. */
  cancelConversation(conversationId: string): number;
  /** Whether a cancel of `id` is remembered (it came before the run, or while it ran). */
  cancelled(id: string): boolean;
  /** Aborts every run as a shutdown, with `reason` as the abort message; returns how many there were. */
  abortAll(reason?: string): number;
  /** Resolves once every run in progress has settled. */
  idle(): Promise<void>;
  /** Runs in progress. */
  readonly size: number;
}

interface Running<R> {
  readonly key: RunKey;
  readonly controller: AbortController;
  promise: Promise<R>;
}

export const DEFAULT_EARLY_CANCEL_TTL_MS = 10 * 60_000;
export const DEFAULT_EARLY_CANCEL_MAX = 10_000;

/**
 * Abort reasons are made with stack capture off: Node's stream teardown reads the stack of an
 * abort reason, and under a source-map hook the first such read costs tens of milliseconds,
 * which a cancel (REQ-BED-005) must not pay.
 */
function abortReason(by: RunAbortCause, message: string): RunAbortedError {
  const limit = Error.stackTraceLimit;
  Error.stackTraceLimit = 0;
  try {
    return new RunAbortedError(by, message);
  } finally {
    Error.stackTraceLimit = limit;
  }
}

export function createRunRegistry<R>(options: RunRegistryOptions = {}): RunRegistry<R> {
  const ttl = options.earlyCancelTtlMs ?? DEFAULT_EARLY_CANCEL_TTL_MS;
  const max = options.earlyCancelMax ?? DEFAULT_EARLY_CANCEL_MAX;
  const now = options.now ?? Date.now;
  const running = new Map<string, Running<R>>();
  // Remembered cancels: expiry by id, in the order they came (so the oldest is first).
  const cancels = new Map<string, number>();

  function remember(id: string): void {
    const t = now();
    cancels.delete(id);
    cancels.set(id, t + ttl);
    for (const [oldest, expires] of cancels) {
      if (cancels.size <= max && expires > t) break;
      cancels.delete(oldest);
    }
  }

  function cancelled(id: string): boolean {
    const expires = cancels.get(id);
    if (expires === undefined) return false;
    if (expires > now()) return true;
    cancels.delete(id);
    return false;
  }

  function abort(r: Running<R>, by: RunAbortCause, message: string): void {
    if (!r.controller.signal.aborted) r.controller.abort(abortReason(by, message));
  }

  return {
    run(key, work, runOptions = {}) {
      const existing = running.get(key.id);
      if (existing) return existing.promise;
      const controller = new AbortController();
      const { signal } = controller;
      if (cancelled(key.id)) controller.abort(abortReason('cancel', 'cancelled before it started'));
      const outer = runOptions.signal;
      const onOuterAbort = (): void => {
        if (!signal.aborted) controller.abort(abortReason('shutdown', 'the worker is stopping'));
      };
      if (outer?.aborted) onOuterAbort();
      else outer?.addEventListener('abort', onOuterAbort, { once: true });
      const context: RunContext = {
        signal,
        get cancelled() {
          return signal.reason instanceof RunAbortedError && signal.reason.by === 'cancel';
        },
      };
      // Registered before the work starts, so work that throws at once still leaves the registry.
      const entry: Running<R> = { key, controller, promise: Promise.resolve() as Promise<R> };
      running.set(key.id, entry);
      entry.promise = (async () => {
        try {
          return await work(context);
        } finally {
          outer?.removeEventListener('abort', onOuterAbort);
          if (running.get(key.id) === entry) running.delete(key.id);
        }
      })();
      return entry.promise;
    },
    get: (id) => running.get(id)?.promise,
    has: (id) => running.has(id),
    cancel(id) {
      remember(id);
      const r = running.get(id);
      if (!r) return false;
      abort(r, 'cancel', 'cancelled');
      return true;
    },
    cancelConversation(conversationId) {
      let found = 0;
      for (const r of running.values()) {
        if (r.key.conversationId !== conversationId) continue;
        abort(r, 'cancel', 'the conversation was cancelled');
        found++;
      }
      return found;
    },
    cancelled,
    abortAll(reason = 'the worker is stopping') {
      for (const r of running.values()) abort(r, 'shutdown', reason);
      return running.size;
    },
    async idle() {
      await Promise.allSettled([...running.values()].map((r) => r.promise));
    },
    get size() {
      return running.size;
    },
  };
}

/** The `target` cases of a CancelSignal: which kind of work a signal names. */
export type CancelTarget = NonNullable<CancelSignal['target']['case']>;

/**
 * Feeds the cancel bus into `runs`: a signal naming `target` (e.g. `toolUseId` on a runner)
 * cancels that run (remembered when it has not started here); a signal naming no target cancels
 * every run of its conversation here; signals naming the other kind of work are ignored.
 * `onCancel` hears each signal acted on, with how many runs it aborted here. Resolves once
 * subscribed, with the unsubscribe function.
 */
export function followCancels(
  bus: CancelBus,
  target: CancelTarget,
  runs: Pick<RunRegistry<unknown>, 'cancel' | 'cancelConversation'>,
  onCancel?: (signal: CancelSignal, found: number) => void,
): Promise<() => Promise<void>> {
  return bus.subscribe((signal) => {
    let found: number;
    if (signal.target.case === target) found = runs.cancel(signal.target.value) ? 1 : 0;
    else if (signal.target.case === undefined && signal.conversationId) found = runs.cancelConversation(signal.conversationId);
    else return;
    onCancel?.(signal, found);
  });
}
