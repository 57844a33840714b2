/**
 * Gives memory back after many watch streams have closed (docs/web-bff.md, "Watch streams": memory
 * after many streams close). What a closed watch allocated is garbage in V8's old space until the
 * next major collection, which an idle process allocates too little to start; so once `threshold`
 * streams have closed and none has for `quietMs`, one full collection runs (at most one per
 * `minIntervalMs`). Its cost is marking what is still live.
 */
import v8 from 'node:v8';
import vm from 'node:vm';

/**
 * The full garbage collection of this isolate, or null when it cannot be exposed: `gc` exposed at
 * run time (`v8.setFlagsFromString('--expose-gc')`), then taken from a new context, as jest's
 * leak detector does. Without it nothing runs.
 */
export function exposeGc(): (() => void) | null {
  try {
    v8.setFlagsFromString('--expose-gc');
    const gc: unknown = vm.runInNewContext('gc');
    return typeof gc === 'function' ? (gc as () => void) : null;
  } catch {
    return null;
  }
}

export interface ReclaimerOptions {
  readonly gc: (() => void) | null;
  /** Streams closed since the last collection before one is worth it. Default 1000. */
  readonly threshold?: number;
  /** Quiet time after the last close, ms. Default 10 s. */
  readonly quietMs?: number;
  /** At most one collection per this long, ms. Default 60 s. */
  readonly minIntervalMs?: number;
  readonly onCollect?: (closed: number, ms: number) => void;
  readonly now?: () => number;
}

export interface Reclaimer {
  /** A watch stream closed. */
  closed(): void;
  stop(): void;
}

export function createReclaimer(options: ReclaimerOptions): Reclaimer {
  const { gc } = options;
  const threshold = options.threshold ?? 1000;
  const quietMs = options.quietMs ?? 10_000;
  const minIntervalMs = options.minIntervalMs ?? 60_000;
  const now = options.now ?? Date.now;
  let closedSince = 0;
  let last = -Infinity;
  let timer: NodeJS.Timeout | undefined;

  function fire(): void {
    timer = undefined;
    if (!gc || closedSince < threshold) return;
    const wait = last + minIntervalMs - now();
    if (wait > 0) {
      timer = setTimeout(fire, wait);
      timer.unref();
      return;
    }
    const closed = closedSince;
    closedSince = 0;
    last = now();
    const started = performance.now();
    gc();
    options.onCollect?.(closed, performance.now() - started);
  }

  return {
    closed() {
      if (!gc) return;
      closedSince++;
      if (closedSince < threshold) return;
      // One timer, moved on by every close: the collection runs once closing has stopped.
      if (timer) timer.refresh();
      else {
        timer = setTimeout(fire, quietMs);
        timer.unref();
      }
    },
    stop() {
      if (timer) clearTimeout(timer);
      timer = undefined;
    },
  };
}
