/**
 * Resets watch streams whose client has stopped reading: a watcher suspended on one write for
 * longer than `stallMs` has its HTTP/2 stream reset (HTTP/1.1: its connection closed), and the
 * client resumes from the last event it received. One timer checks every watcher, not one each.
 */
export interface StalledWrite {
  /** When the current write began, ms since epoch; undefined while not writing. */
  writingSince: number | undefined;
  /** Ends the stream at the transport level. */
  reset(): void;
}

export interface StallWatchdog {
  track(write: StalledWrite): () => void;
  /** Streams reset so far. */
  readonly resets: number;
  stop(): void;
}

/**
 * Resets each tracked write that has waited longer than `stallMs`. connect-node writes a streamed
 * message and waits for the socket to drain before it pulls the next one, so a client that stops
 * reading costs at most one message plus the transport's flow-control window; but it would hold
 * that forever without this.
 */
export function createStallWatchdog(stallMs: number, onReset: () => void, now: () => number = Date.now): StallWatchdog {
  const tracked = new Set<StalledWrite>();
  let resets = 0;
  const timer = setInterval(
    () => {
      const t = now();
      for (const w of tracked) {
        if (w.writingSince !== undefined && t - w.writingSince > stallMs) {
          tracked.delete(w);
          resets++;
          onReset();
          w.reset();
        }
      }
    },
    Math.max(50, Math.min(1000, stallMs / 4)),
  );
  timer.unref();
  return {
    track(write) {
      tracked.add(write);
      return () => tracked.delete(write);
    },
    get resets() {
      return resets;
    },
    stop() {
      clearInterval(timer);
      tracked.clear();
    },
  };
}
