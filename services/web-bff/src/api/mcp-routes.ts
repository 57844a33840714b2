/**
 * The public `bedrock.v1.McpService`: a user's MCP servers, forwarded to the conversation
 * service as the caller (it keeps them; the tool-runners run them). See docs/mcp.md.
 */
import type { ConnectRouter } from '@connectrpc/connect';
import { McpService } from '@bedrock/contracts';
import { serveService, type Logger } from '@bedrock/platform/server';
import type { Upstream } from '../upstream/conversation-client.ts';
import { createForwarder } from '../upstream/forward.ts';
import { MCP_OAUTH_CALLBACK } from '../http/mcp-oauth-routes.ts';

export interface McpRoutesOptions {
  readonly upstream: Upstream;
  readonly logger: Logger;
  /** BEDROCK_PUBLIC_URL: the origin of the OAuth callback; unset: the request's own. */
  readonly publicUrl?: string | undefined;
}

export function registerMcpRoutes(router: ConnectRouter, options: McpRoutesOptions): void {
  const { mcp } = options.upstream;
  const forward = createForwarder(options.upstream, options.logger);
  serveService(router, McpService, {
    addMcpServer: (req, ctx) => forward('AddMcpServer', ctx, (o) => mcp.addMcpServer(req, o)),
    listMcpServers: (req, ctx) => forward('ListMcpServers', ctx, (o) => mcp.listMcpServers(req, o)),
    removeMcpServer: (req, ctx) => forward('RemoveMcpServer', ctx, (o) => mcp.removeMcpServer(req, o)),
    setMcpServerEnabled: (req, ctx) => forward('SetMcpServerEnabled', ctx, (o) => mcp.setMcpServerEnabled(req, o)),
    // The authorization server sends the browser back to this web-bff's callback, whoever asks.
    startMcpLogin: (req, ctx) =>
      forward('StartMcpLogin', ctx, (o) =>
        mcp.startMcpLogin({ ...req, redirectUri: new URL(MCP_OAUTH_CALLBACK, options.publicUrl ?? new URL(ctx.url).origin).href }, o),
      ),
    completeMcpLogin: (req, ctx) => forward('CompleteMcpLogin', ctx, (o) => mcp.completeMcpLogin(req, o)),
    logoutMcpServer: (req, ctx) => forward('LogoutMcpServer', ctx, (o) => mcp.logoutMcpServer(req, o)),
  });
}
