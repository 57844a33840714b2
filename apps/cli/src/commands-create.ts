/**
 * A new conversation: where it works (--workspace, --cwd; a continuation where its source did)
 * and `bedrock new`.
 */
import { statSync } from 'node:fs';
import { isAbsolute, relative, resolve } from 'node:path';
import { toJson } from '@bufbuild/protobuf';
import { Code, ConnectError } from '@connectrpc/connect';
import { ConversationSchema } from '@bedrock/contracts';
import { json, type Ctx } from './commands.ts';
import { creationSettings, type SettingsFlags } from './commands-settings.ts';
import { EXIT, UsageError } from './exit-codes.ts';

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
