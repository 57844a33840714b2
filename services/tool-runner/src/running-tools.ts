/**
 * The tools running on this runner, by tool_use_id: a cancel finds its tool here, and a
 * redelivered job (same tool_use_id) joins the run already in progress instead of starting
 * a second one. A cancel that arrives before its job (the job was still queued) is
 * remembered for a while, so the job is answered as cancelled without running.
 */
export interface RunningToolsOptions {
  /** How long an early cancel is remembered, ms. Default 10 minutes. */
  readonly earlyCancelTtlMs?: number;
  /** At most this many early cancels are remembered (oldest forgotten first). Default 10 000. */
  readonly earlyCancelMax?: number;
  readonly now?: () => number;
}

interface Running<R> {
  readonly controller: AbortController;
  readonly promise: Promise<R>;
}

export class RunningTools<R> {
  readonly #running = new Map<string, Running<R>>();
  readonly #earlyCancels = new Map<string, number>();
  readonly #ttl: number;
  readonly #max: number;
  readonly #now: () => number;

  constructor(options: RunningToolsOptions = {}) {
    this.#ttl = options.earlyCancelTtlMs ?? 10 * 60_000;
    this.#max = options.earlyCancelMax ?? 10_000;
    this.#now = options.now ?? Date.now;
  }

  /** Tools running now. */
  get size(): number {
    return this.#running.size;
  }

  has(toolUseId: string): boolean {
    return this.#running.has(toolUseId);
  }

  /** The run of `toolUseId` in progress, to join; undefined when none runs here. */
  get(toolUseId: string): Promise<R> | undefined {
    return this.#running.get(toolUseId)?.promise;
  }

  /**
   * Runs `work` for `toolUseId`, or joins the run already in progress. `work` gets a signal
   * that aborts on cancel (already aborted if the cancel came first).
   */
  run(toolUseId: string, work: (signal: AbortSignal) => Promise<R>): Promise<R> {
    const existing = this.#running.get(toolUseId);
    if (existing) return existing.promise;
    const controller = new AbortController();
    if (this.#takeEarlyCancel(toolUseId)) controller.abort();
    const promise = (async () => {
      try {
        return await work(controller.signal);
      } finally {
        this.#running.delete(toolUseId);
      }
    })();
    this.#running.set(toolUseId, { controller, promise });
    return promise;
  }

  /** Aborts the run of `toolUseId`. Returns false (and remembers the cancel) when none runs here. */
  cancel(toolUseId: string): boolean {
    const running = this.#running.get(toolUseId);
    if (running) {
      running.controller.abort();
      return true;
    }
    this.#rememberEarlyCancel(toolUseId);
    return false;
  }

  /** Aborts every run (shutdown). */
  cancelAll(): void {
    for (const running of this.#running.values()) running.controller.abort();
  }

  /** Resolves once every run in progress has settled. */
  async idle(): Promise<void> {
    await Promise.allSettled([...this.#running.values()].map((r) => r.promise));
  }

  #rememberEarlyCancel(toolUseId: string): void {
    this.#earlyCancels.delete(toolUseId);
    this.#earlyCancels.set(toolUseId, this.#now() + this.#ttl);
    while (this.#earlyCancels.size > this.#max) {
      const oldest = this.#earlyCancels.keys().next().value as string;
      this.#earlyCancels.delete(oldest);
    }
  }

  #takeEarlyCancel(toolUseId: string): boolean {
    const expires = this.#earlyCancels.get(toolUseId);
    if (expires === undefined) return false;
    this.#earlyCancels.delete(toolUseId);
    return expires > this.#now();
  }
}
