/**
 * The runner's answer to "can this conversation's tools write their working directory"
 * (CheckWriteAccess, docs/workspaces.md "Write access"): asked as the tool user itself, so a
 * root-owned project is unwritable for nobody, a workspace is writable for its owner's uid, a
 * missing directory says so, and `owner` resolves as a run there resolves it.
 */
import { chmodSync, chownSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from '@jest/globals';
import { checkWriteAccess } from '../src/workspaces/write-access.ts';

const base = mkdtempSync(join(tmpdir(), 'bedrock-write-access-'));
chmodSync(base, 0o755);
afterAll(() => rmSync(base, { recursive: true, force: true }));

describe('checkWriteAccess', () => {
  it('answers as the tool user: owner-resolved, numbered, missing', async () => {
    if (process.getuid?.() !== 0) throw new Error('runs as root: it checks as other uids');
    const rootOwned = join(base, 'root-owned');
    mkdirSync(rootOwned, { mode: 0o755 });
    // `owner` on a root-owned directory: nobody, who may not write it.
    await expect(checkWriteAccess(rootOwned, null, { uid: 'owner', gid: 65534 })).resolves.toEqual({
      uid: 65534,
      user: 'nobody (uid 65534)',
      writable: false,
      problem: 'is owned by root (uid 0), mode 0755',
    });
    // A workspace given to its owner's uid (no name on this host), mode 0700: writable by it.
    const ws = join(base, 'ws');
    mkdirSync(ws, { mode: 0o700 });
    chownSync(ws, 200123, 200123);
    await expect(checkWriteAccess(ws, { uid: 200123, gid: 200123 }, null)).resolves.toEqual({
      uid: 200123,
      user: 'uid 200123',
      writable: true,
      problem: '',
    });
    // Another uid may not, whatever the runner (root) could do.
    await expect(checkWriteAccess(ws, { uid: 200124, gid: 200124 }, null)).resolves.toMatchObject({ writable: false });
    // Group-writable for the tool user's group counts (the kernel decides, not a mode guess).
    const shared = join(base, 'shared');
    mkdirSync(shared);
    chownSync(shared, 0, 200200);
    chmodSync(shared, 0o775);
    await expect(checkWriteAccess(shared, { uid: 200201, gid: 200200 }, null)).resolves.toMatchObject({ writable: true });
    // A directory below one the user cannot enter.
    const inner = join(ws, 'inner');
    mkdirSync(inner);
    chownSync(inner, 200124, 200124);
    await expect(checkWriteAccess(inner, { uid: 200124, gid: 200124 }, null)).resolves.toMatchObject({
      writable: false,
      problem: expect.stringMatching(/under a directory it cannot enter/),
    });
    // With views, a workspace is mounted at its path in its tools' own root: parents here do not
    // count (the embedded default keeps workspaces under root's 0700 home), the directory does.
    await expect(checkWriteAccess(inner, { uid: 200124, gid: 200124 }, null, true)).resolves.toEqual({
      uid: 200124,
      user: 'uid 200124',
      writable: true,
      problem: '',
    });
    await expect(checkWriteAccess(inner, { uid: 200125, gid: 200125 }, null, true)).resolves.toMatchObject({ writable: false });
    // Host paths (no uid given) are reached through their parents even with views.
    await expect(checkWriteAccess(inner, null, { uid: 200124, gid: 200124 }, true)).resolves.toMatchObject({ writable: false });
    await expect(checkWriteAccess(join(base, 'nope'), null, { uid: 'owner', gid: 65534 })).resolves.toMatchObject({
      writable: false,
      problem: 'does not exist',
    });
    await expect(checkWriteAccess('relative/dir', null, null)).rejects.toThrow(/not absolute/);
  });
});
