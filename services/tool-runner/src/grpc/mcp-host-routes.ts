/**
 * The McpHostService: the conversation service asks which MCP tools a conversation is offered;
 * this runner starts (or reuses) the conversation's servers in its place (user, workspace,
 * mode) and lists their tools. The same tenancy checks as a tool job apply.
 */
import { create } from '@bufbuild/protobuf';
import { Code, ConnectError } from '@connectrpc/connect';
import type { ConnectRouter } from '@connectrpc/connect';
import { ListMcpToolsResponseSchema, McpHostService, MCP_SERVER_NAME } from '@bedrock/contracts';
import type { McpHost } from '../mcp/host.ts';
import { runModeOf, tenancyOf } from '../tools/job-context.ts';
import type { ExecuteContext } from '../tools/job-context.ts';
import { serveService } from '@bedrock/platform/server';

export function registerMcpHostService(router: ConnectRouter, host: McpHost, ctx: Pick<ExecuteContext, 'sandbox'>): void {
  serveService(router, McpHostService, {
    async listMcpTools(req) {
      if (req.conversationId === '') throw new ConnectError('conversation_id is required', Code.InvalidArgument);
      if (!req.cwd.startsWith('/')) throw new ConnectError('cwd must be an absolute path', Code.InvalidArgument);
      for (const s of req.servers) {
        if (!MCP_SERVER_NAME.test(s.name) || (s.command === '') === (s.url === ''))
          throw new ConnectError(`bad MCP server "${s.name}"`, Code.InvalidArgument);
      }
      const mode = runModeOf(req.mode);
      if (req.servers.length === 0) return create(ListMcpToolsResponseSchema, {});
      if (mode === 'restricted' && !ctx.sandbox.sandboxAvailable) {
        throw new ConnectError('this tool-runner has no working sandbox for Restricted MCP servers', Code.FailedPrecondition);
      }
      const tenancy = await tenancyOf({ cwd: req.cwd, toolUid: req.toolUid, toolGid: req.toolGid, workspacePath: req.workspacePath }, ctx);
      if ('error' in tenancy) throw new ConnectError(tenancy.error, Code.FailedPrecondition);
      const listing = await host.list(
        {
          conversationId: req.conversationId,
          mode,
          cwd: req.cwd,
          ...(tenancy.user ? { user: tenancy.user } : {}),
          ...(tenancy.workspace ? { workspace: tenancy.workspace } : {}),
        },
        req.servers,
      );
      return create(ListMcpToolsResponseSchema, { tools: listing.tools, problems: listing.problems });
    },
  });
}
