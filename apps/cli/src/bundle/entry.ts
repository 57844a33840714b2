/**
 * The CLI bundle's entry (dist/bedrock.cjs, which bin/bedrock.js requires): run.ts, the
 * command line and `--help`. The commands themselves (dispatch.ts and all it imports: the
 * protobuf descriptors, Connect) are a second bundle that client.ts loads only when a command
 * runs. main.ts is the same for the TypeScript sources.
 */
import { run } from '../run.ts';

export function main(): void {
  void run(process.argv.slice(2), process.env).then((code) => {
    process.exitCode = code;
  });
}
