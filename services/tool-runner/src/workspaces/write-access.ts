/**
 * Whether a conversation's tools can write its working directory (docs/workspaces.md, "Write
 * access"). Only the runner knows both the user its tools run as (BEDROCK_TOOL_UID, `owner`, or
 * the workspace owner's uid) and the filesystem, so it answers: a process running as that user
 * asks the kernel (`test -w`, access(2)), so modes, ACLs, unreachable parents and read-only
 * mounts all count, exactly as they will for the tools.
 */
import { execFile } from 'node:child_process';
import { access, constants, readFile, stat } from 'node:fs/promises';
import { isAbsolute } from 'node:path';
import { resolveToolUser } from '../sandbox/sandboxed-run.ts';
import type { ToolUser } from '../sandbox/sandbox-settings.ts';

export interface WriteAccess {
  readonly uid: number;
  /** "nobody (uid 65534)", or "uid 200001" where the host has no name for it. */
  readonly user: string;
  readonly writable: boolean;
  /** Why not, for people; empty when writable. */
  readonly problem: string;
}

export class WriteAccessError extends Error {}

/** The names of the host's users (/etc/passwd), read once per call: a tool uid rarely has one. */
async function userName(uid: number): Promise<string | null> {
  const passwd = await readFile('/etc/passwd', 'utf8').catch(() => '');
  for (const line of passwd.split('\n')) {
    const [name, , id] = line.split(':');
    if (name && Number(id) === uid && id !== '') return name;
  }
  return null;
}

async function describe(uid: number): Promise<string> {
  const name = await userName(uid);
  return name ? `${name} (uid ${uid})` : `uid ${uid}`;
}

/**
 * Whether `uid:gid` may write `path`, asked by a process running as them (the runner is root).
 * `atPath`: the tools reach `path` mounted where it is in a view of their own, not through its
 * parents here, so only the directory itself counts: the check starts in it (the child changes
 * directory before it drops to the user) and asks about `.`.
 */
function accessAs(path: string, uid: number, gid: number, atPath: boolean): Promise<boolean> {
  const [target, cwd] = atPath ? ['.', path] : [path, undefined];
  return new Promise((resolve, reject) => {
    execFile('/usr/bin/test', ['-w', target], { uid, gid, cwd, env: { PATH: '/usr/bin:/bin' }, timeout: 5000 }, (err) => {
      if (!err) return resolve(true);
      if (typeof err.code === 'number' && err.code === 1) return resolve(false);
      reject(new WriteAccessError(`cannot check as uid ${uid}: ${err.message}`));
    });
  });
}

/**
 * The write access of `path` for the tools: `user` is the workspace owner's uid and gid, or null
 * for a host path (then the runner's tool user, `owner` resolved as a run in `path` resolves it;
 * `toolUser` null: tools run as this process). `views`: workspace runs get a view of their own
 * with the workspace mounted at its path (sandbox settings), so a workspace's parents here (a
 * root-only home, say) do not stand in its tools' way.
 */
export async function checkWriteAccess(
  path: string,
  user: { uid: number; gid: number } | null,
  toolUser: ToolUser | null,
  views = false,
): Promise<WriteAccess> {
  if (!isAbsolute(path)) throw new WriteAccessError(`path ${JSON.stringify(path)} is not absolute`);
  const self = process.getuid?.() ?? 0;
  const who = user ?? (toolUser ? await resolveToolUser(toolUser, path) : { uid: self, gid: process.getgid?.() ?? 0 });
  const name = await describe(who.uid);
  const found = await stat(path).then(
    (st) => ({ st }),
    (err: NodeJS.ErrnoException) => ({ err }),
  );
  if ('err' in found) {
    const code = found.err.code;
    const problem =
      code === 'ENOENT' ? 'does not exist' : code === 'ENOTDIR' ? 'is not a directory' : `cannot be read (${code ?? found.err.message})`;
    return { uid: who.uid, user: name, writable: false, problem };
  }
  const st = found.st;
  if (!st.isDirectory()) return { uid: who.uid, user: name, writable: false, problem: 'is not a directory' };
  let writable: boolean;
  if (who.uid === self)
    writable = await access(path, constants.W_OK).then(
      () => true,
      () => false,
    );
  else if (self === 0) writable = await accessAs(path, who.uid, who.gid, views && user !== null);
  else throw new WriteAccessError(`this runner (uid ${self}) cannot check the access of uid ${who.uid}: it is not root`);
  if (writable) return { uid: who.uid, user: name, writable, problem: '' };
  const mode = (st.mode & 0o7777).toString(8).padStart(4, '0');
  const owner = await describe(st.uid);
  const ownWritable = st.uid === who.uid && (st.mode & 0o200) !== 0;
  const problem = ownWritable
    ? `is its own with mode ${mode}, but on a read-only filesystem or under a directory it cannot enter`
    : `is owned by ${owner}, mode ${mode}`;
  return { uid: who.uid, user: name, writable, problem };
}
