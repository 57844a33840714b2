/**
 * The conversation service's client of the tool-runners' WorkspaceStorageService: every runner
 * mounts the same workspace root, so a call may go to any of them (BEDROCK_WORKSPACE_STORAGE_URL,
 * a host name standing for all its addresses). Every method of that service is idempotent, so a
 * call whose connection broke is simply sent again.
 */
import { Code, ConnectError, createClient } from '@connectrpc/connect';
import { WorkspaceStorageService } from '@bedrock/contracts';
import type {
  CheckWriteAccessResponse,
  CreateCheckpointRequest,
  CreateCheckpointResponse,
  GetCheckpointDiffResponse,
  GetStorageInfoResponse,
  PrepareWorkspaceRequest,
  WorkspaceCheckpoint,
  WorkspaceUsage,
} from '@bedrock/contracts';
import type { MessageInitShape } from '@bufbuild/protobuf';
import type { PrepareWorkspaceRequestSchema } from '@bedrock/contracts';
import { createBalancedTransport, serviceCredentialHeaders, type Logger } from '@bedrock/platform/server';

/**
 * What a failed storage call tells the user: the storage's own words for what they can act on
 * (a failed clone, a bad URL, a missing checkpoint: NOT_FOUND becomes FAILED_PRECONDITION, the
 * conversation being there), the storage's failure as INTERNAL (it answered: no retry helps),
 * else UNAVAILABLE (it did not answer: try again).
 */
export function storageFailure(err: unknown, what: string): ConnectError {
  const ce = ConnectError.from(err);
  if (ce.code === Code.FailedPrecondition || ce.code === Code.InvalidArgument || ce.code === Code.NotFound)
    return new ConnectError(`${what}: ${ce.rawMessage}`, ce.code === Code.NotFound ? Code.FailedPrecondition : ce.code);
  if (ce.code === Code.Internal)
    return new ConnectError(`${what}: the workspace storage (tool-runner) failed: ${ce.rawMessage}`, Code.Internal);
  return new ConnectError(
    `${what}: the workspace storage (tool-runner) did not answer (${Code[ce.code]}); try again shortly`,
    Code.Unavailable,
  );
}

export interface WorkspaceStorage {
  /** Makes the workspace's directory (idempotent); answers its path. */
  prepare(request: MessageInitShape<typeof PrepareWorkspaceRequestSchema>): Promise<string>;
  /** Removes it (idempotent). */
  remove(workspaceId: string): Promise<void>;
  usage(workspaceIds: readonly string[]): Promise<WorkspaceUsage[]>;
  info(): Promise<GetStorageInfoResponse>;
  /** Checkpoints (docs/workspaces.md, "Checkpoints"); FAILED_PRECONDITION where the storage is not btrfs. */
  createCheckpoint(
    request: Pick<CreateCheckpointRequest, 'workspaceId' | 'checkpointId' | 'quotaBytes' | 'maxCount' | 'maxBytes'>,
  ): Promise<CreateCheckpointResponse>;
  listCheckpoints(workspaceId: string): Promise<WorkspaceCheckpoint[]>;
  restoreCheckpoint(workspaceId: string, checkpointId: string, quotaBytes: bigint): Promise<void>;
  /** Removes the checkpoints named, or every one whose id starts with `prefix`. */
  removeCheckpoints(workspaceId: string, ids: readonly string[], prefix?: string): Promise<string[]>;
  checkpointDiff(workspaceId: string, from: string, to: string): Promise<GetCheckpointDiffResponse>;
  /** Who the tools run as in `path` and whether they may write it; `user` null for a host path. */
  writeAccess(path: string, user: { uid: number; gid: number } | null): Promise<CheckWriteAccessResponse>;
  close(): void;
}

export interface WorkspaceStorageClientOptions {
  /** Base URLs of the tool-runners' gRPC ports. */
  readonly targets: readonly (string | URL)[];
  /** This service's own token; the runners list it among their peers. */
  readonly serviceToken: string | undefined;
  /** Deadline of a prepare (a git clone can take minutes), ms. */
  readonly prepareTimeoutMs: number;
  /** Deadline of the other calls, ms. */
  readonly timeoutMs: number;
  readonly logger?: Logger;
}

export type { PrepareWorkspaceRequest };

export function createWorkspaceStorageClient(options: WorkspaceStorageClientOptions): WorkspaceStorage {
  const transport = createBalancedTransport({
    name: 'tool-runner',
    targets: options.targets,
    session: { pingIntervalMs: 30_000, pingIdleConnection: true },
    ...(options.logger ? { logger: options.logger } : {}),
  });
  const client = createClient(WorkspaceStorageService, transport);
  const headers = options.serviceToken ? serviceCredentialHeaders(options.serviceToken) : {};
  const call = { headers, timeoutMs: options.timeoutMs };
  return {
    async prepare(request) {
      return (await client.prepareWorkspace(request, { headers, timeoutMs: options.prepareTimeoutMs })).path;
    },
    async remove(workspaceId) {
      await client.removeWorkspace({ workspaceId }, call);
    },
    async usage(workspaceIds) {
      return (await client.getWorkspaceUsage({ workspaceIds: [...workspaceIds] }, call)).usage;
    },
    info: () => client.getStorageInfo({}, call),
    createCheckpoint: (request) => client.createCheckpoint(request, call),
    async listCheckpoints(workspaceId) {
      return (await client.listWorkspaceCheckpoints({ workspaceId }, call)).checkpoints;
    },
    async restoreCheckpoint(workspaceId, checkpointId, quotaBytes) {
      await client.restoreCheckpoint({ workspaceId, checkpointId, quotaBytes }, { headers, timeoutMs: options.prepareTimeoutMs });
    },
    async removeCheckpoints(workspaceId, ids, prefix) {
      const answer = await client.removeCheckpoints(
        { workspaceId, checkpointIds: [...ids], ...(prefix !== undefined ? { prefix, byPrefix: true } : {}) },
        call,
      );
      return answer.removedIds;
    },
    checkpointDiff: (workspaceId, from, to) =>
      client.getCheckpointDiff({ workspaceId, from, to }, { headers, timeoutMs: options.prepareTimeoutMs }),
    writeAccess: (path, user) => client.checkWriteAccess({ path, uid: user?.uid ?? 0, gid: user?.gid ?? 0 }, { headers, timeoutMs: 5000 }),
    close: () => transport.close(),
  };
}
