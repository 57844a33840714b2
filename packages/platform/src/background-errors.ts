/**
 * Where errors of background work go when the caller gave no handler (Redis connections,
 * BullMQ workers, cancel handlers): a structured `error` line through the platform logger,
 * never `console.error` with a raw stack. Services pass their own logger (`onError`), which
 * adds the service's context; this is the fallback for scripts and tests.
 */
import { createLogger, type Logger } from './server/logger.ts';

let fallback: Logger | undefined;

/** An `onError` handler that logs `component`'s errors as JSON lines. */
export function logBackgroundErrors(component: string): (error: unknown) => void {
  return (error: unknown) => {
    fallback ??= createLogger({ service: 'bedrock' });
    fallback.error({ component, err: error }, `${component} error`);
  };
}
