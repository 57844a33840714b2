/**
 * keyword_search: case-insensitive literal search for each term, with context lines, from the
 * repository root (the working directory outside a repository). `git grep` inside a
 * repository (tracked and untracked files, .gitignore respected), `grep -r` outside one.
 * A term whose matches exceed the per-term budget is dropped and reported, so one common word
 * cannot crowd out the rest; the total is bounded too. Runs under the same sandbox as bash.
 */
import { access } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { runSandboxed } from '../sandbox/sandboxed-run.ts';
import { workingDirectoryProblem } from './bash.ts';
import { CANCELLED_OUTCOME, errorOutcome } from './tool-types.ts';
import type { ToolContext, ToolOutcome } from './tool-types.ts';

export interface KeywordSearchInput {
  readonly query: string;
  readonly search_terms: readonly string[];
}

export interface KeywordSearchLimits {
  /** A term with more output than this (bytes) is dropped. Default 16 000. */
  readonly perTermBytes: number;
  /** Bound on the whole result (bytes). Default 64 000. */
  readonly totalBytes: number;
  /** Context lines around each match. Default 2. */
  readonly contextLines: number;
  /** Wall-clock limit per term, ms. Default 30 000. */
  readonly timeoutMs: number;
}

export const DEFAULT_SEARCH_LIMITS: KeywordSearchLimits = { perTermBytes: 16_000, totalBytes: 64_000, contextLines: 2, timeoutMs: 30_000 };

/**
 * The nearest directory at or above `cwd` holding a `.git` (directory, or file for worktrees).
 * Found by looking, not by running git: git run by the runner itself would obey the
 * workspace's .git/config (core.fsmonitor and friends run commands), which a tool can write.
 */
async function gitRoot(cwd: string): Promise<string | null> {
  for (let dir = resolve(cwd); ; dir = dirname(dir)) {
    if (
      await access(join(dir, '.git')).then(
        () => true,
        () => false,
      )
    )
      return dir;
    if (dirname(dir) === dir) return null;
  }
}

export async function runKeywordSearch(
  input: KeywordSearchInput,
  ctx: ToolContext,
  limits: KeywordSearchLimits = DEFAULT_SEARCH_LIMITS,
): Promise<ToolOutcome> {
  const cwdProblem = await workingDirectoryProblem(ctx.cwd);
  if (cwdProblem) return errorOutcome(cwdProblem);
  const found = await gitRoot(ctx.cwd);
  // A workspace run sees nothing above its workspace: a repository root outside it is not searched from.
  const inside = (dir: string, ws: string) => dir === ws || dir.startsWith(`${ws}/`);
  const repoRoot = found && ctx.workspace && !inside(found, ctx.workspace) ? null : found;
  const root = repoRoot ?? ctx.cwd;
  const inRepo = repoRoot !== null;
  const sections: string[] = [];
  const summary: Record<string, string> = {};
  let used = 0;
  for (const term of input.search_terms) {
    if (ctx.signal.aborted) return CANCELLED_OUTCOME;
    if (used >= limits.totalBytes) {
      sections.push(`== "${term}": skipped, the output budget is used up; search for it on its own.`);
      summary[term] = 'skipped';
      continue;
    }
    const context = String(limits.contextLines);
    const argv = inRepo
      ? ['git', 'grep', '--untracked', '-n', '-i', '-F', '-I', '--no-color', '-C', context, '-e', term]
      : ['grep', '-r', '-n', '-i', '-F', '-I', '-C', context, '--exclude-dir=.git', '--exclude-dir=node_modules', '-e', term, '.'];
    const result = await runSandboxed(ctx.sandbox, {
      mode: ctx.mode,
      argv,
      cwd: root,
      timeoutMs: limits.timeoutMs,
      signal: ctx.signal,
      capture: { headBytes: limits.perTermBytes + 1, tailBytes: 0 },
      ...(ctx.user ? { user: ctx.user } : {}),
      ...(ctx.workspace ? { workspace: ctx.workspace } : {}),
    });
    if (result.cancelled) return CANCELLED_OUTCOME;
    if (result.setupError) return errorOutcome(`The sandbox could not be applied, so the search did not run: ${result.setupError}`);
    if (result.timedOut) {
      sections.push(`== "${term}": dropped, the search took longer than ${limits.timeoutMs / 1000}s.`);
      summary[term] = 'timeout';
    } else if (result.exitCode === 1 && result.totalBytes === 0) {
      sections.push(`== "${term}": no matches.`);
      summary[term] = 'none';
    } else if (result.exitCode !== 0) {
      sections.push(`== "${term}": the search failed (exit ${result.exitCode ?? result.signal}): ${result.output.slice(0, 500)}`);
      summary[term] = 'error';
    } else if (result.totalBytes > limits.perTermBytes || used + result.totalBytes > limits.totalBytes) {
      const matches = (result.output.match(/^.+?[:]\d+[:]/gm) ?? []).length;
      sections.push(
        `== "${term}": dropped, too many matches (${result.totalBytes} bytes, ${matches}+ matching lines); use a more specific term.`,
      );
      summary[term] = 'dropped';
    } else {
      const matches = (result.output.match(/^.+?[:]\d+[:]/gm) ?? []).length;
      sections.push(`== "${term}": ${matches} matching line${matches === 1 ? '' : 's'}\n${result.output.trimEnd()}`);
      summary[term] = String(matches);
      used += result.totalBytes;
    }
  }
  const header = `Searched ${root} for: ${input.query}`;
  return {
    content: `${header}\n\n${sections.join('\n\n')}`,
    isError: false,
    exitCode: -1,
    cancelled: false,
    display: { root, terms: summary },
  };
}
