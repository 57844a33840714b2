/**
 * The public `bedrock.v1.McpService`: a user's MCP servers, forwarded to the conversation
 * service as the caller (it keeps them; the tool-runners run them). See docs/mcp.md.
 */
import type { ConnectRouter } from '@connectrpc/connect';
import { McpService } from '@bedrock/contracts';
import { serveService, type Logger } from '@bedrock/platform/server';
import type { Upstream } from '../upstream/conversation-client.ts';
import { createForwarder } from '../upstream/forward.ts';

export interface McpRoutesOptions {
  readonly upstream: Upstream;
  readonly logger: Logger;
}

export function registerMcpRoutes(router: ConnectRouter, options: McpRoutesOptions): void {
  const { mcp } = options.upstream;
  const forward = createForwarder(options.upstream, options.logger);
  serveService(router, McpService, {
    addMcpServer: (req, ctx) => forward('AddMcpServer', ctx, (o) => mcp.addMcpServer(req, o)),
    listMcpServers: (req, ctx) => forward('ListMcpServers', ctx, (o) => mcp.listMcpServers(req, o)),
    removeMcpServer: (req, ctx) => forward('RemoveMcpServer', ctx, (o) => mcp.removeMcpServer(req, o)),
    setMcpServerEnabled: (req, ctx) => forward('SetMcpServerEnabled', ctx, (o) => mcp.setMcpServerEnabled(req, o)),
  });
}
