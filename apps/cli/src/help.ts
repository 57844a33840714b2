/**
 * Help and command-line mistakes, answered without loading the client: `bedrock help [CMD]`,
 * `bedrock CMD --help` (that command's lines of USAGE), `--version`, and one line for an
 * unknown command or option, with the nearest known one ("did you mean").
 */
import { closest, distance } from 'fastest-levenshtein';
import pkg from '../package.json' with { type: 'json' };
import { OPTIONS, USAGE } from './usage.ts';

/** bedrock-agent's version (apps/cli/package.json). */
export const VERSION: string = pkg.version;

/** The commands `bedrock` knows (dispatch.ts runs them; acp and help are run.ts's). */
export const COMMANDS = [
  'chat',
  'new',
  'ws',
  'settings',
  'ls',
  'show',
  'rename',
  'rm',
  'fork',
  'rewind',
  'diff',
  'send',
  'watch',
  'cancel',
  'approve',
  'deny',
  'downgrade',
  'continue',
  'token',
  'acp',
  'admin',
  'usage',
  'mcp',
  'help',
] as const;

/** Whether `a` is `b` with two neighbouring letters swapped ("sned" for "send"): the commonest typing slip. */
function swapped(a: string, b: string): boolean {
  if (a.length !== b.length) return false;
  const diff = [...a].flatMap((c, i) => (c === b[i] ? [] : [i]));
  return diff.length === 2 && diff[1] === diff[0]! + 1 && a[diff[0]!] === b[diff[1]!] && a[diff[1]!] === b[diff[0]!];
}

/** Edits from `a` to `b`, a swap of neighbours counting as one (Levenshtein counts it as two). */
const edits = (a: string, b: string): number => (swapped(a, b) ? 1 : distance(a, b));

/** The nearest of `known` to `given` when it is near enough to be a slip (at most a third of it, rounded up, differs). */
export function didYouMean(given: string, known: readonly string[]): string | undefined {
  if (!given || known.length === 0) return undefined;
  const best = known.find((k) => swapped(given, k)) ?? closest(given, [...known]);
  const d = edits(given, best);
  return d > 0 && d <= Math.ceil(Math.max(given.length, best.length) / 3) ? best : undefined;
}

/** USAGE's command entries: a line at two spaces' indent and the deeper lines under it. */
function entries(): string[][] {
  const body = USAGE.split('\n');
  const end = body.findIndex((l) => l.startsWith('  ID:'));
  const out: string[][] = [];
  for (const line of body.slice(2, end)) {
    if (/^ {2}\S/.test(line)) out.push([line]);
    else if (/^ {3,}\S/.test(line) && out.length) out.at(-1)!.push(line);
  }
  return out;
}

const NOTES: Record<string, string> = {
  id: "  ID: a conversation's id, or its first characters when no other of yours starts so (b8ac)",
  settings: `  SETTINGS: --thinking off|low|medium|high|max (default: the server's), --web-search,
  --web-fetch (turn on; the server must allow them), --no-web-search, --no-web-fetch`,
  full: '  --full        every line of tool output (default: the first 10, a count, the last 5)',
  thinking: "  --hide-thinking  leave the model's thinking out of the output",
  json: '  --json        machine output (NDJSON events; JSON objects)',
  chat: '  a line ending with \\ goes on on the next line (one message of several lines)',
};

const ACP_HELP = `usage: bedrock acp

  Be an agent for an editor (Zed, JetBrains): speaks the Agent Client Protocol on stdin and
  stdout, to the Bedrock that BEDROCK_URL and BEDROCK_TOKEN name. Takes no arguments; the
  editor starts it (docs/cli.md, "Editors (ACP)").
`;

/** One command's help: its entries of USAGE and the notes on its options; undefined for an unknown command. */
export function commandHelp(command: string): string | undefined {
  if (command === 'acp') return ACP_HELP;
  if (command === 'help') return 'usage: bedrock help [COMMAND]\n\n  all commands, or one command with its options\n';
  if (!(COMMANDS as readonly string[]).includes(command)) return undefined;
  const mine = entries().filter((e) =>
    e[0]!
      .trim()
      .split(' | ')
      .some((part) => part === command || part.startsWith(`${command} `)),
  );
  const notes: string[] = [];
  if (mine.some((e) => / ID\b/.test(e[0]!))) notes.push(NOTES.id!);
  if (['chat', 'new', 'settings'].includes(command)) notes.push(NOTES.settings!);
  if (command === 'chat') notes.push(NOTES.chat!);
  if (['chat', 'show', 'send', 'watch'].includes(command)) notes.push(NOTES.full!, NOTES.thinking!);
  notes.push(NOTES.json!);
  return `usage: bedrock ${command} …\n\n${mine.map((e) => e.join('\n')).join('\n')}\n\n${notes.join('\n')}\n\nbedrock help: all commands, the environment and the exit codes\n`;
}

/** "unknown command "lss" (did you mean ls?); bedrock help lists the commands" */
export function unknownCommand(command: string): string {
  const near = didYouMean(command, COMMANDS);
  return `unknown command "${command}"${near ? ` (did you mean ${near}?)` : ''}; bedrock help lists the commands`;
}

/**
 * One line for a command line parseArgs refused (an unknown option, a missing value), naming
 * the nearest option and where the command's options are listed.
 */
export function parseErrorLine(err: unknown, argv: string[]): string {
  const command = argv.find((a) => !a.startsWith('-'));
  const where = command && (COMMANDS as readonly string[]).includes(command) ? `bedrock help ${command}` : 'bedrock help';
  const code = (err as { code?: string })?.code;
  const message = err instanceof Error ? err.message : String(err);
  if (code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION') {
    const option = /option '([^']+)'/i.exec(message)?.[1] ?? '';
    // Compared without the dashes: `--bogus` is not one slip from `--busy`.
    const long = option.startsWith('--');
    const names = long ? Object.keys(OPTIONS) : Object.values(OPTIONS).flatMap((o) => ('short' in o ? [o.short] : []));
    const bare = didYouMean(option.replace(/^-+/, ''), names);
    const near = bare && `${long ? '--' : '-'}${bare}`;
    return `unknown option ${option}${near ? ` (did you mean ${near}?)` : ''}; ${where} lists the options`;
  }
  if (code === 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE') {
    const option = /'(-[^' ]+)/.exec(message)?.[1];
    const what = /does not take an argument/.test(message) ? 'takes no value' : 'needs a value';
    return `${option ? `${option} ${what}` : message}; ${where} lists the options`;
  }
  return `${message}; ${where} lists the options`;
}
