/**
 * The WorkspaceStorageService: the conversation service creates, removes and measures
 * workspaces' directories through any runner (all of a deployment share the root). The logic is
 * in ../workspaces/; this maps messages to it.
 */
import { create } from '@bufbuild/protobuf';
import { Code, ConnectError } from '@connectrpc/connect';
import type { ConnectRouter } from '@connectrpc/connect';
import {
  GetStorageInfoResponseSchema,
  GetWorkspaceUsageResponseSchema,
  PrepareWorkspaceResponseSchema,
  RemoveWorkspaceResponseSchema,
  WorkspaceStorageService,
  WorkspaceUsageSchema,
} from '@bedrock/contracts';
import type { PrepareWorkspaceRequest } from '@bedrock/contracts';
import type { WorkspaceSource, WorkspaceStorage } from '../workspaces/workspace-storage.ts';

function source(req: PrepareWorkspaceRequest): WorkspaceSource {
  switch (req.source.case) {
    case 'gitUrl':
      return { kind: 'git', url: req.source.value };
    case 'copyFromId':
      return { kind: 'copy', fromId: req.source.value };
    default:
      return { kind: 'empty' };
  }
}

export function registerWorkspaceStorageService(router: ConnectRouter, storage: () => WorkspaceStorage): void {
  router.service(WorkspaceStorageService, {
    async prepareWorkspace(req) {
      if (req.quotaBytes > BigInt(Number.MAX_SAFE_INTEGER)) throw new ConnectError('quota_bytes is too large', Code.InvalidArgument);
      const path = await storage().prepare({
        workspaceId: req.workspaceId,
        uid: req.uid,
        gid: req.gid,
        quotaBytes: Number(req.quotaBytes),
        source: source(req),
      });
      return create(PrepareWorkspaceResponseSchema, { path });
    },
    async removeWorkspace(req) {
      return create(RemoveWorkspaceResponseSchema, { removed: await storage().remove(req.workspaceId) });
    },
    async getWorkspaceUsage(req) {
      const usage = await storage().usage(req.workspaceIds);
      return create(GetWorkspaceUsageResponseSchema, {
        usage: usage.map((u) =>
          create(WorkspaceUsageSchema, { workspaceId: u.workspaceId, exists: u.exists, bytes: BigInt(u.bytes), inodes: BigInt(u.inodes) }),
        ),
      });
    },
    getStorageInfo() {
      const info = storage().info();
      return create(GetStorageInfoResponseSchema, { root: info.root, quotaMechanism: info.mechanism, description: info.description });
    },
  });
}
