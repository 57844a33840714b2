/**
 * An `mcp__<server>__<tool>` job: the same checks as a built-in tool's (a Restricted job needs
 * the sandbox, an absolute working directory, the job's tool user and workspace), then the
 * call on the conversation's server process (mcp/host.ts).
 */
import type { ToolExecJob } from '@bedrock/contracts';
import { mcpServerOf, mcpServerOffMessage } from '@bedrock/contracts';
import { parseJobInput, placeRefusal, runModeOf, tenancyOf } from './job-context.ts';
import type { ExecuteContext } from './job-context.ts';
import { errorOutcome } from './tool-types.ts';
import type { ToolOutcome } from './tool-types.ts';

export async function runMcpTool(
  job: Pick<ToolExecJob, 'toolName' | 'inputJson' | 'cwd' | 'mode'> &
    Partial<Pick<ToolExecJob, 'toolUid' | 'toolGid' | 'workspacePath' | 'conversationId' | 'mcpServer'>>,
  ctx: ExecuteContext,
): Promise<ToolOutcome> {
  const name = job.toolName;
  const server = job.mcpServer;
  if (!ctx.mcp) return errorOutcome(`This tool-runner does not run MCP tools, so ${name} cannot run.`);
  if (!server || server.name === '' || server.name !== mcpServerOf(name)) {
    return errorOutcome(`Unknown tool: ${name}. There is no MCP server "${mcpServerOf(name) ?? ''}" for this conversation.`);
  }
  if (server.disabled) return errorOutcome(mcpServerOffMessage(name, server.name));
  const mode = runModeOf(job.mode);
  const refusal = placeRefusal(job, mode, ctx);
  if (refusal) return errorOutcome(refusal);
  const parsed = parseJobInput(name, job.inputJson);
  if ('error' in parsed) return errorOutcome(parsed.error);
  const { input } = parsed;
  if (input === null || typeof input !== 'object' || Array.isArray(input))
    return errorOutcome(`Invalid input for ${name}: not a JSON object.`);
  const tenancy = await tenancyOf(job, ctx);
  if ('error' in tenancy) return errorOutcome(tenancy.error);
  const outcome = await ctx.mcp.call(
    {
      conversationId: job.conversationId ?? '',
      mode,
      cwd: job.cwd,
      ...(tenancy.user ? { user: tenancy.user } : {}),
      ...(tenancy.workspace ? { workspace: tenancy.workspace } : {}),
    },
    server,
    name,
    input as Record<string, unknown>,
    ctx.signal,
    ctx.onOutput,
  );
  return { content: outcome.content, isError: outcome.isError, cancelled: outcome.cancelled, exitCode: -1, display: outcome.display };
}
