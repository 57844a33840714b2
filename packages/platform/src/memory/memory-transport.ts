/**
 * The embedded single-process mode's transport: every service of the process shares one
 * instance. Nothing survives a restart, which is fine there because Postgres (the outbox)
 * holds the truth and re-sends what was not finished.
 */
import type { Transport } from '../interfaces.ts';
import { createMemoryCancelBus } from './memory-cancel-bus.ts';
import { tracedQueues } from '../traced-queues.ts';
import { createMemoryQueues } from './memory-queues.ts';
import type { MemoryQueuesOptions } from './memory-queues.ts';
import { createMemoryRunLedger } from './memory-run-ledger.ts';
import type { MemoryRunLedgerOptions } from './memory-run-ledger.ts';
import { createMemoryRunnerRegistry } from './memory-runner-registry.ts';
import { createMemoryStreams } from './memory-streams.ts';
import type { MemoryStreamsOptions } from './memory-streams.ts';

export interface MemoryTransportOptions {
  readonly queues?: MemoryQueuesOptions;
  readonly streams?: MemoryStreamsOptions;
  readonly runs?: MemoryRunLedgerOptions;
  /** Called when a cancel subscriber throws. Default: a structured error line (logBackgroundErrors). */
  readonly onError?: (error: unknown) => void;
}

export function createMemoryTransport(options: MemoryTransportOptions = {}): Transport {
  // Every queue hop traced (a no-op while tracing is off).
  const queues = tracedQueues(createMemoryQueues(options.queues), 'memory');
  const streams = createMemoryStreams(options.streams);
  const cancels = createMemoryCancelBus({ onError: options.onError });
  const runners = createMemoryRunnerRegistry();
  const runs = createMemoryRunLedger(options.runs);
  let closing: Promise<void> | undefined;
  return {
    queues,
    streams,
    cancels,
    runners,
    runs,
    close() {
      closing ??= Promise.all([queues.close(), streams.close(), cancels.close(), runners.close(), runs.close()]).then(() => undefined);
      return closing;
    },
  };
}
