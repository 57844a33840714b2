/**
 * One entry point for every tool the runner executes: checks the mode, parses and validates the
 * input, and dispatches. Bad input, an unknown tool or one not the runner's to run comes back as an
 * error result the model can read; nothing here throws for bad input.
 */
import { TOOLS, isMcpToolName, isRunnerToolName, isToolName, type RunnerToolName } from '@bedrock/contracts';
import type { ToolExecJob } from '@bedrock/contracts';
import { parseJobInput, placeRefusal, runModeOf, tenancyOf } from './job-context.ts';
import type { ExecuteContext } from './job-context.ts';
import { runMcpTool } from './mcp-tool.ts';
import { runBash } from './bash.ts';
import type { BashInput } from './bash.ts';
import { runKeywordSearch } from './keyword-search.ts';
import type { KeywordSearchInput } from './keyword-search.ts';
import { runPatch } from './patch.ts';
import type { PatchInput } from './patch.ts';
import { runThink } from './think.ts';
import type { ThinkInput } from './think.ts';
import { prepareValidators, validateInput } from './validate-input.ts';
import { errorOutcome } from './tool-types.ts';
import type { ToolContext, ToolOutcome } from './tool-types.ts';

export async function executeTool(
  job: Pick<ToolExecJob, 'toolName' | 'inputJson' | 'cwd' | 'mode'> &
    Partial<Pick<ToolExecJob, 'toolUid' | 'toolGid' | 'workspacePath' | 'conversationId' | 'mcpServer'>>,
  ctx: ExecuteContext,
): Promise<ToolOutcome> {
  const name = job.toolName;
  if (isMcpToolName(name)) return runMcpTool(job, ctx);
  if (!isToolName(name)) return errorOutcome(`Unknown tool "${name}".`);
  if (!isRunnerToolName(name)) return errorOutcome(`The tool "${name}" is not run by the tool-runner.`);
  const tool = TOOLS[name];
  const mode = runModeOf(job.mode);
  const refusal = placeRefusal(job, mode, ctx);
  if (refusal) return errorOutcome(refusal);
  // REQ-PATCH-009: refused in Restricted mode whatever the input.
  if (name === 'patch' && mode === 'restricted') return runPatch({ path: '', patches: [] }, { cwd: job.cwd, mode });
  const parsed = parseJobInput(name, job.inputJson);
  if ('error' in parsed) return errorOutcome(parsed.error);
  const { input } = parsed;
  const problems = validateInput(tool.inputSchema, input);
  if (problems.length > 0) return errorOutcome(`Invalid input for ${name}: ${problems.join('; ')}.`);
  const tenancy = await tenancyOf(job, ctx);
  if ('error' in tenancy) return errorOutcome(tenancy.error);
  const toolCtx: ToolContext = {
    ...ctx,
    cwd: job.cwd,
    mode,
    ...(tenancy.user ? { user: tenancy.user } : {}),
    ...(tenancy.workspace ? { workspace: tenancy.workspace } : {}),
  };
  return RUNNERS[name](input, toolCtx, ctx);
}

/** Compiles the input schema of every tool the runner executes (at start: not on a tool's first call). */
export function prepareToolInputs(): void {
  prepareValidators(Object.keys(RUNNERS).map((name) => TOOLS[name as RunnerToolName].inputSchema));
}

/**
 * Each tool the runner executes, keyed by every `executor: 'tool-runner'` tool of the registry:
 * a tool added there without an entry here fails to compile. `input` was validated against the
 * tool's schema.
 */
const RUNNERS: {
  readonly [K in RunnerToolName]: (input: unknown, toolCtx: ToolContext, ctx: ExecuteContext) => ToolOutcome | Promise<ToolOutcome>;
} = {
  bash: (input, toolCtx) => runBash(input as BashInput, toolCtx),
  patch: (input, toolCtx) => runPatch(input as PatchInput, toolCtx),
  keyword_search: (input, toolCtx, ctx) => runKeywordSearch(input as KeywordSearchInput, toolCtx, ctx.searchLimits),
  think: (input) => runThink(input as ThinkInput),
};
