/**
 * patch: edits one file with replace / append_eof / prepend_bof / overwrite, all against the
 * original text and all or nothing, and answers with a unified diff. Writes go to a temporary file
 * in the same directory and are renamed over the target, so a failure never leaves a half-written
 * file. Refused in Restricted mode (REQ-PATCH-009) before touching anything. The runner applies
 * patches itself, not a sandboxed process, so `runPatch` checks what the kernel checks for bash.
 */
import type { Stats } from 'node:fs';
import { chown, mkdir, readFile, realpath, rename, rm, stat, writeFile, chmod } from 'node:fs/promises';
import { basename, dirname, join, relative, resolve, sep } from 'node:path';
import { randomBytes } from 'node:crypto';
import { createTwoFilesPatch } from 'diff';
import { PATCH_RESTRICTED_ERROR } from '@bedrock/contracts';
import { applyPatches } from './patch-text.ts';
import type { PatchSpec } from './patch-text.ts';
import { errorOutcome } from './tool-types.ts';
import type { ToolContext, ToolOutcome } from './tool-types.ts';
import { resolveToolUser } from '../sandbox/sandboxed-run.ts';
import type { SandboxSettings } from '../sandbox/sandbox-settings.ts';

export interface PatchInput {
  readonly path: string;
  readonly patches: readonly PatchSpec[];
}

/** The diff in the model's result is cut here; the display keeps up to DISPLAY_DIFF_LIMIT. */
const CONTENT_DIFF_LIMIT = 20_000;
const DISPLAY_DIFF_LIMIT = 200_000;

async function readExisting(path: string): Promise<string | null> {
  try {
    return await readFile(path, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw err;
  }
}

type User = { readonly uid: number; readonly gid: number };

/** Mode-bit check of a permission (`bit`: 4 read, 2 write, 1 search) for `user` (POSIX ACLs are not consulted). */
function may(info: Stats, user: User, bit: number): boolean {
  if (info.uid === user.uid) return (info.mode & (bit << 6)) !== 0;
  if (info.gid === user.gid) return (info.mode & (bit << 3)) !== 0;
  return (info.mode & bit) !== 0;
}

function mayWrite(info: Stats, user: User): boolean {
  return may(info, user, 2);
}

/** `user` may search every directory from `root` down to `dir` (both real paths, dir inside root). */
async function mayReach(root: string, dir: string, user: User): Promise<boolean> {
  for (let d = dir; ; d = dirname(d)) {
    if (!may(await stat(d), user, 1)) return false;
    if (d === root || dirname(d) === d) return true;
  }
}

/**
 * Where `requested` really lands, symlinks followed, with the deepest directory that exists
 * on the way (for a new file); null when it leaves `root` (already a real path).
 */
async function resolveInside(root: string, requested: string): Promise<{ target: string; existingDir: string } | null> {
  const missing: string[] = [];
  let probe = requested;
  for (;;) {
    try {
      const real = await realpath(probe);
      const target = join(real, ...missing);
      const inside = (p: string) => p === root || p.startsWith(root + sep);
      if (!inside(target) || target === root) return null;
      return { target, existingDir: missing.length === 0 ? dirname(real) : real };
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT' || dirname(probe) === probe) throw err;
      missing.unshift(basename(probe));
      probe = dirname(probe);
    }
  }
}

export interface PatchContext extends Pick<ToolContext, 'cwd' | 'mode' | 'user' | 'workspace'> {
  /** Who tools run as; absent or null: the runner's own user (no checks, no chown). */
  readonly sandbox?: Pick<SandboxSettings, 'toolUser'>;
}

/**
 * The runner applies patches itself (not a sandboxed process), so it enforces what the kernel
 * enforces for bash: the path must resolve, symlinks followed, inside the workspace (a workspace
 * job) or the working directory (a host-path job); the tool user — the job's own uid and gid when
 * it carries them — must be allowed to reach the file (search permission on every directory from
 * the root down) and to write it and its directory (mode bits); new files and directories belong
 * to that user, edited ones keep their owner.
 */
export async function runPatch(input: PatchInput, ctx: PatchContext): Promise<ToolOutcome> {
  if (ctx.mode === 'restricted') return errorOutcome(PATCH_RESTRICTED_ERROR);
  const requested = resolve(ctx.cwd, input.path);
  const shown = relative(ctx.cwd, requested).startsWith('..') ? requested : relative(ctx.cwd, requested) || basename(requested);
  const user = ctx.user ?? (ctx.sandbox?.toolUser ? await resolveToolUser(ctx.sandbox.toolUser, ctx.cwd) : undefined);
  // A workspace job may edit anything in its workspace (as its bash may), nothing outside.
  const rootDir = ctx.workspace ?? ctx.cwd;
  const rootName = ctx.workspace ? `the workspace ${ctx.workspace}` : `the working directory ${ctx.cwd}`;
  let target = requested;
  let existingDir: string;
  let original: string | null;
  let info: Stats | null;
  try {
    // Edit what a symlink points to rather than replacing the link with a file, but only
    // inside the working directory: no path, link or `..` may lead the runner out of it.
    const root = await realpath(rootDir);
    const resolved = await resolveInside(root, requested);
    if (!resolved) {
      return errorOutcome(
        `${shown} is outside ${rootName} (symlinks followed); patch edits files under it only. The file was not changed.`,
      );
    }
    ({ target, existingDir } = resolved);
    info = await stat(target).catch(() => null);
    if (info?.isDirectory()) return errorOutcome(`${shown} is a directory, not a file.`);
    if (user) {
      const dirInfo = await stat(existingDir);
      if (
        (info && (!mayWrite(info, user) || !may(info, user, 4))) ||
        !mayWrite(dirInfo, user) ||
        !(await mayReach(root, existingDir, user))
      ) {
        return errorOutcome(`Cannot write ${shown}: permission denied for the tool user (uid ${user.uid}). The file was not changed.`);
      }
    }
    original = await readExisting(target);
  } catch (err) {
    return errorOutcome(`Cannot read ${shown}: ${(err as Error).message}`);
  }
  // Decoding a binary file as UTF-8 and writing it back would corrupt it.
  if (original?.includes('\u0000'))
    return errorOutcome(`${shown} looks like a binary file (it contains NUL bytes); patch edits text files only.`);
  const applied = applyPatches(original, input.patches, shown);
  if (!applied.ok) return errorOutcome(`${applied.error} The file was not changed.`);
  if (original !== null && applied.text === original) {
    return {
      content: `No change: the patches leave ${shown} as it was.`,
      isError: false,
      exitCode: -1,
      cancelled: false,
      display: { diff: '' },
    };
  }
  const temp = join(dirname(target), `.${basename(target)}.bedrock-${randomBytes(4).toString('hex')}.tmp`);
  try {
    const firstCreated = await mkdir(dirname(target), { recursive: true });
    if (user && firstCreated) {
      // The directories just made belong to the tool user, like the file.
      for (let dir = dirname(target); dir.length >= firstCreated.length; dir = dirname(dir)) await chown(dir, user.uid, user.gid);
    }
    await writeFile(temp, applied.text, 'utf8');
    const mode = original === null ? null : (await stat(target)).mode & 0o7777;
    if (mode !== null) await chmod(temp, mode);
    if (user) await chown(temp, info?.uid ?? user.uid, info?.gid ?? user.gid);
    await rename(temp, target);
  } catch (err) {
    await rm(temp, { force: true });
    return errorOutcome(`Cannot write ${shown}: ${(err as Error).message}. The file was not changed.`);
  }
  const diff = createTwoFilesPatch(
    original === null ? '/dev/null' : `a/${shown}`,
    `b/${shown}`,
    original ?? '',
    applied.text,
    undefined,
    undefined,
    { context: 3 },
  );
  const summary = `${original === null ? 'Created' : 'Patched'} ${shown} (${input.patches.length} patch${input.patches.length === 1 ? '' : 'es'}).`;
  const notes = applied.notes.length > 0 ? `\n${applied.notes.join('\n')}` : '';
  const diffShown =
    diff.length > CONTENT_DIFF_LIMIT
      ? `${diff.slice(0, CONTENT_DIFF_LIMIT)}\n[... diff cut at ${CONTENT_DIFF_LIMIT} characters ...]`
      : diff;
  return {
    content: `${summary}${notes}\n\n${diffShown}`,
    isError: false,
    exitCode: -1,
    cancelled: false,
    display: { path: shown, created: original === null, diff: diff.slice(0, DISPLAY_DIFF_LIMIT) },
  };
}
