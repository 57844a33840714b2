/**
 * A service's last words go through its logger too: an uncaught exception or an unhandled
 * promise rejection is one structured `fatal` line (with the error and its stack as fields),
 * then the process exits 1 — what Node does by default, minus the raw stack trace on stderr.
 */
import type { Logger } from './logger.ts';

export function logProcessErrors(logger: Logger, exit: (code: number) => void = (code) => process.exit(code)): () => void {
  const onException = (err: Error, origin: string) => {
    logger.fatal({ err, origin }, 'uncaught exception: exiting');
    exit(1);
  };
  const onRejection = (reason: unknown) => {
    logger.fatal({ err: reason }, 'unhandled promise rejection: exiting');
    exit(1);
  };
  process.on('uncaughtException', onException);
  process.on('unhandledRejection', onRejection);
  return () => {
    process.off('uncaughtException', onException);
    process.off('unhandledRejection', onRejection);
  };
}
