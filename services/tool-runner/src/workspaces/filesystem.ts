/**
 * What the workspace root sits on (statfs f_type), and the optional btrfs image loop-mounted on
 * it (BEDROCK_WORKSPACE_IMAGE) for hosts whose own filesystem is not btrfs.
 */
import { existsSync, mkdirSync, openSync, closeSync, ftruncateSync, readFileSync } from 'node:fs';
import { statfs } from 'node:fs/promises';
import { dirname } from 'node:path';
import { lastLines, run } from './run.ts';

export const BTRFS_SUPER_MAGIC = 0x9123683e;

/** Common statfs magics, for saying what the root is on when it is not btrfs. */
const FILESYSTEMS: Record<number, string> = {
  [BTRFS_SUPER_MAGIC]: 'btrfs',
  0xef53: 'ext4',
  0x58465342: 'xfs',
  0x01021994: 'tmpfs',
  0x794c7630: 'overlayfs',
  0x6969: 'nfs',
  0x2fc12fc1: 'zfs',
  0x65735546: 'fuse',
  0xff534d42: 'cifs',
  0xf2f52010: 'f2fs',
  0x4d44: 'vfat',
};

/** The filesystem type of `path` by name (`ext4`), or its magic in hex. */
export async function filesystemType(path: string): Promise<{ name: string; btrfs: boolean }> {
  const st = await statfs(path);
  const type = Number(st.type) >>> 0;
  return { name: FILESYSTEMS[type] ?? `a filesystem of type 0x${type.toString(16)}`, btrfs: type === BTRFS_SUPER_MAGIC };
}

/** Unescapes a mountinfo field (`\040` for a space). */
function unescapeMount(field: string): string {
  return field.replace(/\\([0-7]{3})/g, (_, oct: string) => String.fromCharCode(parseInt(oct, 8)));
}

/** The source device of the filesystem mounted exactly on `path`, or undefined when nothing is. */
export function mountedOn(path: string): string | undefined {
  let source: string | undefined;
  for (const line of readFileSync('/proc/self/mountinfo', 'utf8').split('\n')) {
    const [left, right] = line.split(' - ');
    const fields = left?.split(' ');
    if (!fields || !right || unescapeMount(fields[4] ?? '') !== path) continue;
    source = unescapeMount(right.split(' ')[1] ?? ''); // the last mount on a path is the visible one
  }
  return source;
}

/**
 * Creates the image when absent (a sparse file of `size` bytes, mkfs.btrfs) and mounts it on
 * `root` unless something is mounted there already. A loop device already attached to the image
 * (another runner of this host) is reused rather than attaching a second one.
 * @returns one line for the start-up log, and whether the image was made now.
 */
export async function mountImage(image: string, size: number, root: string): Promise<{ message: string; created: boolean }> {
  const done: string[] = [];
  if (!existsSync(image)) {
    mkdirSync(dirname(image), { recursive: true, mode: 0o700 });
    const fd = openSync(image, 'wx', 0o600);
    try {
      ftruncateSync(fd, size);
    } finally {
      closeSync(fd);
    }
    const mkfs = await run(['mkfs.btrfs', '-q', image], { timeoutMs: 120_000 });
    if (mkfs.code !== 0) throw new Error(`mkfs.btrfs ${image} failed: ${lastLines(mkfs.stderr)}`);
    done.push(`created a ${Math.round(size / 1024 ** 3)} GiB btrfs image ${image}`);
  }
  mkdirSync(root, { recursive: true, mode: 0o711 });
  const current = mountedOn(root);
  if (current) {
    done.push(`${root} already has ${current} mounted`);
    return { message: done.join('; '), created: done.length > 1 };
  }
  const attached = await run(['losetup', '-j', image], { timeoutMs: 10_000 });
  const device = /^(\/dev\/loop\d+):/.exec(attached.stdout)?.[1];
  const mount = await run(device ? ['mount', device, root] : ['mount', '-o', 'loop', image, root], { timeoutMs: 60_000 });
  if (mount.code !== 0) throw new Error(`cannot mount the workspace image ${image} on ${root}: ${lastLines(mount.stderr)}`);
  done.push(`mounted ${image} on ${root}${device ? ` (through ${device}, already attached)` : ''}`);
  return { message: done.join('; '), created: done.length > 1 };
}
