/** In-process cancel broadcast: every subscriber gets its own copy of each signal. */
import { fromBinary, toBinary } from '@bufbuild/protobuf';
import { CancelSignalSchema } from '@bedrock/contracts';
import type { CancelSignal } from '@bedrock/contracts';
import { logBackgroundErrors } from '../background-errors.ts';
import type { CancelBus } from '../interfaces.ts';

export interface MemoryCancelBusOptions {
  /** Called when a subscriber's handler throws. Default: a structured error line (logBackgroundErrors). */
  readonly onError?: (error: unknown) => void;
}

export function createMemoryCancelBus(options: MemoryCancelBusOptions = {}): CancelBus {
  const onError = options.onError ?? logBackgroundErrors('cancel handler');
  const handlers = new Set<(signal: CancelSignal) => void>();
  let closed = false;

  return {
    async publish(signal: CancelSignal): Promise<void> {
      if (closed) throw new Error('cancel bus is closed');
      const bytes = toBinary(CancelSignalSchema, signal);
      // Delivered on a later tick, as over Redis, so a publisher never runs handlers re-entrantly.
      for (const handler of [...handlers]) {
        setImmediate(() => {
          if (!handlers.has(handler)) return;
          try {
            handler(fromBinary(CancelSignalSchema, bytes));
          } catch (error) {
            onError(error);
          }
        });
      }
    },

    async subscribe(handler: (signal: CancelSignal) => void): Promise<() => Promise<void>> {
      if (closed) throw new Error('cancel bus is closed');
      // A wrapper per call, so subscribing the same function twice needs two unsubscribes.
      const entry = (signal: CancelSignal) => handler(signal);
      handlers.add(entry);
      return async () => {
        handlers.delete(entry);
      };
    },

    async close(): Promise<void> {
      closed = true;
      handlers.clear();
    },
  };
}
