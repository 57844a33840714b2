/** The scriptable subcommands (docs/cli.md). Each returns its exit code. */
import { createInterface } from 'node:readline/promises';
import { readFile, statSync } from 'node:fs';
import { extname, isAbsolute, relative, resolve } from 'node:path';
import { toJson } from '@bufbuild/protobuf';
import { Code, ConnectError } from '@connectrpc/connect';
import {
  CancelResponseSchema,
  ConversationSchema,
  DeliveryMode,
  DowngradeModeResponseSchema,
  GetConversationResponseSchema,
  RenameConversationResponseSchema,
  ForkConversationResponseSchema,
  DeleteConversationResponseSchema,
  RespondToModeUpgradeResponseSchema,
  ServerTool,
  StateKind,
  ThinkingLevel,
  TriggerContinuationResponseSchema,
  type Conversation,
  type ConversationEvent,
  type ConversationState,
  type ImageAttachment,
} from '@bedrock/contracts';
import { parseThinking } from '@bedrock/agent-view/agent-content';
import { cacheReadPhrase, formatUsd } from '@bedrock/agent-view/money';
import type { ApiClient, WorkspacesClient } from './connection.ts';
import { EXIT, UsageError } from './exit-codes.ts';
import type { Retry } from './retry.ts';
import {
  createEventRenderer,
  describeState,
  ndjson,
  renderConversationTable,
  renderMessages,
  renderMode,
  renderWriteAccess,
  renderSettings,
  renderSubAgents,
  type EventRenderer,
  type Output,
  type RenderOptions,
} from './render.ts';
import { stripControls } from './terminal-text.ts';
import { followTurn, resumingWatch, type ResumeOptions } from './turn.ts';

export interface Ctx {
  readonly client: ApiClient;
  /** WorkspaceService, on the same connection. */
  readonly workspaces: WorkspacesClient;
  readonly output: Output;
  readonly json: boolean;
  readonly signal: AbortSignal;
  /** Runs a change with a fresh request id, retried with the same id on UNAVAILABLE / ABORTED (retry.ts). */
  readonly retry: Retry;
  /** How people's output looks (--hide-thinking, --full; colour on a terminal). */
  readonly render?: RenderOptions;
  /** How watches resume after a disconnect (BEDROCK_RETRY_FOR), and how that is announced. */
  readonly resume?: ResumeOptions;
  /** The terminal's width in columns (undefined: not a terminal), which `ls` fits its table to. */
  readonly width?: number | undefined;
  /** What the command follows now, so that Ctrl-C can say what is still running (dispatch.ts). */
  readonly following: Following;
}

/** The conversation a command follows and its last known state. */
export interface Following {
  id?: string;
  state?: ConversationState;
}

/**
 * What Ctrl-C leaves behind, in one line: the tool still running in the conversation, or the
 * agent still working (and how to stop it); undefined when it rests.
 */
export function stillRunning(following: Following): string | undefined {
  const { id, state } = following;
  if (!id || !state) return undefined;
  const stop = `\`bedrock cancel ${id}\` stops it`;
  if (state.kind === StateKind.TOOL_EXECUTING)
    return `the tool ${state.currentToolName || '(unnamed)'} is still running in conversation ${id} (${stop})`;
  if (state.kind === StateKind.IDLE || state.kind === StateKind.UNSPECIFIED || isAtRest(state.kind)) return undefined;
  return `the agent is still working in conversation ${id} (${describeState(state)}; ${stop})`;
}

function isAtRest(kind: StateKind): boolean {
  return [StateKind.COMPLETED, StateKind.FAILED, StateKind.ERROR, StateKind.CONTEXT_EXHAUSTED, StateKind.AWAITING_MODE_APPROVAL].includes(
    kind,
  );
}

/** The renderer of people's output, keeping `ctx.following` up to date. */
export function followingRenderer(ctx: Ctx, id: string, initial?: ConversationState): (event: ConversationEvent) => void {
  ctx.following.id = id;
  if (initial) ctx.following.state = initial;
  const render: EventRenderer | undefined = ctx.json ? undefined : createEventRenderer(ctx.output, ctx.render);
  return (event) => {
    if (event.kind.case === 'stateChanged' && event.kind.value.state) ctx.following.state = event.kind.value.state;
    if (event.kind.case === 'snapshot' && event.kind.value.conversation?.state) ctx.following.state = event.kind.value.conversation.state;
    if (render) render(event);
    else ctx.output.out(ndjson(event));
  };
}

/** The `· state` line at the end of a turn, unless the live output just said it. */
function restLine(ctx: Ctx, rest: ConversationState): void {
  const said = describeState(rest);
  const last = ctx.following.state ? describeState(ctx.following.state) : undefined;
  if (said !== last) ctx.output.err(`· ${said}\n`);
}

/** Thinking and web tools asked for on the command line (--thinking, --web-search, --no-web-search, ...). */
export interface SettingsFlags {
  /** UNSPECIFIED: not given. */
  readonly thinking: ThinkingLevel;
  readonly enable: readonly ServerTool[];
  readonly disable: readonly ServerTool[];
}

/** Reads the settings flags; a level that is not one, or a tool both turned on and off, is a usage error. */
export function parseSettingsFlags(values: {
  thinking?: string | undefined;
  'web-search'?: boolean | undefined;
  'web-fetch'?: boolean | undefined;
  'no-web-search'?: boolean | undefined;
  'no-web-fetch'?: boolean | undefined;
}): SettingsFlags {
  let thinking = ThinkingLevel.UNSPECIFIED;
  if (values.thinking !== undefined) {
    const level = parseThinking(values.thinking);
    if (level === undefined) throw new UsageError(`--thinking ${values.thinking}: use off, low, medium, high or max`);
    thinking = level;
  }
  const enable: ServerTool[] = [];
  const disable: ServerTool[] = [];
  for (const [flag, tool] of [
    ['web-search', ServerTool.WEB_SEARCH],
    ['web-fetch', ServerTool.WEB_FETCH],
  ] as const) {
    const on = values[flag] === true;
    const off = values[`no-${flag}`] === true;
    if (on && off) throw new UsageError(`--${flag} and --no-${flag} contradict each other`);
    if (on) enable.push(tool);
    if (off) disable.push(tool);
  }
  return { thinking, enable, disable };
}

function hasSettings(flags: SettingsFlags | undefined): flags is SettingsFlags {
  return flags !== undefined && (flags.thinking !== ThinkingLevel.UNSPECIFIED || flags.enable.length > 0 || flags.disable.length > 0);
}

/** The creation request's settings: the level (UNSPECIFIED: the deployment's default) and the tools turned on. */
export function creationSettings(flags: SettingsFlags | undefined): { thinking: ThinkingLevel; serverTools: ServerTool[] } {
  return { thinking: flags?.thinking ?? ThinkingLevel.UNSPECIFIED, serverTools: [...(flags?.enable ?? [])] };
}

const json = (value: unknown) => `${JSON.stringify(value)}\n`;

const MEDIA_TYPES: Record<string, string> = {
  '.png': 'image/png',
  '.jpg': 'image/jpeg',
  '.jpeg': 'image/jpeg',
  '.gif': 'image/gif',
  '.webp': 'image/webp',
};

export async function loadImage(path: string): Promise<Omit<ImageAttachment, '$typeName'>> {
  const mediaType = MEDIA_TYPES[extname(path).toLowerCase()];
  if (!mediaType) throw new UsageError(`--image ${path}: use a .png, .jpg, .gif or .webp file`);
  // node:fs, not node:fs/promises: loading that module costs every command a few ms at start.
  const data = await new Promise<Buffer>((done, fail) =>
    readFile(path, (err, bytes) => (err ? fail(new UsageError(`--image ${path}: cannot read the file`)) : done(bytes))),
  );
  return { mediaType, data };
}

/**
 * Where a new conversation works (docs/cli.md, "Where a conversation works"): `--workspace NAME`
 * with `--cwd` a relative directory inside it; neither flag: the caller's default workspace
 * (both fields empty); `--cwd DIR` alone: a directory of this host, made absolute (the server
 * takes it only where host paths are on).
 */
export interface Placement {
  readonly workspace: string;
  readonly cwd: string;
  /** `cwd` is a host path (its refusal gets a hint). */
  readonly hostPath: boolean;
}

export const HOST_PATH_HINT = 'use --workspace NAME, or leave --cwd out for your default workspace';

export function placementOf(opts: { workspace?: string | undefined; cwd?: string | undefined }): Placement {
  if (opts.workspace !== undefined) {
    const workspace = opts.workspace.trim();
    if (!workspace) throw new UsageError('--workspace: give the name of one of your workspaces (bedrock ws ls lists them)');
    const cwd = (opts.cwd ?? '').trim();
    if (isAbsolute(cwd))
      throw new UsageError(
        `--cwd ${cwd}: with --workspace, --cwd is a directory inside the workspace, relative to its top (such as src/app)`,
      );
    return { workspace, cwd, hostPath: false };
  }
  if (opts.cwd !== undefined) return { workspace: '', cwd: checkedCwd(opts.cwd), hostPath: true };
  return { workspace: '', cwd: '', hostPath: false };
}

/** CreateConversation at `place`, retried with one request id; a refused host path gets the hint. */
export async function createAt(
  ctx: Ctx,
  place: Placement,
  more: { model?: string; continueFromId?: string; settings?: SettingsFlags | undefined },
) {
  const req = {
    cwd: place.cwd,
    workspace: place.workspace,
    model: more.model ?? '',
    continueFromId: more.continueFromId ?? '',
    ...creationSettings(more.settings),
  };
  try {
    return await ctx.retry((requestId) => ctx.client.createConversation({ ...req, requestId }));
  } catch (err) {
    const e = ConnectError.from(err);
    if (place.hostPath && e.code === Code.PermissionDenied)
      throw new ConnectError(`${e.rawMessage} (${HOST_PATH_HINT})`, e.code, e.metadata, undefined, e);
    throw err;
  }
}

export async function newConversation(
  ctx: Ctx,
  opts: { cwd?: string; workspace?: string; model?: string; from?: string; settings?: SettingsFlags },
): Promise<number> {
  // A continuation works where its source did, unless told otherwise.
  const place =
    opts.from && opts.cwd === undefined && opts.workspace === undefined ? await placeOfSource(ctx, opts.from) : placementOf(opts);
  const res = await createAt(ctx, place, { model: opts.model, continueFromId: opts.from ?? '', settings: opts.settings });
  const c = res.conversation!;
  ctx.output.out(ctx.json ? json(toJson(ConversationSchema, c)) : `${c.id}\n`);
  return EXIT.ok;
}

/** Where a conversation works, as a placement: its workspace and the directory inside it, or its host path. */
async function placeOfSource(ctx: Ctx, id: string): Promise<Placement> {
  const c = await sourceOf(ctx, id);
  if (!c.workspaceId) return { workspace: '', cwd: c.cwd, hostPath: true };
  const ws = (await ctx.workspaces.listWorkspaces({})).workspaces.find((w) => w.id === c.workspaceId);
  const inside = ws ? relative(ws.path, c.cwd) : '';
  return { workspace: c.workspaceId, cwd: inside.startsWith('..') || isAbsolute(inside) ? '' : inside, hostPath: false };
}

/** `--cwd DIR` made absolute (default: the current directory); a directory that does not exist is a usage error. */
export function checkedCwd(dir: string | undefined): string {
  const cwd = resolve(dir ?? process.cwd());
  let isDir = false;
  try {
    isDir = statSync(cwd).isDirectory();
  } catch {
    throw new UsageError(`--cwd ${dir ?? cwd}: no such directory`);
  }
  if (!isDir) throw new UsageError(`--cwd ${dir ?? cwd}: not a directory`);
  return cwd;
}

async function sourceOf(ctx: Ctx, id: string) {
  return (await ctx.client.getConversation({ conversationId: id })).conversation!;
}

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

/**
 * Changes a conversation's thinking and web tools: only what the flags name (the tool list is
 * the current one with the named tools turned on or off). Returns the conversation's settings
 * after the change, or as they are when nothing was asked.
 */
export async function applySettings(ctx: Ctx, id: string, flags: SettingsFlags | undefined) {
  if (!hasSettings(flags)) return (await ctx.client.getConversation({ conversationId: id })).conversation!;
  let serverTools: { tools: ServerTool[] } | undefined;
  if (flags.enable.length || flags.disable.length) {
    const current = (await ctx.client.getConversation({ conversationId: id })).conversation!.serverTools;
    const tools = [...new Set([...current, ...flags.enable])].filter((t) => !flags.disable.includes(t));
    serverTools = { tools };
  }
  // Settings are set, not added to: a repeat after a lost answer changes nothing more.
  const res = await ctx.retry(() =>
    ctx.client.updateConversationSettings({ conversationId: id, thinking: flags.thinking, ...(serverTools ? { serverTools } : {}) }),
  );
  return res.conversation!;
}

/** `bedrock settings ID [--thinking L] [--web-search|--no-web-search] [--web-fetch|--no-web-fetch]`. */
export async function settings(ctx: Ctx, id: string, flags: SettingsFlags): Promise<number> {
  const c = await applySettings(ctx, id, flags);
  ctx.output.out(ctx.json ? json(toJson(ConversationSchema, c)) : renderSettings(c));
  return EXIT.ok;
}

/** Exit code for the state a turn came to rest in. */
export function restExit(state: ConversationState | undefined): number {
  switch (state?.kind) {
    case StateKind.IDLE:
    case StateKind.COMPLETED:
      return EXIT.ok;
    case StateKind.AWAITING_MODE_APPROVAL:
      return EXIT.awaitingApproval;
    case StateKind.CONTEXT_EXHAUSTED:
      return EXIT.exhausted;
    case undefined:
      return EXIT.interrupted;
    default:
      return EXIT.turnError;
  }
}

/**
 * The text of a message: TEXT as given, `-` for all of stdin, `--file PATH` for a file's
 * contents (so that a long message need not fit in an argument: Linux refuses one over 128 KiB).
 */
export async function messageText(
  text: string | undefined,
  file: string | undefined,
  stdin: NodeJS.ReadableStream = process.stdin,
): Promise<string> {
  if (file !== undefined && text !== undefined) throw new UsageError('give the text or --file PATH, not both');
  let read: string;
  if (file !== undefined) {
    read = await new Promise<string>((done, fail) =>
      readFile(file, 'utf8', (err, t) => (err ? fail(new UsageError(`--file ${file}: cannot read the file`)) : done(t))),
    );
  } else if (text === '-') {
    const chunks: Buffer[] = [];
    for await (const chunk of stdin) chunks.push(typeof chunk === 'string' ? Buffer.from(chunk) : chunk);
    read = Buffer.concat(chunks).toString('utf8');
  } else {
    return text ?? '';
  }
  // A file or a pipe ends with a newline that is not part of the message.
  const message = read.replace(/\r?\n$/, '');
  if (!message.trim()) throw new UsageError(`${file !== undefined ? `--file ${file}` : 'stdin'}: the message is empty`);
  return message;
}

const DELIVERY_MODES = { queue: DeliveryMode.QUEUE, steer: DeliveryMode.STEER, interrupt: DeliveryMode.INTERRUPT } as const;

export async function send(
  ctx: Ctx,
  id: string,
  text: string,
  opts: { images: string[]; wait: boolean; delivery?: keyof typeof DELIVERY_MODES | undefined },
): Promise<number> {
  const images = await Promise.all(opts.images.map(loadImage));
  const delivery = opts.delivery ? DELIVERY_MODES[opts.delivery] : DeliveryMode.UNSPECIFIED;
  // One request id for the message, whatever the number of attempts: it is stored once.
  const sendOnce = () => ctx.retry((requestId) => ctx.client.sendMessage({ conversationId: id, text, images, requestId, delivery }));
  // A message that waits (--queue, --steer, --interrupt while busy) has no id yet: follow until the conversation rests.
  const sendIt = async () => (await sendOnce()).message?.id;
  if (!opts.wait) {
    const res = await sendOnce();
    if (ctx.json) {
      ctx.output.out(json({ messageId: res.message?.id ?? '', queuedId: res.queuedId, state: describeState(res.state) }));
      return EXIT.ok;
    }
    // A waiting message prints its queued id (stdout stays one id for scripts; the note goes to stderr).
    ctx.output.out(`${res.message?.id ?? res.queuedId}\n`);
    if (res.queuedId) ctx.output.err(`the agent is busy: the message waits (${opts.delivery}) and is delivered by the server\n`);
    return EXIT.ok;
  }
  const render = followingRenderer(ctx, id);
  const rest = await followTurn({
    client: ctx.client,
    conversationId: id,
    start: sendIt,
    onEvent: render,
    signal: ctx.signal,
    resume: ctx.resume,
  });
  if (!ctx.json && rest) restLine(ctx, rest);
  return restExit(rest);
}

/** Streams a conversation's events until Ctrl-C (exit 130), resuming after disconnects; gives up (exit 4) after the retry budget. */
export async function watch(ctx: Ctx, id: string): Promise<number> {
  const render = followingRenderer(ctx, id);
  let resumed = false;
  let watching = false;
  const resume: ResumeOptions = {
    ...ctx.resume,
    onResume: (notice) => {
      resumed = true;
      ctx.resume?.onResume?.(notice);
    },
  };
  for await (const event of resumingWatch(ctx.client, id, ctx.signal, resume)) {
    if (resumed && !ctx.json) ctx.output.err('· resumed\n');
    resumed = false;
    if (event.kind.case === 'snapshot' && !ctx.json) {
      // A resume before any event is a fresh watch: its snapshot is not announced again.
      const c = event.kind.value.conversation!;
      ctx.following.state = c.state;
      if (!watching) ctx.output.err(`watching ${c.id} (${describeState(c.state)}); Ctrl-C to stop\n`);
      watching = true;
      continue;
    }
    if (event.kind.case === 'heartbeat' && !ctx.json) continue;
    render(event);
  }
  return ctx.signal.aborted ? EXIT.interrupted : EXIT.ok;
}

export async function action(ctx: Ctx, verb: 'cancel' | 'approve' | 'deny' | 'downgrade' | 'continue', id: string): Promise<number> {
  const req = { conversationId: id };
  switch (verb) {
    case 'cancel': {
      const res = await ctx.retry((requestId) => ctx.client.cancel({ ...req, requestId }));
      ctx.output.out(ctx.json ? json(toJson(CancelResponseSchema, res)) : `${describeState(res.state)}\n`);
      break;
    }
    case 'approve':
    case 'deny': {
      const res = await ctx.retry((requestId) => ctx.client.respondToModeUpgrade({ ...req, approve: verb === 'approve', requestId }));
      ctx.output.out(ctx.json ? json(toJson(RespondToModeUpgradeResponseSchema, res)) : `${describeState(res.conversation?.state)}\n`);
      break;
    }
    case 'downgrade': {
      const res = await ctx.retry((requestId) => ctx.client.downgradeMode({ ...req, requestId }));
      ctx.output.out(ctx.json ? json(toJson(DowngradeModeResponseSchema, res)) : `${describeState(res.conversation?.state)}\n`);
      break;
    }
    case 'continue': {
      const res = await ctx.retry((requestId) => ctx.client.triggerContinuation({ ...req, requestId }));
      ctx.output.out(ctx.json ? json(toJson(TriggerContinuationResponseSchema, res)) : `${describeState(res.state)}\n`);
      break;
    }
  }
  return EXIT.ok;
}

/** "warning: nobody (uid 65534) cannot write /srv/app: …" when the tool-runner said so; else nothing. */
function warningLine(c: Parameters<typeof renderWriteAccess>[0]): string {
  const { warning } = renderWriteAccess(c);
  return warning ? `warning: ${warning}\n` : '';
}
