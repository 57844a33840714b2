/**
 * One entry point for every tool the runner executes: checks the mode, parses and validates
 * the input against the tool's schema, and dispatches. Invalid input, an unknown tool or a
 * tool that is not the runner's to run comes back as an error result the model can read;
 * nothing here throws for bad input.
 */
import { TOOLS, isToolName, Mode } from '@bedrock/contracts';
import type { ToolExecJob } from '@bedrock/contracts';
import { runBash } from './bash.ts';
import type { BashInput } from './bash.ts';
import { runKeywordSearch } from './keyword-search.ts';
import type { KeywordSearchInput, KeywordSearchLimits } from './keyword-search.ts';
import { runPatch } from './patch.ts';
import type { PatchInput } from './patch.ts';
import { runThink } from './think.ts';
import type { ThinkInput } from './think.ts';
import { validateInput } from './validate-input.ts';
import { errorOutcome } from './tool-types.ts';
import type { ToolContext, ToolOutcome } from './tool-types.ts';
import type { RunMode } from '../sandbox/sandboxed-run.ts';

/** The run mode of a job. An unset mode counts as Restricted: fail closed. */
export function runModeOf(mode: Mode): RunMode {
  return mode === Mode.UNRESTRICTED ? 'unrestricted' : 'restricted';
}

export type ExecuteContext = Omit<ToolContext, 'mode' | 'cwd'> & { readonly searchLimits?: KeywordSearchLimits };

export async function executeTool(
  job: Pick<ToolExecJob, 'toolName' | 'inputJson' | 'cwd' | 'mode'>,
  ctx: ExecuteContext,
): Promise<ToolOutcome> {
  const name = job.toolName;
  if (!isToolName(name)) return errorOutcome(`Unknown tool "${name}".`);
  const tool = TOOLS[name];
  if (tool.executor !== 'tool-runner') return errorOutcome(`The tool "${name}" is not run by the tool-runner.`);
  const mode = runModeOf(job.mode);
  if (mode === 'restricted' && !ctx.sandbox.sandboxAvailable) {
    // Never run Restricted work unsandboxed, whatever the caller says (REQ-BASH-009).
    return errorOutcome('This tool-runner has no working kernel sandbox (Landlock), so it cannot run Restricted-mode tools.');
  }
  if (!job.cwd.startsWith('/')) return errorOutcome(`The working directory must be an absolute path, got "${job.cwd}".`);
  // REQ-PATCH-009: refused in Restricted mode whatever the input.
  if (name === 'patch' && mode === 'restricted') return runPatch({ path: '', patches: [] }, { cwd: job.cwd, mode });
  let input: unknown;
  try {
    input = JSON.parse(job.inputJson === '' ? '{}' : job.inputJson);
  } catch (err) {
    return errorOutcome(`Invalid input for ${name}: not valid JSON (${(err as Error).message}).`);
  }
  const problems = validateInput(tool.inputSchema, input);
  if (problems.length > 0) return errorOutcome(`Invalid input for ${name}: ${problems.join('; ')}.`);
  const toolCtx: ToolContext = { ...ctx, cwd: job.cwd, mode };
  switch (name) {
    case 'bash':
      return runBash(input as BashInput, toolCtx);
    case 'patch':
      return runPatch(input as PatchInput, toolCtx);
    case 'keyword_search':
      return runKeywordSearch(input as KeywordSearchInput, toolCtx, ctx.searchLimits);
    case 'think':
      return runThink(input as ThinkInput);
    default:
      return errorOutcome(`The tool "${name}" is not run by the tool-runner.`);
  }
}
