/** Entry point: `npx tsx services/tool-runner/src/main.ts` (environment: docs/tool-runner.md). */
import { createLogger, logProcessErrors, startTracing } from '@bedrock/platform/server';
import { readToolRunnerConfig } from './config.ts';
import { createToolRunner } from './create-tool-runner.ts';

const config = readToolRunnerConfig();
const logger = createLogger({ service: 'tool-runner', level: config.log.level });
logProcessErrors(logger);
// Spans exported when an OTLP endpoint is set (OTEL_* variables); off otherwise.
const tracing = await startTracing({ serviceName: 'tool-runner' });
const runner = createToolRunner(config, { logger });
await runner.start();

let stopping = false;
for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  process.on(signal, () => {
    if (stopping) return;
    stopping = true;
    runner
      .stop()
      .finally(() => tracing.shutdown())
      .then(
        () => process.exit(0),
        (err: unknown) => {
          logger.error({ signal, err }, 'shutdown failed');
          process.exit(1);
        },
      );
  });
}
