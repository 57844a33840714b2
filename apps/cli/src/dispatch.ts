/**
 * The subcommands of `bedrock` after run.ts parsed the command line: connects and runs one
 * (commands.ts; chat.ts and token.ts are loaded only for their commands), and turns
 * a failure into its line on stderr and its exit code.
 */
import { action, list, newConversation, parseSettingsFlags, send, settings, show, watch, type Ctx } from './commands.ts';
import { connect } from './connection.ts';
import { describeError, exitCodeOf } from './errors.ts';
import { EXIT, UsageError } from './exit-codes.ts';
import { stdio, type Output } from './output.ts';
import { createRetry, retryPolicyFromEnv } from './retry.ts';
import { USAGE, type OptionValues } from './usage.ts';

const SETTINGS_FLAGS = ['thinking', 'web-search', 'web-fetch', 'no-web-search', 'no-web-fetch'] as const;

function need(positionals: string[], count: number, what: string): string[] {
  if (positionals.length !== count) throw new UsageError(`expected ${what}\n\n${USAGE}`);
  return positionals;
}

export async function dispatch(
  command: string,
  rest: string[],
  values: OptionValues,
  env: NodeJS.ProcessEnv,
  output: Output,
): Promise<number> {
  const abort = new AbortController();
  const onSigint = () => abort.abort();
  if (command !== 'chat') process.once('SIGINT', onSigint);
  try {
    const given = SETTINGS_FLAGS.filter((f) => values[f] !== undefined);
    if (given.length && !['chat', 'new', 'settings'].includes(command))
      throw new UsageError(`--${given[0]} applies to chat, new and settings\n\n${USAGE}`);
    const settingsFlags = parseSettingsFlags(values);
    const creating = command === 'new' || (command === 'chat' && !rest[0]);
    if (creating && settingsFlags.disable.length)
      throw new UsageError(
        `a new conversation has no web tools unless asked for: --no-web-search and --no-web-fetch apply to chat ID and settings\n\n${USAGE}`,
      );
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
        return await (await import('./chat.ts')).chat(ctx, { id: rest[0], cwd: values.cwd, model: values.model, settings: settingsFlags });
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
      case 'token':
        return (await import('./token.ts')).token(rest, output);
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
