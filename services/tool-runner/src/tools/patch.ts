/**
 * patch: edits one file with replace / append_eof / prepend_bof / overwrite, all against the
 * original text and all or nothing, and answers with a unified diff. Writes go to a
 * temporary file in the same directory and are renamed over the target, so a failure never
 * leaves a half-written file. Refused in Restricted mode (REQ-PATCH-009) before touching
 * anything.
 */
import { mkdir, readFile, realpath, rename, rm, stat, writeFile, chmod } from 'node:fs/promises';
import { basename, dirname, join, relative, resolve } from 'node:path';
import { randomBytes } from 'node:crypto';
import { createTwoFilesPatch } from 'diff';
import { PATCH_RESTRICTED_ERROR } from '@bedrock/contracts';
import { applyPatches } from './patch-text.ts';
import type { PatchSpec } from './patch-text.ts';
import { errorOutcome } from './tool-types.ts';
import type { ToolContext, ToolOutcome } from './tool-types.ts';

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

export async function runPatch(input: PatchInput, ctx: Pick<ToolContext, 'cwd' | 'mode'>): Promise<ToolOutcome> {
  if (ctx.mode === 'restricted') return errorOutcome(PATCH_RESTRICTED_ERROR);
  const requested = resolve(ctx.cwd, input.path);
  const shown = relative(ctx.cwd, requested).startsWith('..') ? requested : relative(ctx.cwd, requested) || basename(requested);
  let target = requested;
  let original: string | null;
  try {
    // Edit what a symlink points to rather than replacing the link with a file.
    target = await realpath(requested).catch(() => requested);
    const info = await stat(target).catch(() => null);
    if (info?.isDirectory()) return errorOutcome(`${shown} is a directory, not a file.`);
    original = await readExisting(target);
  } catch (err) {
    return errorOutcome(`Cannot read ${shown}: ${(err as Error).message}`);
  }
  // Decoding a binary file as UTF-8 and writing it back would corrupt it.
  if (original?.includes('\u0000')) return errorOutcome(`${shown} looks like a binary file (it contains NUL bytes); patch edits text files only.`);
  const applied = applyPatches(original, input.patches, shown);
  if (!applied.ok) return errorOutcome(`${applied.error} The file was not changed.`);
  if (original !== null && applied.text === original) {
    return { content: `No change: the patches leave ${shown} as it was.`, isError: false, exitCode: -1, cancelled: false, display: { diff: '' } };
  }
  const temp = join(dirname(target), `.${basename(target)}.bedrock-${randomBytes(4).toString('hex')}.tmp`);
  try {
    await mkdir(dirname(target), { recursive: true });
    await writeFile(temp, applied.text, 'utf8');
    const mode = original === null ? null : (await stat(target)).mode & 0o7777;
    if (mode !== null) await chmod(temp, mode);
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
  const diffShown = diff.length > CONTENT_DIFF_LIMIT ? `${diff.slice(0, CONTENT_DIFF_LIMIT)}\n[... diff cut at ${CONTENT_DIFF_LIMIT} characters ...]` : diff;
  return {
    content: `${summary}${notes}\n\n${diffShown}`,
    isError: false,
    exitCode: -1,
    cancelled: false,
    display: { path: shown, created: original === null, diff: diff.slice(0, DISPLAY_DIFF_LIMIT) },
  };
}
