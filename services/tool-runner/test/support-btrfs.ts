/**
 * A throw-away btrfs filesystem for tests: a sparse image the storage itself creates and
 * loop-mounts (BEDROCK_WORKSPACE_IMAGE), and a way to read a tree back for comparison, byte
 * for byte, with modes and symlink targets. Needs root and btrfs-progs.
 */
import { execFileSync } from 'node:child_process';
import { chmodSync, existsSync, lstatSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync } from 'node:fs';
import { createHash } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { readToolRunnerConfig } from '../src/config.ts';
import { openWorkspaceStorage } from '../src/workspaces/workspace-storage.ts';
import type { WorkspaceStorage, WorkspaceStorageOptions } from '../src/workspaces/workspace-storage.ts';

export const isRoot = process.getuid?.() === 0;
export const hasBtrfs = (() => {
  try {
    execFileSync('mkfs.btrfs', ['--version'], { stdio: 'ignore' });
    execFileSync('btrfs', ['--version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
})();

export interface BtrfsRoot {
  readonly dir: string;
  readonly root: string;
  readonly image: string;
  readonly config: WorkspaceStorageOptions['config'];
  open(extra?: Partial<WorkspaceStorageOptions>): Promise<WorkspaceStorage>;
  /** Unmounts and removes everything. */
  destroy(): void;
}

/**
 * A loop-mounted btrfs image the storage makes, its quotas turned on by the first storage opened:
 * `simple` (the default, through the snapshot helper) or `full` (`btrfs quota enable`, as without
 * the helper or on a kernel before 6.7); later storages keep the mode.
 */
export async function btrfsRoot(prefix: string, sizeMiB = 1024, quotas: 'simple' | 'full' = 'simple'): Promise<BtrfsRoot> {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  chmodSync(dir, 0o711);
  const root = join(dir, 'root');
  const image = join(dir, 'image', 'workspaces.btrfs');
  const config = readToolRunnerConfig({}, { workspaces: { root, image, imageSize: sizeMiB * 1024 ** 2 } }).workspaces;
  const first = await openWorkspaceStorage({ config, ...(quotas === 'full' ? { snapshotHelper: null } : {}) });
  first.close();
  return {
    dir,
    root,
    image,
    config,
    open: (extra = {}) => openWorkspaceStorage({ config, ...extra }),
    destroy() {
      if (existsSync(root)) {
        try {
          execFileSync('umount', [root], { stdio: 'ignore' });
        } catch {
          execFileSync('umount', ['-l', root], { stdio: 'ignore' });
        }
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

let sequence = 0;
/** A fresh valid workspace id. */
export function newWorkspaceId(): string {
  const tail = `${Date.now().toString(36)}${(sequence++).toString(36)}${Math.random().toString(36).slice(2)}`.replace(/[^0-9a-z]/g, '');
  return `ws-${tail.padEnd(26, '0').slice(0, 26)}`;
}

/** Runs argv as uid:gid (no supplementary groups). */
export function asUser(uid: number, cwd: string, ...argv: string[]): string {
  return execFileSync('setpriv', [`--reuid=${uid}`, `--regid=${uid}`, '--clear-groups', ...argv], { cwd, stdio: 'pipe' }).toString();
}

/**
 * The tree below `top` as sorted lines: path, type, mode, and a content hash (files) or target
 * (symlinks). Two trees are byte-identical (contents, modes, links) when their lines are equal.
 */
export function treeOf(top: string): string[] {
  const lines: string[] = [];
  const visit = (rel: string): void => {
    for (const name of readdirSync(rel ? join(top, rel) : top).sort()) {
      const path = rel ? `${rel}/${name}` : name;
      const full = join(top, path);
      const st = lstatSync(full);
      const mode = (st.mode & 0o7777).toString(8);
      if (st.isSymbolicLink()) lines.push(`${path} link ${readlinkSync(full)}`);
      else if (st.isDirectory()) {
        lines.push(`${path}/ dir ${mode}`);
        visit(path);
      } else if (st.isFile())
        lines.push(`${path} file ${mode} ${st.size} ${createHash('sha256').update(readFileSync(full)).digest('hex')}`);
      else lines.push(`${path} other ${mode}`);
    }
  };
  visit('');
  return lines;
}
