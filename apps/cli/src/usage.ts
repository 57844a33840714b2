/**
 * What `bedrock` accepts: the usage text and the options. Imports nothing of the client
 * (protobuf, Connect), so that `--help` loads only this and run.ts.
 */
import { parseArgs } from 'node:util';

export const USAGE = `usage: bedrock <command> [options]

  chat [ID] [--workspace NAME] [--cwd DIR] [--model M] [SETTINGS]
                                      interactive chat (a new conversation without ID)
  new [--workspace NAME] [--cwd DIR] [--model M] [--from ID] [SETTINGS]
                                      create a conversation; prints its id. Where it
                                      works: --workspace NAME (--cwd: a relative directory
                                      inside it); neither flag: your default workspace;
                                      --cwd DIR alone: a directory of this host (only where
                                      the server allows host paths); --from: the source's
                                      place unless told otherwise
  ws new NAME [--git URL | --copy NAME]
                                      create a workspace: empty, a clone, or a copy of one
                                      of yours
  ws ls                               your workspaces: size, files, conversations, last use
  ws rm NAME [--with-conversations] [--yes]
                                      delete a workspace and its files (refused while
                                      conversations use it unless --with-conversations);
                                      asks on a terminal
  mcp add NAME -- COMMAND [ARGS...]   add one of your MCP servers (stdio, run in the tool
                                      sandbox); its tools are mcp__NAME__TOOL (docs/mcp.md)
  mcp add NAME --url URL              add a remote MCP server (Streamable HTTP; https, or http
                                      to this machine)
  mcp ls | mcp rm NAME                your MCP servers and the operator's (with your login to
                                      remote ones) / remove one of yours
  mcp login NAME | mcp logout NAME    log in to a remote server (OAuth; prints a URL to open,
                                      then reads the URL you land on) / forget the login
  settings ID [SETTINGS] [--mcp-off NAME] [--mcp-on NAME]
                                      show or change thinking and web tools; turn an MCP
                                      server off (or on again) for this conversation only
  ls [--all] [--parent ID] [--archived] [--search TEXT]
                                      your conversations as a table: id, state, mode, last
                                      change, title, directory (sub-agents with --parent;
                                      --search: titles containing TEXT)
  show ID [--full]                    the conversation, its sub-agents and its messages,
                                      numbered (#SEQ; --json: everything)
  rename ID TITLE                     give the conversation a title of your own
  rm ID [--yes]                       delete the conversation with its sub-agents and
                                      messages (refused while it works: cancel first); asks
                                      on a terminal, --yes deletes without asking
  fork ID [--at SEQ] [--files]        a new conversation with a copy of the history up to
                                      message SEQ (the #SEQ before each message in
                                      bedrock show ID; default: all of it), in the same
                                      directory, Restricted; prints its id. --files: in a
                                      workspace of its own, the files as at message SEQ
  rewind ID --at SEQ [--files | --chat]
                                      put the conversation back to just after message SEQ:
                                      its files (from the checkpoint taken before the next
                                      turn's tools) and its history; --files or --chat only
  diff ID [--at SEQ]                  what changed in the conversation's workspace since
                                      message SEQ (default: since the latest checkpoint)
  send ID TEXT|- [--image FILE]... [--wait] [--queue|--steer|--interrupt]
  send ID --file PATH [--image FILE]... [--wait] [--queue|--steer|--interrupt]
                                      send a message (- reads it from stdin, --file from a
                                      file); --wait streams the turn until it rests. While
                                      the agent works: --queue sends it when the turn ends,
                                      --steer gives it to the agent after its running tools,
                                      --interrupt cancels the turn and sends it (default:
                                      refused); a waiting message prints its queued id
  watch ID                            stream the conversation's events
  cancel ID | approve ID | deny ID | downgrade ID | continue ID
  token new | token hash TOKEN        make a bearer token / the line for BEDROCK_TOKENS_FILE
  help [COMMAND]                      all commands, or one with its options
  acp                                 be an agent for an editor: ACP on stdin and stdout
                                      (Zed, JetBrains; docs/cli.md)
  admin users add ID [--admin] [--display-name NAME] | admin users list | admin users disable ID
  admin users delete ID [--yes]       delete the user, all their conversations and tokens
                                      (refused while one works); asks on a terminal
  admin tokens issue USER [--label TEXT] [--expires 30d] | admin tokens list [USER]
  admin tokens revoke TOKEN_ID        users and their tokens (an admin's token); an issued
                                      token is printed once
  usage                               your spend today and this month against your budgets,
                                      and your other limits
  admin limits USER [--daily USD] [--monthly USD] [--busy N] [--per-minute N]
                   [--conversations N] [--reset]
                                      show a user's limits and spend, or set them (0: none;
                                      --reset: back to the server's defaults)
  admin audit [--user U] [--since 2h|ISO] [--until 2h|ISO] [--action A]
                                      the audit log, newest first: who approved, denied,
                                      cancelled, deleted, changed users and tokens, and when

  ID: a conversation's id, or its first characters when no other of yours starts so (b8ac)

  SETTINGS: --thinking off|low|medium|high|max (default: the server's), --web-search,
  --web-fetch (turn on; the server must allow them), --no-web-search, --no-web-fetch

  chat: a line ending with \\ goes on on the next line (one message of several lines)

  --full        every line of tool output (default: the first 10, a count, the last 5)
  --hide-thinking  leave the model's thinking out of the output
  --json        machine output (NDJSON events; JSON objects)
  --help        this text (bedrock help COMMAND, bedrock COMMAND --help: that command's)
  --version     the CLI's version

environment: BEDROCK_URL (default http://127.0.0.1:8080), BEDROCK_TOKEN (default: the
embedded default's token in $BEDROCK_DATA_DIR/token, ~/.bedrock/token), BEDROCK_RETRY_FOR
(how long changes are retried, and watches resumed, when the server is unavailable; default
30s, 0 = never), NO_COLOR (no colour on a terminal)
exit codes: 0 ok, 1 turn ended in error, 2 usage, 3 rejected, 4 server error,
5 awaiting approval, 6 context exhausted, 130 interrupted, 141 output closed
`;

export const OPTIONS = {
  json: { type: 'boolean', default: false },
  help: { type: 'boolean', short: 'h', default: false },
  version: { type: 'boolean', default: false },
  cwd: { type: 'string' },
  model: { type: 'string' },
  from: { type: 'string' },
  image: { type: 'string', multiple: true },
  wait: { type: 'boolean', default: false },
  all: { type: 'boolean', default: false },
  parent: { type: 'string' },
  archived: { type: 'boolean', default: false },
  thinking: { type: 'string' },
  'web-search': { type: 'boolean' },
  'web-fetch': { type: 'boolean' },
  'no-web-search': { type: 'boolean' },
  'no-web-fetch': { type: 'boolean' },
  'mcp-on': { type: 'string', multiple: true },
  url: { type: 'string' },
  'mcp-off': { type: 'string', multiple: true },
  'hide-thinking': { type: 'boolean', default: false },
  full: { type: 'boolean', default: false },
  file: { type: 'string' },
  search: { type: 'string' },
  queue: { type: 'boolean', default: false },
  steer: { type: 'boolean', default: false },
  interrupt: { type: 'boolean', default: false },
  at: { type: 'string' },
  files: { type: 'boolean', default: false },
  chat: { type: 'boolean', default: false },
  workspace: { type: 'string' },
  git: { type: 'string' },
  copy: { type: 'string' },
  'with-conversations': { type: 'boolean', default: false },
  yes: { type: 'boolean', short: 'y', default: false },
  admin: { type: 'boolean' },
  'display-name': { type: 'string' },
  label: { type: 'string' },
  expires: { type: 'string' },
  user: { type: 'string' },
  since: { type: 'string' },
  until: { type: 'string' },
  action: { type: 'string' },
  daily: { type: 'string' },
  monthly: { type: 'string' },
  busy: { type: 'string' },
  'per-minute': { type: 'string' },
  conversations: { type: 'string' },
  reset: { type: 'boolean' },
} as const;

/** The options of `admin limits`. */
export const LIMIT_FLAGS = ['daily', 'monthly', 'busy', 'per-minute', 'conversations', 'reset'] as const;

/** Options that only `admin` takes. */
export const ADMIN_FLAGS = ['admin', 'label', 'expires', 'display-name', 'user', 'since', 'until', 'action', ...LIMIT_FLAGS] as const;

/** The command line, parsed; throws on an unknown option or a missing value. */
export function parseCommandLine(argv: string[]) {
  return parseArgs({ args: argv, options: OPTIONS, allowPositionals: true, strict: true });
}

export type CommandLine = ReturnType<typeof parseCommandLine>;
export type OptionValues = CommandLine['values'];
