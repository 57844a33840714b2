/**
 * `bedrock`: the command-line client of Bedrock (docs/cli.md). Runs `run(argv)` and exits
 * with its code; everything testable lives in `run`.
 */
import { run } from './run.ts';

process.exitCode = await run(process.argv.slice(2), process.env);
