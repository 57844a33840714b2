/**
 * The subcommands of `bedrock` after run.ts parsed the command line: connects and runs one
 * (commands*.ts; chat.ts and token.ts are loaded only for their commands), and turns
 * a failure into its line on stderr and its exit code.
 */
import { stillRunning, type Ctx, type Following } from './commands.ts';
import { fork, forkPoint, list, remove, resolveId, rename, show } from './commands-conversations.ts';
import { newConversation, placementOf } from './commands-create.ts';
import { parseSettingsFlags, settings } from './commands-settings.ts';
import { action, messageText, send, watch } from './commands-turn.ts';
import { connectBoth } from './connection.ts';
import { Code } from '@connectrpc/connect';
import { describeError, exitCodeOf } from './errors.ts';
import { EXIT, UsageError } from './exit-codes.ts';
import { isStdio, type Output } from './output.ts';
import { paint, wantsColor } from './render-style.ts';
import { createRetry, retryPolicyFromEnv } from './retry.ts';
import { ADMIN_FLAGS, type OptionValues } from './usage.ts';

const SETTINGS_FLAGS = ['thinking', 'web-search', 'web-fetch', 'no-web-search', 'no-web-fetch'] as const;
const DELIVERY_FLAGS = ['queue', 'steer', 'interrupt'] as const;

/** "; bedrock help send shows its usage" after a usage error: one line, not the whole usage. */
const seeHelp = (command: string) => `; bedrock help ${command} shows its usage`;

export async function dispatch(
  command: string,
  rest: string[],
  values: OptionValues,
  env: NodeJS.ProcessEnv,
  output: Output,
): Promise<number> {
  const abort = new AbortController();
  const following: Following = {};
  // Ctrl-C ends every command with 130, saying what is still running on the server (chat
  // handles it itself: during a turn it cancels the turn).
  const onSigint = () => {
    if (abort.signal.aborted) process.exit(EXIT.interrupted);
    const left = stillRunning(following);
    output.err(`\nbedrock: interrupted${left ? `; ${left}` : ''}\n`);
    // A command that follows nothing (a single call) just ends; a watch closes its stream first.
    if (following.id === undefined) process.exit(EXIT.interrupted);
    abort.abort();
  };
  if (command !== 'chat') process.on('SIGINT', onSigint);
  const errColor = isStdio(output) && wantsColor(process.stderr.isTTY, env);
  try {
    const given = SETTINGS_FLAGS.filter((f) => values[f] !== undefined);
    if (given.length && !['chat', 'new', 'settings'].includes(command))
      throw new UsageError(`--${given[0]} applies to chat, new and settings${seeHelp(command)}`);
    const mcpFlag = (['mcp-on', 'mcp-off'] as const).find((f) => values[f] !== undefined);
    if (mcpFlag && command !== 'settings') throw new UsageError(`--${mcpFlag} applies to settings${seeHelp(command)}`);
    if (values.search !== undefined && command !== 'ls') throw new UsageError(`--search applies to ls${seeHelp(command)}`);
    const adminFlag = ADMIN_FLAGS.find((f) => values[f] !== undefined);
    if (adminFlag && command !== 'admin') throw new UsageError(`--${adminFlag} applies to admin${seeHelp(command)}`);
    if (values.at !== undefined && !['fork', 'rewind', 'diff'].includes(command))
      throw new UsageError(`--at applies to fork, rewind and diff${seeHelp(command)}`);
    const rewindFlag = (['files', 'chat'] as const).find((f) => values[f]);
    if (rewindFlag && command !== 'rewind' && !(rewindFlag === 'files' && command === 'fork'))
      throw new UsageError(`--${rewindFlag} applies to rewind${rewindFlag === 'files' ? ' and fork' : ''}${seeHelp(command)}`);
    if (
      values.yes &&
      command !== 'rm' &&
      !(command === 'ws' && rest[0] === 'rm') &&
      !(command === 'admin' && rest[0] === 'users' && rest[1] === 'delete')
    )
      throw new UsageError(`--yes applies to rm, ws rm and admin users delete${seeHelp(command)}`);
    const wsFlag = (['git', 'copy', 'with-conversations'] as const).find((f) => values[f] !== undefined && values[f] !== false);
    if (wsFlag && command !== 'ws') throw new UsageError(`--${wsFlag} applies to ws${seeHelp(command)}`);
    if (values.workspace !== undefined && !(command === 'new' || (command === 'chat' && !rest[0])))
      throw new UsageError(`--workspace applies to new and chat without an id (a conversation keeps its workspace)${seeHelp(command)}`);
    const delivery = DELIVERY_FLAGS.filter((f) => values[f]);
    if (delivery.length && command !== 'send') throw new UsageError(`--${delivery[0]} applies to send${seeHelp(command)}`);
    if (delivery.length > 1) throw new UsageError(`choose one of --queue, --steer and --interrupt${seeHelp(command)}`);
    const settingsFlags = parseSettingsFlags(values);
    const creating = command === 'new' || (command === 'chat' && !rest[0]);
    if (creating && settingsFlags.disable.length)
      throw new UsageError(
        `a new conversation has no web tools unless asked for: --no-web-search and --no-web-fetch apply to chat ID and settings${seeHelp(command)}`,
      );
    const policy = retryPolicyFromEnv(env);
    const ctx: Ctx = {
      ...connectBoth(env),
      output,
      json: values.json,
      signal: abort.signal,
      retry: createRetry({ policy, output, signal: abort.signal }),
      // Colour only on a terminal (not in files, pipes, or tests' captured output); NO_COLOR turns it off.
      render: {
        hideThinking: values['hide-thinking'],
        full: values.full,
        color: isStdio(output) && wantsColor(process.stdout.isTTY, env),
        errColor,
      },
      resume: {
        budgetMs: policy.budgetMs,
        onResume: ({ attempt, delayMs, error }) =>
          output.err(
            `${paint(errColor, 'yellow', '· disconnected')} (${Code[error.code]}: ${error.rawMessage}); resuming in ${(delayMs / 1000).toFixed(1)}s (attempt ${attempt})\n`,
          ),
      },
      following,
      width: isStdio(output) && process.stdout.isTTY ? process.stdout.columns : undefined,
    };
    /** A conversation id, whole or a short unique prefix (resolveId). */
    const idOf = (given: string) => resolveId(ctx, given);
    const optionalId = async (given: string | undefined) => (given === undefined ? undefined : idOf(given));
    const need = (positionals: string[], count: number, what: string): string[] => {
      if (positionals.length !== count) throw new UsageError(`expected ${what}${seeHelp(command)}`);
      return positionals;
    };
    const code = await (async (): Promise<number> => {
      switch (command) {
        case 'chat':
          if (rest.length > 1) throw new UsageError(`expected at most one conversation id${seeHelp(command)}`);
          // Where it works is checked before anything is asked of the server.
          if (!rest[0]) placementOf(values);
          return await (
            await import('./chat.ts')
          ).chat(ctx, {
            id: await optionalId(rest[0]),
            cwd: values.cwd,
            workspace: values.workspace,
            model: values.model,
            settings: settingsFlags,
          });
        case 'new':
          need(rest, 0, 'no arguments (use --workspace, --cwd, --model, --from)');
          if (values.cwd !== undefined || values.workspace !== undefined) placementOf(values);
          return await newConversation(ctx, {
            cwd: values.cwd,
            workspace: values.workspace,
            model: values.model,
            from: await optionalId(values.from),
            settings: settingsFlags,
          });
        case 'ws':
          return await (await import('./workspaces.ts')).ws(ctx, rest, values);
        case 'settings': {
          const id = await idOf(need(rest, 1, 'a conversation id')[0]!);
          const on = values['mcp-on'] ?? [];
          const off = values['mcp-off'] ?? [];
          if (on.length || off.length) await (await import('./mcp.ts')).setConversationMcp(id, on, off, ctx.json, env, output);
          return await settings(ctx, id, settingsFlags);
        }
        case 'ls':
          need(rest, 0, 'no arguments');
          return await list(ctx, {
            all: values.all,
            parent: await optionalId(values.parent),
            archived: values.archived,
            search: values.search,
          });
        case 'show':
          return await show(ctx, await idOf(need(rest, 1, 'a conversation id')[0]!));
        case 'rename': {
          const [id, title] = need(rest, 2, 'a conversation id and the title (quote it)');
          return await rename(ctx, await idOf(id!), title!);
        }
        case 'rm':
          return await remove(ctx, await idOf(need(rest, 1, 'a conversation id')[0]!), values.yes);
        case 'fork':
          return await fork(ctx, await idOf(need(rest, 1, 'a conversation id')[0]!), forkPoint(values.at), values.files);
        case 'rewind':
        case 'diff':
          return await (await import('./checkpoints.ts')).checkpointCommand(ctx, command, rest, values, env);
        case 'send': {
          const [id, given] =
            values.file !== undefined
              ? need(rest, 1, 'a conversation id (the text comes from --file)')
              : need(rest, 2, 'a conversation id and the text (quote it; - reads it from stdin)');
          const text = await messageText(given, values.file);
          return await send(ctx, await idOf(id!), text, { images: values.image ?? [], wait: values.wait, delivery: delivery[0] });
        }
        case 'watch':
          return await watch(ctx, await idOf(need(rest, 1, 'a conversation id')[0]!));
        case 'cancel':
        case 'approve':
        case 'deny':
        case 'downgrade':
        case 'continue':
          return await action(ctx, command, await idOf(need(rest, 1, 'a conversation id')[0]!));
        case 'token':
          return (await import('./token.ts')).token(rest, output);
        case 'admin':
          return await (await import('./admin.ts')).admin(rest, values, env, output);
        case 'usage':
          return await (await import('./spend.ts')).usage(rest, values, env, output);
        case 'mcp':
          return await (await import('./mcp.ts')).mcp(rest, values.json === true, env, output, values.url);
        default:
          throw new UsageError(`unknown command "${command}"${seeHelp(command)}`);
      }
    })();
    return abort.signal.aborted ? EXIT.interrupted : code;
  } catch (err) {
    if (abort.signal.aborted) return EXIT.interrupted;
    output.err(`${paint(errColor, 'red', 'bedrock:')} ${describeError(err, env)}\n`);
    return exitCodeOf(err);
  } finally {
    process.off('SIGINT', onSigint);
  }
}
