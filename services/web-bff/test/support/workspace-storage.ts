/**
 * A test double of the tool-runner's WorkspaceStorageService (bedrock.internal.v1) over a real
 * temporary directory: ROOT/ID per workspace. Strict where the runner must be: only the peers
 * given may call (service tokens), ids are `ws-` and 26 of [0-9a-z], uid and gid are never 0,
 * a git URL is https://, ssh:// or git:// (and "clones" only the repositories the test
 * registered; any other fails as a clone would), a copy needs an existing source, and every
 * method is idempotent (prepare of an existing workspace answers its path; remove of a missing
 * one answers removed=false). Every call is recorded.
 */
import { cp, mkdir, readdir, lstat, rm, stat, writeFile } from 'node:fs/promises';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { Code, ConnectError } from '@connectrpc/connect';
import { WorkspaceStorageService } from '@bedrock/contracts';
import { createLogger, serviceAuthInterceptor, startGrpcServer, type TokenEntry } from '@bedrock/platform/server';

const ID = /^ws-[0-9a-z]{26}$/;
const GIT_URL = /^(https|ssh|git):\/\/[^\s]+$/;

export interface StorageCall {
  readonly method: 'prepare' | 'remove' | 'usage' | 'info';
  readonly workspaceIds: readonly string[];
  readonly uid?: number;
  readonly source?: string;
}

export interface TestWorkspaceStorage {
  readonly url: string;
  readonly root: string;
  readonly calls: StorageCall[];
  close(): Promise<void>;
}

export interface TestWorkspaceStorageOptions {
  /** The callers accepted (the conversation service's token). */
  readonly peers: readonly TokenEntry[];
  /** Repositories a `git_url` may name: the files (path: content) a clone of each gives. */
  readonly gitRepos?: Readonly<Record<string, Readonly<Record<string, string>>>>;
}

function checkId(id: string): void {
  if (!ID.test(id))
    throw new ConnectError(`workspace_id ${JSON.stringify(id)} is not ws- and 26 characters of [0-9a-z]`, Code.InvalidArgument);
}

async function exists(path: string): Promise<boolean> {
  try {
    return (await stat(path)).isDirectory();
  } catch {
    return false;
  }
}

/** Bytes of regular files and entries (inodes) under `dir`, the directory itself included. */
async function measure(dir: string): Promise<{ bytes: number; inodes: number }> {
  let bytes = 0;
  let inodes = 1;
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) {
      const inner = await measure(path);
      bytes += inner.bytes;
      inodes += inner.inodes;
    } else {
      bytes += (await lstat(path)).size;
      inodes += 1;
    }
  }
  return { bytes, inodes };
}

export async function startTestWorkspaceStorage(options: TestWorkspaceStorageOptions): Promise<TestWorkspaceStorage> {
  const root = mkdtempSync(join(tmpdir(), 'bedrock-ws-storage-'));
  const calls: StorageCall[] = [];
  const logger = createLogger({ service: 'workspace-storage-double', level: 'silent' });
  const server = await startGrpcServer({
    host: '127.0.0.1',
    port: 0,
    logger,
    interceptors: [serviceAuthInterceptor({ peers: options.peers, logger })],
    routes: (router) =>
      router.service(WorkspaceStorageService, {
        async prepareWorkspace(req) {
          checkId(req.workspaceId);
          calls.push({
            method: 'prepare',
            workspaceIds: [req.workspaceId],
            uid: req.uid,
            source: req.source.case ? `${req.source.case} ${req.source.value}` : 'empty',
          });
          if (req.uid === 0 || req.gid === 0) throw new ConnectError('uid and gid must not be 0 (root)', Code.InvalidArgument);
          const dir = join(root, req.workspaceId);
          if (await exists(dir)) return { path: dir };
          switch (req.source.case) {
            case 'gitUrl': {
              const url = req.source.value;
              if (!GIT_URL.test(url))
                throw new ConnectError(`git URL ${JSON.stringify(url)}: use https://, ssh:// or git://`, Code.InvalidArgument);
              const files = options.gitRepos?.[url];
              if (!files) throw new ConnectError(`git clone ${url} failed: repository not found`, Code.FailedPrecondition);
              await mkdir(dir);
              for (const [path, content] of Object.entries(files)) {
                await mkdir(dirname(join(dir, path)), { recursive: true });
                await writeFile(join(dir, path), content);
              }
              break;
            }
            case 'copyFromId': {
              checkId(req.source.value);
              const from = join(root, req.source.value);
              if (!(await exists(from)))
                throw new ConnectError(`workspace ${req.source.value} to copy does not exist`, Code.FailedPrecondition);
              await cp(from, dir, { recursive: true });
              break;
            }
            default:
              await mkdir(dir);
          }
          return { path: dir };
        },
        async removeWorkspace(req) {
          checkId(req.workspaceId);
          calls.push({ method: 'remove', workspaceIds: [req.workspaceId] });
          const dir = join(root, req.workspaceId);
          if (!(await exists(dir))) return { removed: false };
          await rm(dir, { recursive: true, force: true });
          return { removed: true };
        },
        async getWorkspaceUsage(req) {
          for (const id of req.workspaceIds) checkId(id);
          calls.push({ method: 'usage', workspaceIds: [...req.workspaceIds] });
          const usage = [];
          for (const workspaceId of req.workspaceIds) {
            const dir = join(root, workspaceId);
            if (!(await exists(dir))) {
              usage.push({ workspaceId, exists: false });
              continue;
            }
            const { bytes, inodes } = await measure(dir);
            usage.push({ workspaceId, exists: true, bytes: BigInt(bytes), inodes: BigInt(inodes) });
          }
          return { usage };
        },
        getStorageInfo() {
          calls.push({ method: 'info', workspaceIds: [] });
          return { root, quotaMechanism: 'none', description: 'none: the test storage enforces no quota' };
        },
      }),
  });
  return {
    url: server.url,
    root,
    calls,
    async close() {
      await server.close(0);
      rmSync(root, { recursive: true, force: true });
    },
  };
}
