/**
 * What a job runs with, checked the same way for a built-in tool, an MCP tool and an MCP
 * listing: its run mode, its tenancy (tool user and workspace), and the context the
 * executor is given.
 */
import { realpath } from 'node:fs/promises';
import { dirname, isAbsolute, relative } from 'node:path';
import { Mode } from '@bedrock/contracts';
import type { ToolExecJob } from '@bedrock/contracts';
import { runSandboxed } from '../sandbox/sandboxed-run.ts';
import type { RunMode } from '../sandbox/sandbox-settings.ts';
import type { McpHost } from '../mcp/host.ts';
import type { KeywordSearchLimits } from './keyword-search.ts';
import type { ToolContext } from './tool-types.ts';

/** The run mode of a job. An unset mode counts as Restricted: fail closed. */
export function runModeOf(mode: Mode): RunMode {
  return mode === Mode.UNRESTRICTED ? 'unrestricted' : 'restricted';
}

/**
 * What every job is refused for before its input is read, or undefined: Restricted work never
 * runs unsandboxed, whatever the caller says (REQ-BASH-009); the working directory is absolute.
 */
export function placeRefusal(job: Pick<ToolExecJob, 'cwd'>, mode: RunMode, ctx: Pick<ExecuteContext, 'sandbox'>): string | undefined {
  if (mode === 'restricted' && !ctx.sandbox.sandboxAvailable)
    return 'This tool-runner has no working kernel sandbox (Landlock), so it cannot run Restricted-mode tools.';
  if (!job.cwd.startsWith('/')) return `The working directory must be an absolute path, got "${job.cwd}".`;
  return undefined;
}

/** A job's input (`{}` when empty), or the error the model reads when it is not JSON. */
export function parseJobInput(name: string, inputJson: string): { readonly input: unknown } | { readonly error: string } {
  try {
    return { input: JSON.parse(inputJson === '' ? '{}' : inputJson) };
  } catch (err) {
    return { error: `Invalid input for ${name}: not valid JSON (${(err as Error).message}).` };
  }
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
  ctx: Pick<ExecuteContext, 'sandbox'>,
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
