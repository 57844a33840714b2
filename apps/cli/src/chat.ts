/**
 * `bedrock chat [ID]`: a prompt; each message (lines ending with `\` joined into one) is sent and the
 * turn streams until the agent is done. A pending approval is asked y/n, also one waiting as chat opens;
 * Ctrl-C cancels a turn, a second one quits. --thinking and the web tool flags set a new conversation's
 * settings or change the named one's. docs/cli.md, "Commands".
 */
import { createInterface } from 'node:readline/promises';
import { StateKind, type ConversationState } from '@bedrock/contracts';
import { ConnectError } from '@connectrpc/connect';
import { followingRenderer, stillRunning, type Ctx } from './commands.ts';
import { createAt, placementOf } from './commands-create.ts';
import { applySettings, type SettingsFlags } from './commands-settings.ts';
import { EXIT } from './exit-codes.ts';
import { describeState, renderMode, renderSettings, renderWriteAccess } from './render-conversation.ts';
import { followTurn } from './turn.ts';

/** Whether a typed line asks for more: it ends with a backslash (not an escaped one). */
export function continues(line: string): boolean {
  return /(^|[^\\])(\\\\)*\\$/.test(line);
}

/**
 * Runs `bedrock chat`; resolves with its exit code: 130 after Ctrl-C at the prompt, else the last
 * turn's code at the end of input (Ctrl-D). A second Ctrl-C while a turn cancels exits with 130 at once.
 */
export async function chat(
  ctx: Ctx,
  opts: { id?: string; cwd?: string; workspace?: string; model?: string; settings?: SettingsFlags },
): Promise<number> {
  let id = opts.id;
  if (!id) {
    const res = await createAt(ctx, placementOf(opts), { model: opts.model, settings: opts.settings });
    id = res.conversation!.id;
  }
  const conversationId = id;
  // An existing conversation takes the settings flags as a change (`bedrock settings`).
  const c = opts.id
    ? await applySettings(ctx, id, opts.settings)
    : (await ctx.client.getConversation({ conversationId: id })).conversation!;
  ctx.output.err(
    `conversation ${id} in ${c.workspaceName ? `workspace ${c.workspaceName}, ` : ''}${c.cwd} (${describeState(c.state)}; mode: ${renderMode(c)}; ${renderSettings(c).trim()}).\n` +
      (renderWriteAccess(c).warning ? `⚠ ${renderWriteAccess(c).warning}\n` : '') +
      'End a line with \\ to go on on the next one. Ctrl-C cancels a turn; Ctrl-D quits.\n',
  );
  const rl = createInterface({ input: process.stdin, output: process.stderr, terminal: process.stdin.isTTY });
  // Lines typed (or piped) while a turn streams are kept for the next prompt, not lost.
  const lines = rl[Symbol.asyncIterator]();
  const ask = async (prompt: string): Promise<string | undefined> => {
    ctx.output.err(prompt);
    const next = await lines.next();
    return next.done ? undefined : String(next.value);
  };
  /** One message: lines joined while each ends with a backslash; undefined at the end of input. */
  const readMessage = async (): Promise<string | undefined> => {
    const parts: string[] = [];
    for (let prompt = '> '; ; prompt = '. ') {
      const line = await ask(prompt);
      if (line === undefined) return parts.length ? parts.join('\n') : undefined;
      if (!continues(line)) return [...parts, line].join('\n');
      parts.push(line.slice(0, -1));
    }
  };
  const render = followingRenderer(ctx, conversationId, c.state);
  let turn: AbortController | undefined;
  let cancelling = false;
  let interrupted = false;
  const onSigint = () => {
    if (!turn || cancelling) {
      // At the prompt, or a second Ctrl-C while a cancel is under way: quit.
      const left = turn ? stillRunning(ctx.following) : undefined;
      ctx.output.err(`\nbedrock: interrupted${left ? `; ${left}` : ''}\n`);
      interrupted = true;
      rl.close();
      if (turn) process.exit(EXIT.interrupted);
      return;
    }
    cancelling = true;
    const left = stillRunning(ctx.following);
    ctx.output.err(`\n· cancelling${left?.startsWith('the tool') ? ` (${left.replace(/ \(.*\)$/, '')}; it is being stopped)` : ''}\n`);
    ctx
      .retry((requestId) => ctx.client.cancel({ conversationId, requestId }))
      .catch((err: unknown) => ctx.output.err(`· cancel failed: ${ConnectError.from(err).rawMessage}\n`));
  };
  // On a terminal readline sees Ctrl-C; with stdin from a pipe the process gets SIGINT.
  rl.on('SIGINT', onSigint);
  process.on('SIGINT', onSigint);
  /** Asks y/n for a pending write-access request and answers it. */
  const answerApproval = async (state: ConversationState): Promise<boolean> => {
    if (state.kind !== StateKind.AWAITING_MODE_APPROVAL) return false;
    // Where it would write, read now: the tool-runner's word on whether the tool user can.
    const c = await ctx.client.getConversation({ conversationId }).then(
      (r) => r.conversation,
      () => undefined,
    );
    const access = renderWriteAccess(c ?? {});
    if (access.warning) ctx.output.err(`⚠ ${access.warning}\n`);
    const answer = ((await ask(`Allow the agent to write in ${access.place} (${state.upgradeReason})? [y/N] `)) ?? '').trim().toLowerCase();
    const approve = answer === 'y' || answer === 'yes';
    await ctx.retry((requestId) => ctx.client.respondToModeUpgrade({ conversationId, approve, requestId }));
    return true;
  };
  let last = EXIT.ok as number;
  /** Follows one turn that `start` begins (a message, or the answer to an approval) until it rests. */
  const follow = async (start: () => Promise<string | undefined>, after?: bigint) => {
    turn = new AbortController();
    cancelling = false;
    try {
      const rest = await followTurn({
        client: ctx.client,
        conversationId,
        start,
        onEvent: render,
        signal: turn.signal,
        resume: ctx.resume,
        onRest: answerApproval,
        ...(after !== undefined ? { after } : {}),
      });
      if (rest && describeState(rest) !== (ctx.following.state && describeState(ctx.following.state)))
        ctx.output.err(`· ${describeState(rest)}\n`);
      last = rest?.kind === StateKind.ERROR ? EXIT.turnError : EXIT.ok;
    } catch (err) {
      ctx.output.err(`${ConnectError.from(err).rawMessage}\n`);
    } finally {
      turn = undefined;
    }
  };
  try {
    // Opened while the agent waits for an approval: answer it first, then follow what it starts.
    // (From the position that answer reflects: the events after it cannot replay the question.)
    const now = c.state?.kind === StateKind.AWAITING_MODE_APPROVAL ? await ctx.client.getConversation({ conversationId }) : undefined;
    const pending = now?.conversation?.state;
    if (now && pending?.kind === StateKind.AWAITING_MODE_APPROVAL) {
      await follow(async () => {
        await answerApproval(pending);
        return undefined;
      }, now.sequence);
    }
    while (!interrupted) {
      const input = await readMessage();
      if (input === undefined) break;
      const text = input.trim();
      if (!text) continue;
      await follow(async () => (await ctx.retry((requestId) => ctx.client.sendMessage({ conversationId, text, requestId }))).message?.id);
    }
  } finally {
    process.off('SIGINT', onSigint);
    rl.close();
  }
  return interrupted ? EXIT.interrupted : last;
}
