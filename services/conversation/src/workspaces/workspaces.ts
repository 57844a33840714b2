/**
 * Workspaces (docs/workspaces.md): the records here, the files on the tool-runners' storage.
 * A workspace is made by the storage first and marked ready after, so a crash between the two
 * leaves a `preparing` row that the next call meeting it finishes (the storage's prepare is
 * idempotent). A conversation is created in one of its owner's workspaces, at a relative
 * directory inside it; an absolute host path only where the deployment allows host paths.
 */
import { randomBytes } from 'node:crypto';
import { posix } from 'node:path';
import { Code, ConnectError } from '@connectrpc/connect';
import { rejectionError } from '@bedrock/contracts';
import type { UidRange } from '@bedrock/platform/config';
import type { Logger } from '@bedrock/platform/server';
import type { ConversationWorkspace } from '../store/conversation-store.ts';
import { UidRangeExhaustedError, type WorkspaceRow, type WorkspaceStore } from '../store/workspace-store.ts';
import { storageFailure, type WorkspaceStorage } from './storage-client.ts';

export const DEFAULT_WORKSPACE = 'default';
const NAME_PATTERN = /^[a-z0-9][a-z0-9._-]{0,62}$/;
const ID_ALPHABET = '0123456789abcdefghijklmnopqrstuvwxyz';
/** Longest relative working directory inside a workspace. */
const MAX_SUBDIR_CHARS = 1024;
/** The words every refused host path gets, whatever the path: nothing about it is revealed. */
export const HOST_PATHS_OFF =
  'host paths are off on this deployment: create the conversation in one of your workspaces (leave the directory out for your default workspace, or name a workspace; bedrock ws ls lists them)';

export type WorkspaceSource =
  | { readonly kind: 'empty' }
  | { readonly kind: 'git'; readonly url: string }
  | { readonly kind: 'copy'; readonly of: string }
  /** A checkpoint of one of the owner's workspaces (a fork with files): its files as they were then. */
  | { readonly kind: 'checkpoint'; readonly of: string; readonly checkpointId: string };

export interface WorkspacesOptions {
  readonly store: WorkspaceStore;
  /** Absent: this deployment has no workspace storage (BEDROCK_WORKSPACE_STORAGE_URL unset). */
  readonly storage: WorkspaceStorage | undefined;
  readonly toolUids: UidRange;
  readonly quotaBytes: number;
  readonly quotaInodes: number;
  /** Workspaces per user; 0: no limit. */
  readonly maxPerUser: number;
  readonly hostPaths: boolean;
  readonly logger: Logger;
}

/** Where a new conversation runs. */
export interface Placement {
  readonly cwd: string;
  /** Null: an absolute host path (host paths on). */
  readonly workspace: ConversationWorkspace | null;
}

/** Which of a workspace's quotas the storage enforces (btrfs: bytes; none: neither). */
export interface Enforced {
  readonly bytes: boolean;
  readonly inodes: boolean;
}

export interface Workspaces {
  readonly hostPaths: boolean;
  create(ownerId: string, name: string, source: WorkspaceSource, requestId: string | null): Promise<WorkspaceRow>;
  list(
    ownerId: string,
  ): Promise<{ rows: WorkspaceRow[]; usage: Map<string, { bytes: number; inodes: number }>; quota: string; enforced: Enforced }>;
  /** What the storage enforces now (nothing when it does not answer). */
  enforced(): Promise<Enforced>;
  /** By name or id, of this owner; NOT_FOUND otherwise. */
  find(ownerId: string, nameOrId: string): Promise<WorkspaceRow>;
  /** Removes the record and the files; the caller deleted its conversations first. */
  remove(row: WorkspaceRow): Promise<void>;
  /** Removes the files of workspaces whose records are already gone (a deleted user's). */
  removeFiles(ids: readonly string[]): Promise<void>;
  /** The user-initiated conversations created in a workspace. */
  conversationIds(workspaceId: string): Promise<string[]>;
  /** Where CreateConversation's `workspace` and `cwd` put a conversation. */
  place(ownerId: string, workspace: string, cwd: string): Promise<Placement>;
}

const NOTHING_ENFORCED: Enforced = { bytes: false, inodes: false };

/** btrfs qgroups limit bytes (a file's metadata counts against them); no backend limits inodes yet. */
function enforcedBy(mechanism: string): Enforced {
  return { bytes: mechanism === 'btrfs', inodes: false };
}

export function newWorkspaceId(): string {
  const bytes = randomBytes(26);
  return `ws-${Array.from(bytes, (b) => ID_ALPHABET[b % 36]).join('')}`;
}

/** Why `name` is not a workspace name, or null. */
export function workspaceNameProblem(name: string): string | null {
  if (NAME_PATTERN.test(name)) return null;
  return `workspace name ${JSON.stringify(name)} is not valid: use 1 to 63 characters of a-z, 0-9, '.', '_' and '-', starting with a letter or digit`;
}

/** The normalized relative directory `cwd` names inside a workspace ('' for its top), or why it cannot be one. */
export function subdirOf(cwd: string): { dir: string } | { problem: string } {
  const trimmed = cwd.trim();
  if (trimmed.length > MAX_SUBDIR_CHARS) return { problem: `cwd is too long (at most ${MAX_SUBDIR_CHARS} characters)` };
  if (trimmed.includes('\0')) return { problem: 'cwd contains a NUL character' };
  if (posix.isAbsolute(trimmed)) return { problem: 'an absolute path is not a directory inside a workspace' };
  const parts = trimmed.split('/').filter((p) => p !== '' && p !== '.');
  if (parts.includes('..')) return { problem: `cwd ${JSON.stringify(trimmed)} leaves the workspace ('..'): give a directory inside it` };
  return { dir: parts.join('/') };
}

export function createWorkspaces(options: WorkspacesOptions): Workspaces {
  const { store } = options;

  function requireStorage(): WorkspaceStorage {
    if (!options.storage)
      throw new ConnectError(
        'this deployment has no workspace storage (BEDROCK_WORKSPACE_STORAGE_URL is unset): ask the operator to configure the tool-runners as workspace storage',
        Code.FailedPrecondition,
      );
    return options.storage;
  }

  function originOf(source: WorkspaceSource, copied?: WorkspaceRow): string {
    switch (source.kind) {
      case 'empty':
        return 'empty';
      case 'git':
        return `git ${source.url}`;
      case 'copy':
        return `copy of ${copied?.name ?? source.of}`;
      case 'checkpoint':
        return `checkpoint of ${copied?.name ?? source.of}`;
    }
  }

  /** Has the storage make the directory of a `preparing` row and marks it ready; on failure removes the row. */
  async function prepare(row: WorkspaceRow, source: WorkspaceSource, copyFrom?: WorkspaceRow): Promise<WorkspaceRow> {
    const storage = requireStorage();
    let uid: number;
    try {
      uid = await store.toolUid(row.ownerId, options.toolUids);
    } catch (err) {
      if (err instanceof UidRangeExhaustedError) throw new ConnectError(err.message, Code.ResourceExhausted);
      throw err;
    }
    let path: string;
    try {
      path = await storage.prepare({
        workspaceId: row.id,
        uid,
        gid: uid,
        quotaBytes: BigInt(row.quotaBytes),
        quotaInodes: BigInt(row.quotaInodes),
        source:
          source.kind === 'git'
            ? { case: 'gitUrl', value: source.url }
            : copyFrom && source.kind === 'checkpoint'
              ? { case: 'copyFromCheckpoint', value: { workspaceId: copyFrom.id, checkpointId: source.checkpointId } }
              : copyFrom
                ? { case: 'copyFromId', value: copyFrom.id }
                : { case: undefined },
      });
    } catch (err) {
      // Nothing half made stays: the storage removed what it started, and the row goes too.
      await storage.remove(row.id).catch(() => undefined);
      await store.remove(row.id);
      throw storageFailure(err, `workspace ${row.name} could not be made`);
    }
    const ready = await store.markReady(row.id, path);
    if (!ready) throw new ConnectError(`workspace ${row.name} was deleted while it was being made`, Code.Aborted);
    options.logger.info({ workspace_id: row.id, owner: row.ownerId, origin: row.origin }, 'workspace created');
    return { ...ready, conversations: row.conversations };
  }

  async function create(ownerId: string, name: string, source: WorkspaceSource, requestId: string | null): Promise<WorkspaceRow> {
    const problem = workspaceNameProblem(name);
    if (problem) throw new ConnectError(problem, Code.InvalidArgument);
    requireStorage();
    const existing = await store.find(ownerId, name);
    if (existing) {
      // A retry of the same request answers what the first made (finishing it after a crash).
      if (requestId && existing.requestId === requestId) {
        if (existing.state === 'ready') return existing;
        return prepare(
          existing,
          source,
          source.kind === 'copy' || source.kind === 'checkpoint' ? await find(ownerId, source.of) : undefined,
        );
      }
      throw new ConnectError(`you already have a workspace named ${name}: choose another name`, Code.AlreadyExists);
    }
    let copyFrom: WorkspaceRow | undefined;
    if (source.kind === 'copy' || source.kind === 'checkpoint') {
      copyFrom = await find(ownerId, source.of);
      if (copyFrom.state !== 'ready') throw new ConnectError(`workspace ${copyFrom.name} is still being made`, Code.FailedPrecondition);
    }
    if (options.maxPerUser > 0 && (await store.count(ownerId)) >= options.maxPerUser) {
      throw rejectionError(
        {
          code: 'limit_reached',
          message: `you have ${options.maxPerUser} workspaces, the most one user may have (BEDROCK_MAX_WORKSPACES): delete one first (bedrock ws rm NAME)`,
        },
        Code.ResourceExhausted,
      );
    }
    const row = await store.insert({
      id: newWorkspaceId(),
      ownerId,
      name,
      origin: originOf(source, copyFrom),
      quotaBytes: options.quotaBytes,
      quotaInodes: options.quotaInodes,
      requestId,
    });
    if (!row) throw new ConnectError(`you already have a workspace named ${name}: choose another name`, Code.AlreadyExists);
    return prepare(row, source, copyFrom);
  }

  async function find(ownerId: string, nameOrId: string): Promise<WorkspaceRow> {
    const key = nameOrId.trim();
    if (!key) throw new ConnectError('workspace is required: its name or id', Code.InvalidArgument);
    const row = key.length <= 200 ? await store.find(ownerId, key) : null;
    if (!row) throw new ConnectError(`workspace ${JSON.stringify(key)} not found (bedrock ws ls lists yours)`, Code.NotFound);
    return row;
  }

  async function ready(row: WorkspaceRow): Promise<WorkspaceRow> {
    // A row a crash left half made: its storage call is idempotent, so finish it now.
    return row.state === 'ready' ? row : prepare(row, { kind: 'empty' });
  }

  return {
    hostPaths: options.hostPaths,
    create,
    find,

    async list(ownerId) {
      const rows = await store.list(ownerId);
      const usage = new Map<string, { bytes: number; inodes: number }>();
      let quota = 'no workspace storage on this deployment';
      let enforced: Enforced = NOTHING_ENFORCED;
      if (options.storage) {
        try {
          const [measured, info] = await Promise.all([
            rows.length ? options.storage.usage(rows.map((r) => r.id)) : Promise.resolve([]),
            options.storage.info(),
          ]);
          for (const u of measured) if (u.exists) usage.set(u.workspaceId, { bytes: Number(u.bytes), inodes: Number(u.inodes) });
          quota = info.description;
          enforced = enforcedBy(info.quotaMechanism);
        } catch (err) {
          options.logger.warn({ err }, 'workspace usage unavailable');
          quota = 'the workspace storage did not answer: sizes unknown';
        }
      }
      return { rows, usage, quota, enforced };
    },

    async enforced() {
      const info = await options.storage?.info().catch(() => undefined);
      return info ? enforcedBy(info.quotaMechanism) : NOTHING_ENFORCED;
    },

    async remove(row) {
      const storage = requireStorage();
      if (!(await store.remove(row.id))) {
        throw new ConnectError(
          `workspace ${row.name} still has conversations: delete them first, or delete it with them (bedrock ws rm ${row.name} --with-conversations)`,
          Code.FailedPrecondition,
        );
      }
      try {
        await storage.remove(row.id);
      } catch (err) {
        // The record is gone; the files are removed by the next call that names the id (the
        // storage's remove is idempotent), so say so rather than pretend.
        options.logger.error({ err, workspace_id: row.id }, 'workspace files not removed');
        throw storageFailure(err, `workspace ${row.name} was deleted but its files were not removed yet`);
      }
      options.logger.info({ workspace_id: row.id, owner: row.ownerId }, 'workspace deleted');
    },

    conversationIds: (id) => store.conversationIds(id),

    async removeFiles(ids) {
      if (!options.storage) return;
      for (const id of ids) {
        await options.storage
          .remove(id)
          .catch((err: unknown) => options.logger.error({ err, workspace_id: id }, 'workspace files not removed'));
      }
    },

    async place(ownerId, workspace, cwd) {
      const given = cwd.trim();
      if (!workspace.trim() && posix.isAbsolute(given)) {
        // Decided before the path is looked at: a refusal says nothing about it.
        if (!options.hostPaths) throw new ConnectError(HOST_PATHS_OFF, Code.PermissionDenied);
        return { cwd: given, workspace: null };
      }
      const sub = subdirOf(given);
      if ('problem' in sub) throw new ConnectError(sub.problem, Code.InvalidArgument);
      let row: WorkspaceRow;
      if (workspace.trim()) {
        row = await ready(await find(ownerId, workspace));
      } else {
        const existing = await store.find(ownerId, DEFAULT_WORKSPACE);
        row = existing ? await ready(existing) : await createDefault(ownerId);
      }
      const uid = await store.toolUid(ownerId, options.toolUids);
      return {
        cwd: sub.dir ? posix.join(row.path, sub.dir) : row.path,
        workspace: { id: row.id, name: row.name, path: row.path, toolUid: uid },
      };
    },
  };

  async function createDefault(ownerId: string): Promise<WorkspaceRow> {
    try {
      return await create(ownerId, DEFAULT_WORKSPACE, { kind: 'empty' }, null);
    } catch (err) {
      // Two first conversations at once: the other made it.
      const existing = ConnectError.from(err).code === Code.AlreadyExists ? await store.find(ownerId, DEFAULT_WORKSPACE) : null;
      if (existing) return ready(existing);
      throw err;
    }
  }
}
