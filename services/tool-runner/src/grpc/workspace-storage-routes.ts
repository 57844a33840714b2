/**
 * The WorkspaceStorageService: the conversation service creates, removes and measures
 * workspaces' directories through any runner (all of a deployment share the root). The logic is
 * in ../workspaces/; this maps messages to it.
 */
import { create } from '@bufbuild/protobuf';
import { Code, ConnectError } from '@connectrpc/connect';
import type { ConnectRouter } from '@connectrpc/connect';
import {
  CreateCheckpointResponseSchema,
  GetCheckpointDiffResponseSchema,
  ListWorkspaceCheckpointsResponseSchema,
  RemoveCheckpointsResponseSchema,
  RestoreCheckpointResponseSchema,
  WorkspaceCheckpointSchema,
  WorkspaceFileChangeSchema,
  CheckWriteAccessResponseSchema,
  GetStorageInfoResponseSchema,
  GetWorkspaceUsageResponseSchema,
  PrepareWorkspaceResponseSchema,
  RemoveWorkspaceResponseSchema,
  WorkspaceStorageService,
  WorkspaceUsageSchema,
} from '@bedrock/contracts';
import type { PrepareWorkspaceRequest } from '@bedrock/contracts';
import type { WorkspaceSource, WorkspaceStorage } from '../workspaces/workspace-storage.ts';
import { checkWriteAccess, WriteAccessError } from '../workspaces/write-access.ts';
import type { ToolUser } from '../sandbox/sandbox-settings.ts';
import { serveService } from '@bedrock/platform/server';

function source(req: PrepareWorkspaceRequest): WorkspaceSource {
  switch (req.source.case) {
    case 'gitUrl':
      return { kind: 'git', url: req.source.value };
    case 'copyFromId':
      return { kind: 'copy', fromId: req.source.value };
    case 'copyFromCheckpoint':
      return { kind: 'checkpoint', fromId: req.source.value.workspaceId, checkpointId: req.source.value.checkpointId };
    default:
      return { kind: 'empty' };
  }
}

function bytes(value: bigint, field: string): number {
  if (value > BigInt(Number.MAX_SAFE_INTEGER)) throw new ConnectError(`${field} is too large`, Code.InvalidArgument);
  return Number(value);
}

export function registerWorkspaceStorageService(
  router: ConnectRouter,
  storage: () => WorkspaceStorage,
  /** The tools' user for host paths (the sandbox settings'); null: tools run as this process. */
  toolUser: ToolUser | null,
  /** Whether workspace runs get views (the sandbox settings'): their workspace is mounted at its path. */
  views = false,
): void {
  serveService(router, WorkspaceStorageService, {
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
    async createCheckpoint(req) {
      const made = await storage().checkpoints.create(req.workspaceId, req.checkpointId, bytes(req.quotaBytes, 'quota_bytes'), {
        maxCount: req.maxCount,
        maxBytes: bytes(req.maxBytes, 'max_bytes'),
      });
      return create(CreateCheckpointResponseSchema, { created: made.created, removedIds: made.removed });
    },
    async listWorkspaceCheckpoints(req) {
      const list = await storage().checkpoints.list(req.workspaceId);
      return create(ListWorkspaceCheckpointsResponseSchema, {
        checkpoints: list.map((c) =>
          create(WorkspaceCheckpointSchema, {
            checkpointId: c.id,
            createdAtMs: BigInt(Math.round(c.createdMs)),
            exclusiveBytes: BigInt(c.exclusiveBytes),
          }),
        ),
      });
    },
    async restoreCheckpoint(req) {
      await storage().checkpoints.restore(req.workspaceId, req.checkpointId, bytes(req.quotaBytes, 'quota_bytes'));
      return create(RestoreCheckpointResponseSchema, {});
    },
    async removeCheckpoints(req) {
      const removed = await storage().checkpoints.remove(req.workspaceId, req.checkpointIds, req.byPrefix ? req.prefix : undefined);
      return create(RemoveCheckpointsResponseSchema, { removedIds: removed });
    },
    async getCheckpointDiff(req) {
      const diff = await storage().checkpoints.diff(req.workspaceId, req.from, req.to);
      return create(GetCheckpointDiffResponseSchema, {
        complete: diff.complete,
        changes: diff.changes.map((c) => create(WorkspaceFileChangeSchema, c)),
      });
    },
    async checkWriteAccess(req) {
      try {
        const found = await checkWriteAccess(req.path, req.uid ? { uid: req.uid, gid: req.gid || req.uid } : null, toolUser, views);
        return create(CheckWriteAccessResponseSchema, found);
      } catch (err) {
        if (err instanceof WriteAccessError)
          throw new ConnectError(err.message, req.path.startsWith('/') ? Code.FailedPrecondition : Code.InvalidArgument);
        throw err;
      }
    },
    getStorageInfo() {
      const info = storage().info();
      return create(GetStorageInfoResponseSchema, { root: info.root, quotaMechanism: info.mechanism, description: info.description });
    },
  });
}
