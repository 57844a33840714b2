/**
 * The workspace storage of a deployment (BEDROCK_WORKSPACE_ROOT, the same on every runner): prepares,
 * removes and measures workspaces ROOT/<id> (btrfs subvolumes with quotas, or plain directories);
 * idempotent, safe on two runners at once, never following a symlink (docs/workspaces.md#layout).
 */
import { randomBytes } from 'node:crypto';
import { chmod, chown, lstat, mkdir, readdir, realpath, rename } from 'node:fs/promises';
import type { Stats } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { Code, ConnectError } from '@connectrpc/connect';
import type { WorkspacesConfig } from '../config.ts';
import type { SandboxSettings } from '../sandbox/sandbox-settings.ts';
import type { Owner, StorageBackend } from './backend.ts';
import { plainBackend } from './backend.ts';
import { btrfsBackend, btrfsQuotaMode, btrfsQuotaProblem } from './btrfs-backend.ts';
import type { QuotaMode } from './btrfs-backend.ts';
import { filesystemType, mountImage } from './filesystem.ts';
import { errno } from './errno.ts';
import { cloneInto } from './git-clone.ts';
import { lastLines, run } from './run.ts';
import { checkGitUrl, checkOwner, checkWorkspaceId } from './validate.ts';
import { walk } from './walk.ts';
import { openCheckpoints } from './checkpoints.ts';
import { DEFAULT_SNAPSHOT_HELPER_PATH, openSnapshotHelper, snapshotHelperBeside } from './snapshot-helper.ts';
import type { Checkpoints } from './checkpoints.ts';
import { checkCheckpointId } from './checkpoints.ts';

export type WorkspaceSource =
  | { readonly kind: 'empty' }
  | { readonly kind: 'git'; readonly url: string }
  | { readonly kind: 'copy'; readonly fromId: string }
  /** A checkpoint of another workspace of the same uid (checkpoints.ts): a writable snapshot of it. */
  | { readonly kind: 'checkpoint'; readonly fromId: string; readonly checkpointId: string };

export interface PrepareRequest {
  readonly workspaceId: string;
  readonly uid: number;
  readonly gid: number;
  /** 0: none. */
  readonly quotaBytes: number;
  readonly source: WorkspaceSource;
}

export interface WorkspaceUsage {
  readonly workspaceId: string;
  readonly exists: boolean;
  readonly bytes: number;
  readonly inodes: number;
  /** False when the count stopped at its bound (figures are then lower bounds). */
  readonly complete: boolean;
}

export interface StorageInfo {
  readonly root: string;
  readonly mechanism: 'btrfs' | 'none';
  readonly description: string;
}

export interface WorkspaceStorage {
  info(): StorageInfo;
  /** Creates the workspace (or finds it) and answers its path. */
  prepare(request: PrepareRequest): Promise<string>;
  /** Removes it; false when there was nothing to remove. */
  remove(workspaceId: string): Promise<boolean>;
  usage(workspaceIds: readonly string[]): Promise<WorkspaceUsage[]>;
  /** The workspaces' checkpoints (btrfs only; elsewhere every call says why not). */
  readonly checkpoints: Checkpoints;
  close(): void;
}

export interface WorkspaceStorageOptions {
  readonly config: WorkspacesConfig;
  /** The runner's sandbox, for git clones as the owner; without it clones are refused. */
  readonly sandbox?: SandboxSettings;
  /** Start-up lines (what the root is on, what is enforced). */
  readonly log?: (level: 'info' | 'warn', message: string) => void;
  /** Leftovers of a killed rewind at least this old are recovered at start (default 60 s). */
  readonly checkpointRecoveryAgeMs?: number;
  /**
   * The snapshot helper (snapshot-helper.ts): default the one beside the build's sandbox helper;
   * `null`, or none there, takes snapshots with the `btrfs` command instead (slower: a process each).
   */
  readonly snapshotHelper?: string | null;
}

/** At most this many workspaces per usage call, and this many entries or this long counting each. */
export const USAGE_MAX_IDS = 1000;
export const WALK_MAX_ENTRIES = 1_000_000;
export const WALK_MAX_MS = 5000;

const STAGING = /^\.(new|del)-(ws-[0-9a-z]{26})-([0-9a-z]+)-[0-9a-f]+$/;

/**
 * Opens the storage: mounts the image when configured (failing start if it cannot), creates the
 * root, and picks the backend. A root that cannot be created leaves a storage that refuses every
 * call with the reason (the runner still runs tools).
 */
export async function openWorkspaceStorage(options: WorkspaceStorageOptions): Promise<WorkspaceStorage> {
  const config = options.config;
  const log = options.log ?? (() => undefined);
  // Only a root (or a filesystem) made here gets its owner and mode set: an existing directory
  // is an operator's, and is never changed.
  let fresh = false;
  if (config.image) {
    const mounted = await mountImage(config.image, config.imageSize, config.root);
    fresh = mounted.created;
    log('info', mounted.message);
  }
  let root = config.root;
  let backend: StorageBackend;
  let quotaMode: QuotaMode = 'full';
  const helperPath = options.snapshotHelper === undefined ? snapshotHelperBeside() : (options.snapshotHelper ?? undefined);
  let problem: string | undefined;
  try {
    if ((await mkdir(root, { recursive: true, mode: 0o711 })) !== undefined) fresh = true;
    root = await realpath(root);
    const st = await lstat(root);
    // Tools may enter their own workspace, never list the others or create anything here.
    const self = process.getuid?.() ?? 0; // root's when the runner is root, else the runner's own
    if (st.uid !== self || (st.mode & 0o7777) !== 0o711) {
      if (fresh) {
        if (self === 0) await chown(root, 0, 0);
        await chmod(root, 0o711);
      } else {
        log(
          'warn',
          `workspaces: ${root} belongs to uid ${st.uid} with mode ${(st.mode & 0o7777).toString(8)}: make it ${self === 0 ? "root's" : `uid ${self}'s`} and 0711, or tools may list or create entries beside their workspaces`,
        );
      }
    }
    // Without a view of their own (the runner cannot mount), the owners reach ROOT/<id> through
    // every directory above it; in a view the workspace is mounted at its path and they need not,
    // so a runner whose tools get views says nothing (no warning for what is not a problem here).
    for (let up = dirname(root); !options.sandbox?.views; up = dirname(up)) {
      if (((await lstat(up)).mode & 0o001) === 0) {
        log(
          'warn',
          `workspaces: ${up} is not searchable by other users (chmod o+x): where tools get no view of their own (the runner cannot mount), they cannot reach their workspaces under ${root}`,
        );
      }
      if (up === dirname(up)) break;
    }
    const fs = await filesystemType(root);
    const quotaProblem = fs.btrfs ? await btrfsQuotaProblem(root, helperPath) : undefined;
    if (fs.btrfs && !quotaProblem) {
      quotaMode = await btrfsQuotaMode(root);
      backend = btrfsBackend(root, quotaMode);
    } else {
      backend = plainBackend(
        fs.btrfs
          ? `the workspace root ${root} is on btrfs, but ${quotaProblem}: no disk quota per workspace`
          : `the workspace root ${root} is on ${fs.name}, not btrfs: no disk quota per workspace`,
      );
    }
  } catch (err) {
    problem = `the workspace root ${root} cannot be used (${(err as Error).message}): set BEDROCK_WORKSPACE_ROOT to a directory this runner may create and own`;
    backend = plainBackend(problem);
  }
  log(problem || backend.mechanism === 'none' ? 'warn' : 'info', `workspaces: ${backend.description}`);
  const inFlight = new Map<string, Promise<string>>();

  const usable = (): void => {
    if (problem) throw new ConnectError(problem, Code.FailedPrecondition);
  };

  /** ROOT/<id> when it is a directory; undefined when absent. */
  async function existing(path: string): Promise<Stats | undefined> {
    let st: Stats;
    try {
      st = await lstat(path);
    } catch (err) {
      if (errno(err) === 'ENOENT') return undefined;
      throw err;
    }
    if (!st.isDirectory()) throw new ConnectError(`${path} exists and is not a directory: remove it by hand`, Code.FailedPrecondition);
    return st;
  }

  function sameOwner(path: string, st: Stats, owner: Owner): string {
    if (st.uid !== owner.uid) {
      throw new ConnectError(`${path} exists and belongs to uid ${st.uid}, not ${owner.uid}`, Code.FailedPrecondition);
    }
    return path;
  }

  async function discard(path: string, owner: Owner): Promise<void> {
    try {
      await backend.remove(path, owner);
    } catch (err) {
      log('warn', `workspaces: could not remove ${path} (removed at the next start): ${(err as Error).message}`);
    }
  }

  async function create(request: PrepareRequest): Promise<string> {
    const path = join(root, request.workspaceId);
    const owner = { uid: request.uid, gid: request.gid };
    const found = await existing(path);
    if (found) return sameOwner(path, found, owner);
    let source: string | undefined;
    if (request.source.kind === 'checkpoint') {
      const st = await existing(join(root, request.source.fromId));
      if (st && st.uid !== owner.uid)
        throw new ConnectError(`the workspace to copy, ${request.source.fromId}, belongs to another uid`, Code.FailedPrecondition);
      source = await checkpoints.path(request.source.fromId, request.source.checkpointId);
      if ((await lstat(source)).uid !== owner.uid)
        throw new ConnectError(`the checkpoint to copy belongs to another uid`, Code.FailedPrecondition);
    }
    if (request.source.kind === 'copy') {
      source = join(root, request.source.fromId);
      const st = await existing(source);
      if (!st) throw new ConnectError(`the workspace to copy, ${request.source.fromId}, does not exist`, Code.NotFound);
      if (st.uid !== owner.uid)
        throw new ConnectError(`the workspace to copy, ${request.source.fromId}, belongs to another uid`, Code.FailedPrecondition);
    }
    const staging = join(root, `.new-${request.workspaceId}-${Date.now().toString(36)}-${randomBytes(4).toString('hex')}`);
    try {
      // From a workspace with checkpoints (or one of them): inside its family qgroup (checkpoints.ts).
      const familyOf = request.source.kind === 'copy' || request.source.kind === 'checkpoint' ? request.source.fromId : undefined;
      const snapshotted = source
        ? (familyOf !== undefined && (await checkpoints.snapshotIntoFamily(familyOf, source, staging, request.workspaceId))) ||
          (await backend.snapshot(source, staging))
        : false;
      if (!snapshotted) await backend.createEmpty(staging);
      // A snapshot of the owner's workspace is theirs already, most often 0700: no write inside it
      // (a copy inside a family at its quota could not make one).
      const top = await lstat(staging);
      try {
        if (top.uid !== owner.uid || top.gid !== owner.gid) await chown(staging, owner.uid, owner.gid);
      } catch (err) {
        if (errno(err) !== 'EPERM') throw err;
        throw new ConnectError(
          `this runner (uid ${process.getuid?.()}) cannot give a workspace to uid ${owner.uid}: run it as root (CAP_CHOWN)`,
          Code.FailedPrecondition,
        );
      }
      if ((top.mode & 0o7777) !== 0o700) await chmod(staging, 0o700);
      if (request.quotaBytes > 0) await backend.setQuota(staging, request.quotaBytes);
      if (request.source.kind === 'git') {
        if (!options.sandbox) throw new ConnectError('this runner cannot clone: it has no sandbox', Code.FailedPrecondition);
        await cloneInto(options.sandbox, { url: request.source.url, dir: staging, owner, timeoutMs: config.cloneTimeout });
      }
      if (source && !snapshotted) {
        // As the owner, so that it reads only what the owner may and writes under their quota;
        // from inside the root (entered as root), naming both relative to it, so the owner needs
        // no search permission on the directories above the root (removeTree does the same).
        const cp = await run(['cp', '-a', '--reflink=auto', '-T', '--', basename(source), basename(staging)], {
          ...owner,
          cwd: root,
          timeoutMs: config.cloneTimeout,
        });
        if (cp.code !== 0)
          throw new ConnectError(
            `copying ${request.source.kind === 'copy' || request.source.kind === 'checkpoint' ? request.source.fromId : ''} failed: ${lastLines(cp.stderr, 4)}`,
            Code.FailedPrecondition,
          );
        await chmod(staging, 0o700);
      }
      // Publish. Another runner may have published the same id meanwhile: then its workspace
      // stands (a rename never replaces a subvolume or a non-empty directory; on plain
      // directories an empty one may replace an identical empty one) and ours goes.
      const raced = await existing(path);
      if (!raced) {
        try {
          await rename(staging, path);
          return path;
        } catch (err) {
          if (errno(err) !== 'ENOTEMPTY' && errno(err) !== 'EEXIST') throw err;
        }
      }
      await discard(staging, owner);
      return sameOwner(path, (await existing(path))!, owner);
    } catch (err) {
      if ((await existing(staging).catch(() => undefined)) !== undefined) await discard(staging, owner);
      throw err;
    }
  }

  /** Leftovers of a runner that died while preparing or removing (older than any clone may take). */
  async function sweep(): Promise<void> {
    const cutoff = Date.now() - config.cloneTimeout - 3_600_000;
    for (const name of await readdir(root).catch(() => [])) {
      const m = STAGING.exec(name);
      if (!m || parseInt(m[3]!, 36) > cutoff) continue;
      const path = join(root, name);
      const st = await lstat(path).catch(() => undefined);
      if (st?.isDirectory()) await discard(path, { uid: st.uid, gid: st.gid });
    }
  }
  const snapshots = backend.mechanism === 'btrfs' && !problem && helperPath ? openSnapshotHelper(helperPath) : undefined;
  if (backend.mechanism === 'btrfs' && !problem && !helperPath && options.snapshotHelper !== null)
    log('warn', `the snapshot helper is not built (${DEFAULT_SNAPSHOT_HELPER_PATH}): checkpoints use the btrfs command, a process each`);
  const checkpoints = openCheckpoints({
    root,
    btrfs: backend.mechanism === 'btrfs' && !problem ? true : backend.description,
    quotaMode,
    deleteSubvolume: (path) => backend.remove(path, { uid: 0, gid: 0 }),
    log,
    ...(snapshots ? { snapshots } : {}),
  });
  if (!problem) await sweep();
  // A rewind a killed runner left is finished or undone (a minute old: not one another runner is doing now).
  if (!problem) await checkpoints.recover(options.checkpointRecoveryAgeMs ?? 60_000);
  if (!problem && backend.mechanism === 'btrfs') await run(['btrfs', 'qgroup', 'clear-stale', root], { timeoutMs: 30_000 });

  return {
    info: () => ({ root, mechanism: backend.mechanism, description: backend.description }),

    async prepare(request) {
      checkWorkspaceId(request.workspaceId);
      checkOwner(request.uid, request.gid, config.toolUids);
      if (request.source.kind === 'git') checkGitUrl(request.source.url);
      if (request.source.kind === 'checkpoint') {
        checkWorkspaceId(request.source.fromId, 'copy_from_checkpoint.workspace_id');
        checkCheckpointId(request.source.checkpointId, 'copy_from_checkpoint.checkpoint_id');
        if (request.source.fromId === request.workspaceId)
          throw new ConnectError('copy_from_checkpoint names the workspace itself', Code.InvalidArgument);
      }
      if (request.source.kind === 'copy') {
        checkWorkspaceId(request.source.fromId, 'copy_from_id');
        if (request.source.fromId === request.workspaceId)
          throw new ConnectError('copy_from_id is the workspace itself', Code.InvalidArgument);
      }
      usable();
      // The same id twice at once here: one build, both answered.
      const owner = { uid: request.uid, gid: request.gid };
      const running = inFlight.get(request.workspaceId);
      if (running) return sameOwner(await running, (await existing(await running))!, owner);
      const started = Date.now();
      const promise = create(request)
        .then((path) => {
          log(
            'info',
            `workspaces: ${request.workspaceId} ready for uid ${request.uid} (${request.source.kind}, ${Date.now() - started} ms)`,
          );
          return path;
        })
        .finally(() => inFlight.delete(request.workspaceId));
      inFlight.set(request.workspaceId, promise);
      return promise;
    },

    async remove(workspaceId) {
      checkWorkspaceId(workspaceId);
      usable();
      const path = join(root, workspaceId);
      const st = await existing(path);
      if (!st) {
        await checkpoints.removeAll(workspaceId);
        return false;
      }
      // Out of the way first, atomically: a second remover (or a prepare) finds nothing.
      const doomed = join(root, `.del-${workspaceId}-${Date.now().toString(36)}-${randomBytes(4).toString('hex')}`);
      try {
        await rename(path, doomed);
      } catch (err) {
        if (errno(err) === 'ENOENT') return false;
        throw err;
      }
      await backend.remove(doomed, { uid: st.uid, gid: st.gid });
      await checkpoints.removeAll(workspaceId);
      log('info', `workspaces: ${workspaceId} removed`);
      return true;
    },

    async usage(workspaceIds) {
      if (workspaceIds.length > USAGE_MAX_IDS)
        throw new ConnectError(`at most ${USAGE_MAX_IDS} workspace_ids per call`, Code.InvalidArgument);
      for (const id of workspaceIds) checkWorkspaceId(id, 'workspace_ids[]');
      usable();
      const answers: WorkspaceUsage[] = [];
      for (const workspaceId of workspaceIds) {
        const path = join(root, workspaceId);
        if (!(await existing(path))) {
          answers.push({ workspaceId, exists: false, bytes: 0, inodes: 0, complete: true });
          continue;
        }
        // Under simple quotas the family's bytes are what the quota bounds (checkpoints.ts).
        const quotaBytes = (await checkpoints.familyBytes(workspaceId)) ?? (await backend.usedBytes(path));
        const counted = await walk(path, {
          bytes: quotaBytes === undefined,
          maxEntries: WALK_MAX_ENTRIES,
          deadline: Date.now() + WALK_MAX_MS,
        });
        answers.push({
          workspaceId,
          exists: true,
          bytes: quotaBytes ?? counted.bytes,
          inodes: counted.entries,
          complete: counted.complete,
        });
      }
      return answers;
    },

    checkpoints,

    close() {
      backend.close();
      snapshots?.close();
    },
  };
}
