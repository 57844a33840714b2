/**
 * The public `bedrock.v1.CheckpointService`: a conversation's checkpoints, rewinds and workspace
 * diffs, forwarded to the conversation service as the caller (docs/workspaces.md, "Checkpoints").
 */
import type { ConnectRouter } from '@connectrpc/connect';
import { CheckpointService } from '@bedrock/contracts';
import { serveService, type Logger } from '@bedrock/platform/server';
import type { Upstream } from '../upstream/conversation-client.ts';
import { createForwarder } from '../upstream/forward.ts';

export interface CheckpointRoutesOptions {
  readonly upstream: Upstream;
  readonly logger: Logger;
}

export function registerCheckpointRoutes(router: ConnectRouter, options: CheckpointRoutesOptions): void {
  const { checkpoints } = options.upstream;
  const forward = createForwarder(options.upstream, options.logger);
  serveService(router, CheckpointService, {
    listCheckpoints: (req, ctx) => forward('ListCheckpoints', ctx, (o) => checkpoints.listCheckpoints(req, o)),
    rewindConversation: (req, ctx) => forward('RewindConversation', ctx, (o) => checkpoints.rewindConversation(req, o)),
    getWorkspaceDiff: (req, ctx) => forward('GetWorkspaceDiff', ctx, (o) => checkpoints.getWorkspaceDiff(req, o)),
  });
}
