/**
 * The public `bedrock.v1.WorkspaceService`: a user's workspaces, forwarded to the conversation
 * service as the caller (it keeps the records and asks the tool-runners' storage for the files).
 */
import type { ConnectRouter } from '@connectrpc/connect';
import { WorkspaceService } from '@bedrock/contracts';
import { serveService, type Logger } from '@bedrock/platform/server';
import type { Upstream } from '../upstream/conversation-client.ts';
import { createForwarder } from '../upstream/forward.ts';

export interface WorkspaceRoutesOptions {
  readonly upstream: Upstream;
  readonly logger: Logger;
}

export function registerWorkspaceRoutes(router: ConnectRouter, options: WorkspaceRoutesOptions): void {
  const { workspaces } = options.upstream;
  const forward = createForwarder(options.upstream, options.logger);
  serveService(router, WorkspaceService, {
    createWorkspace: (req, ctx) => forward('CreateWorkspace', ctx, (o) => workspaces.createWorkspace(req, o)),
    listWorkspaces: (req, ctx) => forward('ListWorkspaces', ctx, (o) => workspaces.listWorkspaces(req, o)),
    deleteWorkspace: (req, ctx) => forward('DeleteWorkspace', ctx, (o) => workspaces.deleteWorkspace(req, o)),
  });
}
