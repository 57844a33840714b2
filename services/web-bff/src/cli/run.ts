/** Argument parsing and dispatch of `bedrock` subcommands. */
import { parseArgs } from 'node:util';
import { hashToken, generateToken } from '../auth/token-store.ts';
import { chat } from './chat.ts';
import { action, list, newConversation, parseSettingsFlags, send, settings, show, watch, type Ctx } from './commands.ts';
import { connect } from './connection.ts';
import { EXIT, UsageError, describeError, exitCodeOf } from './exit-codes.ts';
import { stdio, type Output } from './render.ts';
import { createRetry, retryPolicyFromEnv } from './retry.ts';

export const USAGE = `usage: bedrock <command> [options]

  chat [ID] [--cwd DIR] [--model M] [SETTINGS]
                                      interactive chat (a new conversation without ID)
  new [--cwd DIR] [--model M] [--from ID] [SETTINGS]
                                      create a conversation; prints its id
  settings ID [SETTINGS]              show or change thinking and web tools
  ls [--all] [--parent ID] [--archived]
                                      list conversations (sub-agents with --parent)
  show ID                             the conversation and its messages (--json: everything)
  send ID TEXT [--image FILE]... [--wait]
                                      send a message; --wait streams the turn until it rests
  watch ID                            stream the conversation's events
  cancel ID | approve ID | deny ID | downgrade ID | continue ID
  token new | token hash TOKEN        make a bearer token / the line for BEDROCK_TOKENS_FILE

  SETTINGS: --thinking off|low|medium|high|max (default: the server's), --web-search,
  --web-fetch (turn on; the server must allow them), --no-web-search, --no-web-fetch

  --hide-thinking  leave the model's thinking out of the output
  --json        machine output (NDJSON events; JSON objects)
  --help        this text

environment: BEDROCK_URL (default http://127.0.0.1:8080), BEDROCK_TOKEN (default: the
embedded default's token in $BEDROCK_DATA_DIR/token, ~/.bedrock/token), BEDROCK_RETRY_FOR
(how long changes are retried when the server is unavailable; default 30s, 0 = never)
exit codes: 0 ok, 1 turn ended in error, 2 usage, 3 rejected, 4 server error,
5 awaiting approval, 6 context exhausted, 130 interrupted
`;

const OPTIONS = {
  json: { type: 'boolean', default: false },
  help: { type: 'boolean', short: 'h', default: false },
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
  'hide-thinking': { type: 'boolean', default: false },
} as const;

const SETTINGS_FLAGS = ['thinking', 'web-search', 'web-fetch', 'no-web-search', 'no-web-fetch'] as const;

function need(positionals: string[], count: number, what: string): string[] {
  if (positionals.length !== count) throw new UsageError(`expected ${what}\n\n${USAGE}`);
  return positionals;
}

export async function run(argv: string[], env: NodeJS.ProcessEnv, output: Output = stdio): Promise<number> {
  const abort = new AbortController();
  const onSigint = () => abort.abort();
  let parsed;
  try {
    parsed = parseArgs({ args: argv, options: OPTIONS, allowPositionals: true, strict: true });
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
  if (command !== 'chat') process.once('SIGINT', onSigint);
  try {
    const given = SETTINGS_FLAGS.filter((f) => values[f] !== undefined);
    if (given.length && !['chat', 'new', 'settings'].includes(command)) throw new UsageError(`--${given[0]} applies to chat, new and settings\n\n${USAGE}`);
    const settingsFlags = parseSettingsFlags(values);
    const creating = command === 'new' || (command === 'chat' && !rest[0]);
    if (creating && settingsFlags.disable.length) throw new UsageError(`a new conversation has no web tools unless asked for: --no-web-search and --no-web-fetch apply to chat ID and settings\n\n${USAGE}`);
    const ctx: Ctx = {
      client: connect(env),
      output,
      json: values.json,
      signal: abort.signal,
      retry: createRetry({ policy: retryPolicyFromEnv(env), output, signal: abort.signal }),
      // Dim thinking only on a terminal (not in files, pipes, or tests' captured output); NO_COLOR turns it off.
      render: { hideThinking: values['hide-thinking'], color: output === stdio && Boolean(process.stdout.isTTY) && !env.NO_COLOR },
    };
    switch (command) {
      case 'chat':
        if (rest.length > 1) throw new UsageError(`expected at most one conversation id\n\n${USAGE}`);
        return await chat(ctx, { id: rest[0], cwd: values.cwd, model: values.model, settings: settingsFlags });
      case 'new':
        need(rest, 0, 'no arguments (use --cwd, --model, --from)');
        return await newConversation(ctx, { cwd: values.cwd, model: values.model, from: values.from, settings: settingsFlags });
      case 'settings':
        return await settings(ctx, need(rest, 1, 'a conversation id')[0]!, settingsFlags);
      case 'ls':
        need(rest, 0, 'no arguments');
        return await list(ctx, { all: values.all, parent: values.parent, archived: values.archived });
      case 'show':
        return await show(ctx, need(rest, 1, 'a conversation id')[0]!);
      case 'send': {
        const [id, text] = need(rest, 2, 'a conversation id and the text (quote it)');
        return await send(ctx, id!, text!, { images: values.image ?? [], wait: values.wait });
      }
      case 'watch':
        return await watch(ctx, need(rest, 1, 'a conversation id')[0]!);
      case 'cancel':
      case 'approve':
      case 'deny':
      case 'downgrade':
      case 'continue':
        return await action(ctx, command, need(rest, 1, 'a conversation id')[0]!);
      case 'token': {
        const [sub, token] = rest;
        if (sub === 'new' && rest.length === 1) {
          const t = generateToken();
          output.out(`token:  ${t}\nhash:   ${hashToken(t)}\n(add "USER_ID:${hashToken(t)}" to BEDROCK_TOKENS_FILE; keep the token secret)\n`);
          return EXIT.ok;
        }
        if (sub === 'hash' && token && rest.length === 2) {
          output.out(`${hashToken(token)}\n`);
          return EXIT.ok;
        }
        throw new UsageError(`expected "token new" or "token hash TOKEN"\n\n${USAGE}`);
      }
      default:
        throw new UsageError(`unknown command "${command}"\n\n${USAGE}`);
    }
  } catch (err) {
    if (abort.signal.aborted) return EXIT.interrupted;
    output.err(`bedrock: ${describeError(err)}\n`);
    return exitCodeOf(err);
  } finally {
    process.off('SIGINT', onSigint);
  }
}
