/** Entry point: `npx tsx services/tool-runner/src/main.ts` (environment: docs/tool-runner.md). */
import { readToolRunnerConfig } from './config.ts';
import { createToolRunner } from './create-tool-runner.ts';

const runner = createToolRunner(readToolRunnerConfig());
await runner.start();

let stopping = false;
for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  process.on(signal, () => {
    if (stopping) return;
    stopping = true;
    runner.stop().then(
      () => process.exit(0),
      (err: unknown) => {
        console.error(err);
        process.exit(1);
      },
    );
  });
}
