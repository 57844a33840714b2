/** The commands on conversations as a whole: `ls`, id prefixes, `show`, `rename`, `rm` and `fork`. */
import { createInterface } from 'node:readline/promises';
import { toJson } from '@bufbuild/protobuf';
import { Code, ConnectError } from '@connectrpc/connect';
import {
  ConversationSchema,
  DeleteConversationResponseSchema,
  ForkConversationResponseSchema,
  GetConversationResponseSchema,
  RenameConversationResponseSchema,
  type Conversation,
} from '@bedrock/contracts';
import { cacheReadPhrase, formatUsd } from '@bedrock/agent-view/money';
import { json, type Ctx } from './commands.ts';
import { EXIT, UsageError } from './exit-codes.ts';
import {
  describeState,
  renderConversationTable,
  renderMode,
  renderSettings,
  renderSubAgents,
  renderWriteAccess,
} from './render-conversation.ts';
import { renderMessages } from './render-messages.ts';
import { stripControls } from './terminal-text.ts';

export async function list(ctx: Ctx, opts: { all: boolean; parent?: string; archived: boolean; search?: string }): Promise<number> {
  let pageToken = '';
  const rows: Conversation[] = [];
  do {
    const page = await ctx.client.listConversations({
      pageToken,
      parentId: opts.parent ?? '',
      includeArchived: opts.archived,
      pageSize: 200,
      query: opts.search ?? '',
    });
    if (ctx.json) for (const c of page.conversations) ctx.output.out(json(toJson(ConversationSchema, c)));
    else rows.push(...page.conversations);
    pageToken = opts.all ? page.nextPageToken : '';
  } while (pageToken);
  if (!ctx.json) ctx.output.out(renderConversationTable(rows, { width: ctx.width, now: Date.now() }));
  return EXIT.ok;
}

const FULL_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
/** Most conversations looked through for a prefix (pages of 200). */
const PREFIX_SEARCH_PAGES = 50;

/**
 * A conversation id as given: whole, or a short prefix of one of the caller's conversations
 * (`show b8ac`), found through ListConversations (archived ones too). A prefix that fits none
 * is NotFound; one that fits several lists them.
 */
export async function resolveId(ctx: Pick<Ctx, 'client'>, given: string): Promise<string> {
  const prefix = given.trim().toLowerCase();
  if (FULL_ID.test(prefix) || !/^[0-9a-f-]+$/.test(prefix)) return given;
  const found: Conversation[] = [];
  let pageToken = '';
  for (let page = 0; page < PREFIX_SEARCH_PAGES; page++) {
    const res = await ctx.client.listConversations({ pageToken, includeArchived: true, pageSize: 200 });
    found.push(...res.conversations.filter((c) => c.id.startsWith(prefix)));
    pageToken = res.nextPageToken;
    if (!pageToken || found.length > 1) break;
  }
  if (found.length === 1) return found[0]!.id;
  if (found.length === 0)
    throw new ConnectError(`no conversation of yours has an id starting with "${given}" (bedrock ls lists them)`, Code.NotFound);
  const listed = found
    .slice(0, 10)
    .map((c) => `${c.id} ${stripControls(c.title) || '(no title yet)'}`)
    .join('; ');
  throw new UsageError(`"${given}" fits more than one conversation: ${listed}${found.length > 10 ? '; …' : ''}; give more of the id`);
}

export async function show(ctx: Ctx, id: string): Promise<number> {
  const res = await ctx.client.getConversation({ conversationId: id });
  if (ctx.json) {
    ctx.output.out(`${JSON.stringify(toJson(GetConversationResponseSchema, res), null, 2)}\n`);
    return EXIT.ok;
  }
  const c = res.conversation!;
  ctx.output.out(
    `${c.title || '(no title yet)'}\n${c.id}  ${c.cwd}  model ${c.model}\n${c.workspaceName ? `workspace: ${c.workspaceName}` : 'workspace: none (a host directory)'}\nstate: ${describeState(c.state)}\nmode: ${renderMode(c)}\n${warningLine(c)}${renderSettings(c)}`,
  );
  const u = c.contextUsage;
  if (u && u.contextWindow > 0n) ctx.output.out(`context: ${u.usedTokens} of ${u.contextWindow} tokens${u.warning ? ' (over 80%)' : ''}\n`);
  const cache = cacheReadPhrase(c.totalUsage);
  ctx.output.out(`cost: ${formatUsd(c.costMicros)}${cache ? ` · ${cache}` : ''}\n`);
  if (c.parentId) ctx.output.out(`sub-agent of ${c.parentId} (bedrock show ${c.parentId})\n`);
  if (c.forkedFrom)
    ctx.output.out(
      c.forkedFrom.sourceDeleted
        ? `forked from ${c.forkedFrom.conversationId} at message ${c.forkedFrom.messageSequence} (deleted since)\n`
        : `forked from ${c.forkedFrom.conversationId} at message ${c.forkedFrom.messageSequence} (bedrock show ${c.forkedFrom.conversationId})\n`,
    );
  ctx.output.out(renderSubAgents(c.id, res.subAgents, res.moreSubAgents));
  if (res.messages.length) ctx.output.out(`\nmessages (#N: the number fork --at takes):\n`);
  ctx.output.out(renderMessages(res.messages, { ...ctx.render, numbered: true }));
  return EXIT.ok;
}

/** `bedrock rename ID TITLE`: prints the title as the server keeps it (trimmed); --json the conversation. */
export async function rename(ctx: Ctx, id: string, title: string): Promise<number> {
  // Setting a title is repeatable: a retry after a lost answer sets the same one.
  const res = await ctx.retry(() => ctx.client.renameConversation({ conversationId: id, title }));
  ctx.output.out(ctx.json ? json(toJson(RenameConversationResponseSchema, res)) : `${res.conversation!.title}\n`);
  return EXIT.ok;
}

/**
 * `bedrock rm ID [--yes]`: deletes the conversation with its sub-agents and messages. Without
 * --yes it asks on a terminal (naming what goes) and refuses elsewhere, so a script never deletes
 * by accident. Prints the ids deleted, one a line.
 */
export async function remove(ctx: Ctx, id: string, yes: boolean): Promise<number> {
  if (!yes) {
    if (!process.stdin.isTTY) throw new UsageError(`rm ${id}: not on a terminal, so nothing asks; pass --yes to delete without asking`);
    const details = await ctx.client.getConversation({ conversationId: id });
    const c = details.conversation!;
    const subAgents = details.subAgents.length + (details.moreSubAgents ? '+' : '');
    // The title is the model's text, asked on the terminal directly (readline): cleaned here.
    const what = `"${stripControls(c.title) || id}" (${id})${details.subAgents.length ? ` with its ${subAgents} sub-agents` : ''}`;
    const rl = createInterface({ input: process.stdin, output: process.stderr });
    const answer = await rl.question(`Delete ${what} and every message? This cannot be undone. [y/N] `).finally(() => rl.close());
    if (!/^y(es)?$/i.test(answer.trim())) {
      ctx.output.err('nothing deleted\n');
      return EXIT.ok;
    }
  }
  // A retry after a lost answer carries the same request id: it gets the same answer, not NOT_FOUND.
  const res = await ctx.retry((requestId) => ctx.client.deleteConversation({ conversationId: id, requestId }));
  ctx.output.out(ctx.json ? json(toJson(DeleteConversationResponseSchema, res)) : res.deletedIds.map((d) => `${d}\n`).join(''));
  return EXIT.ok;
}

/** `--at SEQ`: a message sequence from 1 (absent: 0, the whole history). */
export function forkPoint(at: string | undefined): bigint {
  if (at === undefined) return 0n;
  if (!/^[1-9][0-9]{0,15}$/.test(at))
    throw new UsageError(`--at ${at}: give the sequence number of a message (1, 2, …: the #SEQ before each message in bedrock show ID)`);
  return BigInt(at);
}

/** `bedrock fork ID [--at SEQ] [--files]`: prints the new conversation's id; --json the conversation. */
export async function fork(ctx: Ctx, id: string, atMessage: bigint, withFiles = false): Promise<number> {
  // A retry after a lost answer carries the same request id: it gets the same fork, not a second one.
  const res = await ctx.retry((requestId) => ctx.client.forkConversation({ conversationId: id, atMessage, requestId, withFiles }));
  ctx.output.out(ctx.json ? json(toJson(ForkConversationResponseSchema, res)) : `${res.conversation!.id}\n`);
  return EXIT.ok;
}

/** "warning: nobody (uid 65534) cannot write /srv/app: …" when the tool-runner said so; else nothing. */
function warningLine(c: Parameters<typeof renderWriteAccess>[0]): string {
  const { warning } = renderWriteAccess(c);
  return warning ? `warning: ${warning}\n` : '';
}
