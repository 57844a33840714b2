/**
 * Argument parsing of `bedrock`, and dispatch to the subcommands (dispatch.ts). `--help` and
 * a bad command line are answered here without loading the client (protobuf, Connect):
 * dispatch.ts is imported only when a command runs (docs/cli.md, "How it runs"). `bedrock acp`
 * (the ACP agent for editors, with the ACP SDK) is a bundle of its own, loaded only for it.
 */
import { EXIT } from './exit-codes.ts';
import { endQuietlyOnClosedPipe, isStdio, safeOutput, stdio, type Output } from './output.ts';
import { USAGE, parseCommandLine, type CommandLine } from './usage.ts';

export { USAGE } from './usage.ts';

export async function run(argv: string[], env: NodeJS.ProcessEnv, given: Output = stdio): Promise<number> {
  if (isStdio(given)) endQuietlyOnClosedPipe();
  // Nothing the CLI prints can drive the terminal: no escape sequence or control character of
  // the model's, a tool's or the server's text reaches it (docs/security.md).
  const output = safeOutput(given);
  let parsed: CommandLine;
  try {
    parsed = parseCommandLine(argv);
  } catch (err) {
    output.err(`${err instanceof Error ? err.message : String(err)}\n\n${USAGE}`);
    return EXIT.usage;
  }
  const { values, positionals } = parsed;
  const [command, ...rest] = positionals;
  if (values.help || !command) {
    (values.help ? output.out : output.err)(USAGE);
    return values.help ? EXIT.ok : EXIT.usage;
  }
  if (command === 'acp') return (await import('./acp/command.ts')).acpCommand(rest, values, env, output);
  const { dispatch } = await import('./dispatch.ts');
  return dispatch(command, rest, values, env, output);
}
