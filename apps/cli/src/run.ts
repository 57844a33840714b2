/**
 * Argument parsing of `bedrock`, and dispatch to the subcommands (dispatch.ts). `--help` and
 * a bad command line are answered here without loading the client (protobuf, Connect):
 * dispatch.ts is imported only when a command runs (docs/cli.md, "How it runs"). `bedrock acp`
 * (the ACP agent for editors, with the ACP SDK) is a bundle of its own, loaded only for it.
 */
import { EXIT } from './exit-codes.ts';
import { endQuietlyOnClosedPipe, isStdio, safeOutput, stdio, type Output } from './output.ts';
import { COMMANDS, VERSION, commandHelp, parseErrorLine, unknownCommand } from './help.ts';
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
    output.err(`bedrock: ${parseErrorLine(err, argv)}\n`);
    return EXIT.usage;
  }
  const { values, positionals } = parsed;
  const [command, ...rest] = positionals;
  if (values.version) {
    output.out(`bedrock ${VERSION}\n`);
    return EXIT.ok;
  }
  // `bedrock help [COMMAND]` and `bedrock COMMAND --help`: that command's help, else all of it.
  const helpFor = command === 'help' ? rest[0] : values.help ? command : undefined;
  if (command === 'help' || values.help || !command) {
    if (!command) {
      (values.help ? output.out : output.err)(USAGE);
      return values.help ? EXIT.ok : EXIT.usage;
    }
    if (helpFor === undefined) {
      output.out(USAGE);
      return EXIT.ok;
    }
    const help = commandHelp(helpFor);
    if (help === undefined || (command === 'help' && rest.length > 1)) {
      output.err(`bedrock: ${help === undefined ? unknownCommand(helpFor) : 'expected "help" or "help COMMAND"'}\n`);
      return EXIT.usage;
    }
    output.out(help);
    return EXIT.ok;
  }
  if (!(COMMANDS as readonly string[]).includes(command)) {
    output.err(`bedrock: ${unknownCommand(command)}\n`);
    return EXIT.usage;
  }
  if (command === 'acp') return (await import('./acp/command.ts')).acpCommand(rest, values, env, output);
  const { dispatch } = await import('./dispatch.ts');
  return dispatch(command, rest, values, env, output);
}
