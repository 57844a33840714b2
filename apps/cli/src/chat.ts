/**
 * `bedrock chat [ID]`: a prompt; each line is sent and the turn streams until the agent is
 * done. Ctrl-C during a turn cancels it; at the prompt it quits. An upgrade request asks y/n.
 * --thinking and the web tool flags choose the settings of a new conversation, or change
 * those of the one named.
 */
import { resolve } from 'node:path';
import { createInterface } from 'node:readline/promises';
import { StateKind } from '@bedrock/contracts';
import { applySettings, creationSettings, type Ctx, type SettingsFlags } from './commands.ts';
import { EXIT } from './exit-codes.ts';
import { createEventRenderer, describeState, renderSettings } from './render.ts';
import { followTurn } from './turn.ts';
import { ConnectError } from '@connectrpc/connect';

export async function chat(ctx: Ctx, opts: { id?: string; cwd?: string; model?: string; settings?: SettingsFlags }): Promise<number> {
  let id = opts.id;
  if (!id) {
    const req = { cwd: resolve(opts.cwd ?? process.cwd()), model: opts.model ?? '', ...creationSettings(opts.settings) };
    const res = await ctx.retry((requestId) => ctx.client.createConversation({ ...req, requestId }));
    id = res.conversation!.id;
  }
  // An existing conversation takes the settings flags as a change (`bedrock settings`).
  const c = opts.id
    ? await applySettings(ctx, id, opts.settings)
    : (await ctx.client.getConversation({ conversationId: id })).conversation!;
  ctx.output.err(
    `conversation ${id} in ${c.cwd} (${describeState(c.state)}; ${renderSettings(c).trim()}). Ctrl-C cancels a turn; Ctrl-D quits.\n`,
  );
  const rl = createInterface({ input: process.stdin, output: process.stderr, terminal: process.stdin.isTTY });
  // Lines typed (or piped) while a turn streams are kept for the next prompt, not lost.
  const lines = rl[Symbol.asyncIterator]();
  const ask = async (prompt: string): Promise<string | undefined> => {
    ctx.output.err(prompt);
    const next = await lines.next();
    return next.done ? undefined : String(next.value);
  };
  const render = createEventRenderer(ctx.output, ctx.render);
  let turn: AbortController | undefined;
  rl.on('SIGINT', () => {
    if (!turn) {
      rl.close();
      return;
    }
    ctx.output.err('\n· cancelling\n');
    ctx
      .retry((requestId) => ctx.client.cancel({ conversationId: id, requestId }))
      .catch((err: unknown) => ctx.output.err(`· cancel failed: ${ConnectError.from(err).rawMessage}\n`));
  });
  let last = EXIT.ok as number;
  for (;;) {
    const input = await ask('> ');
    if (input === undefined) break;
    const line = input.trim();
    if (!line) continue;
    turn = new AbortController();
    try {
      const rest = await followTurn({
        client: ctx.client,
        conversationId: id,
        start: async () =>
          (await ctx.retry((requestId) => ctx.client.sendMessage({ conversationId: id, text: line, requestId }))).message?.id,
        onEvent: render,
        signal: turn.signal,
        onRest: async (state) => {
          if (state.kind !== StateKind.AWAITING_MODE_APPROVAL) return false;
          const answer = ((await ask(`Allow the agent to write (${state.upgradeReason})? [y/N] `)) ?? '').trim().toLowerCase();
          const approve = answer === 'y' || answer === 'yes';
          await ctx.retry((requestId) => ctx.client.respondToModeUpgrade({ conversationId: id, approve, requestId }));
          return true;
        },
      });
      if (rest) ctx.output.err(`· ${describeState(rest)}\n`);
      last = rest?.kind === StateKind.ERROR ? EXIT.turnError : EXIT.ok;
    } catch (err) {
      ctx.output.err(`${ConnectError.from(err).rawMessage}\n`);
    } finally {
      turn = undefined;
    }
  }
  rl.close();
  return last;
}
