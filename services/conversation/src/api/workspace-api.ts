/**
 * `bedrock.v1.WorkspaceService`, served to web-bff beside the ConversationService: a user's
 * workspaces (workspaces/workspaces.ts). Another user's workspace is NOT_FOUND.
 */
import { Code, ConnectError, type ConnectRouter, type HandlerContext } from '@connectrpc/connect';
import { create } from '@bufbuild/protobuf';
import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import {
  CreateWorkspaceResponseSchema,
  DeleteWorkspaceResponseSchema,
  ListWorkspacesResponseSchema,
  WorkspaceSchema,
  WorkspaceService,
  type CreateWorkspaceRequest,
  type Workspace,
} from '@bedrock/contracts';
import type { WorkspaceRow } from '../store/workspace-store.ts';
import { DEFAULT_WORKSPACE, type Enforced, type WorkspaceSource, type Workspaces } from '../workspaces/workspaces.ts';
import { serveService } from '@bedrock/platform/server';

export interface WorkspaceApiOptions {
  readonly workspaces: Workspaces;
  /** The user web-bff acts for (conversation-api's check of the caller). */
  readonly userOf: (ctx: HandlerContext) => string;
  /** Deletes a user's conversation as DeleteConversation does; answers the ids deleted. */
  readonly deleteConversation: (ctx: HandlerContext, conversationId: string) => Promise<readonly string[]>;
}

/** A workspace as the API shows it: a quota only where the storage enforces it (0 otherwise). */
function workspaceToProto(row: WorkspaceRow, enforced: Enforced, usage?: { bytes: number; inodes: number }): Workspace {
  return create(WorkspaceSchema, {
    id: row.id,
    name: row.name,
    path: row.path,
    sizeBytes: BigInt(usage?.bytes ?? 0),
    inodes: BigInt(usage?.inodes ?? 0),
    quotaBytes: BigInt(enforced.bytes ? row.quotaBytes : 0),
    quotaInodes: BigInt(enforced.inodes ? row.quotaInodes : 0),
    createdAt: timestampFromDate(row.createdAt),
    lastUsedAt: timestampFromDate(row.lastUsedAt),
    isDefault: row.name === DEFAULT_WORKSPACE,
    origin: row.origin,
    conversations: row.conversations,
  });
}

function sourceOf(req: CreateWorkspaceRequest): WorkspaceSource {
  switch (req.source.case) {
    case 'gitUrl': {
      const url = req.source.value.trim();
      if (!url) throw new ConnectError('git_url is empty: give the URL of a repository', Code.InvalidArgument);
      return { kind: 'git', url };
    }
    case 'copyOf':
      return { kind: 'copy', of: req.source.value };
    default:
      return { kind: 'empty' };
  }
}

export function registerWorkspaceApi(router: ConnectRouter, options: WorkspaceApiOptions): void {
  const { workspaces, userOf } = options;
  serveService(router, WorkspaceService, {
    async createWorkspace(req, ctx) {
      const row = await workspaces.create(userOf(ctx), req.name.trim(), sourceOf(req), req.requestId || null);
      return create(CreateWorkspaceResponseSchema, { workspace: workspaceToProto(row, await workspaces.enforced()) });
    },

    async listWorkspaces(_req, ctx) {
      const { rows, usage, quota, enforced } = await workspaces.list(userOf(ctx));
      return create(ListWorkspacesResponseSchema, { workspaces: rows.map((r) => workspaceToProto(r, enforced, usage.get(r.id))), quota });
    },

    async deleteWorkspace(req, ctx) {
      const row = await workspaces.find(userOf(ctx), req.workspace);
      const deleted: string[] = [];
      if (req.withConversations) {
        for (const id of await workspaces.conversationIds(row.id)) deleted.push(...(await options.deleteConversation(ctx, id)));
      }
      await workspaces.remove(row);
      return create(DeleteWorkspaceResponseSchema, { workspaceId: row.id, deletedConversationIds: deleted });
    },
  });
}
