import { constants } from 'node:os';
import type { Logger } from './logger.ts';

/** Options of {@link onShutdown}. */
export interface ShutdownOptions {
  /** Signals that start the shutdown. Default SIGTERM (Kubernetes) and SIGINT (Ctrl-C). */
  signals?: NodeJS.Signals[];
  /**
   * How long the handler may run before the process exits anyway, in ms. Default 15000:
   * above the servers' own 10 s drain and below Kubernetes' 30 s terminationGracePeriod.
   */
  graceMs?: number;
  /** Logs the signal, the outcome and the duration. */
  logger?: Logger;
  /** Ends the process; replaceable for tests. Default `process.exit`. */
  exit?: (code: number) => void;
}

/**
 * Runs `handler` once on the first of `signals`, then exits: 0 if it finished, 1 if it
 * threw or overran `graceMs`. A second signal during shutdown exits at once with
 * 128 + signal number (130 for a second Ctrl-C), for an operator who will not wait.
 * Returns a function that removes the signal listeners.
 *
 * ```ts
 * onShutdown(async () => { health.shutdown(); await grpc.close(config.shutdownGraceMs); }, { logger });
 * ```
 */
export function onShutdown(handler: (signal: NodeJS.Signals) => Promise<void> | void, options: ShutdownOptions = {}): () => void {
  const signals = options.signals ?? ['SIGTERM', 'SIGINT'];
  const graceMs = options.graceMs ?? 15_000;
  const exit = options.exit ?? ((code: number) => process.exit(code));
  const { logger } = options;
  let shuttingDown = false;

  const onSignal = (signal: NodeJS.Signals): void => {
    if (shuttingDown) {
      logger?.warn({ signal }, 'second signal during shutdown: exiting now');
      exit(128 + (constants.signals[signal] ?? 0));
      return;
    }
    shuttingDown = true;
    const started = Date.now();
    logger?.info({ signal, grace_ms: graceMs }, 'shutting down');
    let timer: NodeJS.Timeout | undefined;
    const overran = new Promise<'timeout'>((resolve) => {
      timer = setTimeout(() => resolve('timeout'), graceMs);
    });
    Promise.race([
      Promise.resolve()
        .then(() => handler(signal))
        .then(() => 'done' as const),
      overran,
    ]).then(
      (outcome) => {
        clearTimeout(timer);
        if (outcome === 'timeout') {
          logger?.error({ signal, grace_ms: graceMs }, 'shutdown overran its grace period: exiting anyway');
          exit(1);
        } else {
          logger?.info({ signal, ms: Date.now() - started }, 'shutdown complete');
          exit(0);
        }
      },
      (err: unknown) => {
        clearTimeout(timer);
        logger?.error({ signal, err }, 'shutdown failed');
        exit(1);
      },
    );
  };

  for (const signal of signals) process.on(signal, onSignal);
  return () => {
    for (const signal of signals) process.off(signal, onSignal);
  };
}
