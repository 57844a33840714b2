/**
 * One entry point for every tool the runner executes: checks the mode, parses and validates
 * the input against the tool's schema, and dispatches. Invalid input, an unknown tool or a
 * tool that is not the runner's to run comes back as an error result the model can read;
 * nothing here throws for bad input.
 */
import { realpath } from 'node:fs/promises';
import { dirname, isAbsolute, relative } from 'node:path';
import { runSandboxed } from '../sandbox/sandboxed-run.ts';
import { TOOLS, isMcpToolName, isRunnerToolName, isToolName, Mode, type RunnerToolName } from '@bedrock/contracts';
import type { McpHost } from '../mcp/host.ts';
import { runMcpTool } from '../mcp/run-mcp-tool.ts';
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

export type ExecuteContext = Omit<ToolContext, 'mode' | 'cwd'> & {
  readonly searchLimits?: KeywordSearchLimits;
  /** The MCP servers of this runner; without it, MCP tools are refused. */
  readonly mcp?: McpHost;
};

type Tenancy = { readonly user?: { uid: number; gid: number }; readonly workspace?: string } | { readonly error: string };

const inside = (path: string, dir: string): boolean => path === dir || path.startsWith(dir.endsWith('/') ? dir : `${dir}/`);

/**
 * Who the job's tools run as and what they see. A job with its owner's uid (`tool_uid` ≠ 0)
 * runs as that uid and gid, which must lie in BEDROCK_TOOL_UIDS; a job with a workspace runs
 * in it (its cwd inside it, compared as real paths) and must carry its owner's uid. A job with
 * neither (a host-path conversation) runs as the runner's configured tool user.
 */
export async function tenancyOf(
  job: Pick<ToolExecJob, 'cwd'> & Partial<Pick<ToolExecJob, 'toolUid' | 'toolGid' | 'workspacePath'>>,
  ctx: ExecuteContext,
): Promise<Tenancy> {
  const uid = job.toolUid ?? 0;
  const gid = job.toolGid ?? 0;
  const workspacePath = job.workspacePath ?? '';
  if (uid === 0 && gid === 0 && workspacePath === '') return {};
  const range = ctx.sandbox.toolUids;
  const allowed = (id: number) => id >= range.first && id <= range.last;
  if (!allowed(uid) || !allowed(gid)) {
    return {
      error: `Refused: this job asks to run as uid ${uid}, gid ${gid}, outside this tool-runner's allowed tool users (BEDROCK_TOOL_UIDS ${range.first}-${range.last}); nothing was run.`,
    };
  }
  if (!ctx.sandbox.toolUser) {
    return {
      error: `Refused: this tool-runner cannot switch users (it is not root and has no CAP_SETUID), so it cannot run as uid ${uid}; nothing was run.`,
    };
  }
  if (workspacePath === '') return { user: { uid, gid } };
  if (!workspacePath.startsWith('/')) return { error: `Refused: the workspace path must be absolute, got "${workspacePath}".` };
  let workspace: string;
  let cwd: string;
  try {
    workspace = await realpath(workspacePath);
    cwd = await realpath(job.cwd).catch(async (err: NodeJS.ErrnoException) => {
      // A conversation's directory inside its workspace is made at its first tool call, by
      // its owner in the sandbox (never by root: a link the tools planted is not followed out).
      const rel = relative(workspacePath, job.cwd);
      if (err.code !== 'ENOENT' || rel === '' || rel.startsWith('..') || isAbsolute(rel)) throw err;
      await runSandboxed(ctx.sandbox, {
        mode: 'unrestricted',
        argv: ['mkdir', '-p', '--', job.cwd],
        cwd: workspacePath,
        timeoutMs: 10_000,
        user: { uid, gid },
        workspace: workspacePath,
      });
      return realpath(job.cwd);
    });
  } catch (err) {
    return {
      error: `The workspace ${workspacePath} or the working directory ${job.cwd} does not exist (${(err as NodeJS.ErrnoException).code ?? (err as Error).message}).`,
    };
  }
  if (workspace === '/') return { error: 'Refused: the workspace cannot be /.' };
  // Only a workspace of this runner's storage: ROOT/<id>, nothing above or beside it.
  const root = await realpath(ctx.sandbox.workspaceRoot).catch(() => ctx.sandbox.workspaceRoot);
  if (dirname(workspace) !== root)
    return { error: `Refused: ${workspacePath} is not a workspace of this tool-runner (BEDROCK_WORKSPACE_ROOT ${root}); nothing was run.` };
  if (!inside(cwd, workspace))
    return { error: `Refused: the working directory ${job.cwd} is outside the workspace ${workspacePath}; nothing was run.` };
  return { user: { uid, gid }, workspace };
}

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
