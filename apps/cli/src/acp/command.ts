/**
 * `bedrock acp` as run.ts starts it: checks the command line, serves ACP on stdin/stdout
 * (agent.ts) and turns a failure to start into its line on stderr and its exit code. In the
 * bundle this is dist/acp-HASH.cjs, loaded only for this command (src/bundle/acp.ts).
 */
import { describeError, exitCodeOf } from '../errors.ts';
import { EXIT } from '../exit-codes.ts';
import type { Output } from '../output.ts';
import type { OptionValues } from '../usage.ts';
import { serveAcp } from './agent.ts';

export async function acpCommand(rest: string[], values: OptionValues, env: NodeJS.ProcessEnv, output: Output): Promise<number> {
  const given = Object.entries(values).filter(([, v]) => v !== undefined && v !== false && !(Array.isArray(v) && v.length === 0));
  if (rest.length > 0 || given.length > 0) {
    output.err(
      'bedrock acp takes no arguments: it speaks ACP on stdin and stdout, to the Bedrock that BEDROCK_URL and BEDROCK_TOKEN name\n',
    );
    return EXIT.usage;
  }
  try {
    return await serveAcp({ env, output });
  } catch (err) {
    output.err(`bedrock acp: ${describeError(err)}\n`);
    return exitCodeOf(err);
  }
}
