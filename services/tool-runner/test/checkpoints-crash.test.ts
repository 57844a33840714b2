/**
 * kill -9 of a runner in the middle of a checkpoint or a rewind (its whole process group, the
 * btrfs commands it started included) leaves the workspace exactly as before or as after once
 * a runner recovers (src/workspaces/checkpoints.ts, `recover`), with nothing left beside it.
 * Each round kills at a random moment after the operation starts. Needs root and btrfs-progs.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { spawn } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { WorkspaceStorage } from '../src/workspaces/workspace-storage.ts';
import { asUser, btrfsRoot, hasBtrfs, isRoot, newWorkspaceId, treeOf } from './support-btrfs.ts';
import type { BtrfsRoot } from './support-btrfs.ts';

const UID = 200_012;
const ROUNDS = Number(process.env.BEDROCK_CRASH_ROUNDS ?? 12);
const SCRIPT = join(dirname(fileURLToPath(import.meta.url)), 'fixtures', 'checkpoint-op.ts');
const describeBtrfs = isRoot && hasBtrfs ? describe : describe.skip;
if (!isRoot || !hasBtrfs) console.warn('checkpoints-crash.test.ts: skipped: needs root and btrfs-progs');

/** Runs the operation in a child runner and kills its process group `delayMs` after it starts (or lets it finish). */
function killDuring(args: string[], delayMs: number): Promise<'killed' | 'finished'> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', SCRIPT, ...args], { detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    let timer: NodeJS.Timeout | undefined;
    child.stderr.on('data', (d: Buffer) => (err += d.toString()));
    child.stdout.on('data', (d: Buffer) => {
      out += d.toString();
      if (out.includes('go\n') && !timer) timer = setTimeout(() => process.kill(-child.pid!, 'SIGKILL'), delayMs);
    });
    child.on('exit', (code, signal) => {
      clearTimeout(timer);
      if (signal === 'SIGKILL') resolve(out.includes('done') ? 'finished' : 'killed');
      else if (code === 0) resolve('finished');
      else reject(new Error(`the child failed (${code}): ${err}`));
    });
  });
}

describeBtrfs('checkpoints survive kill -9', () => {
  let fs: BtrfsRoot;
  let storage: WorkspaceStorage;

  beforeAll(async () => {
    fs = await btrfsRoot('bedrock-ckpt-crash-');
    storage = await fs.open();
  }, 120_000);
  afterAll(() => {
    storage?.close();
    fs?.destroy();
  });

  const leftovers = (id: string): string[] => readdirSync(fs.root).filter((n) => n.includes(id) && n !== id);

  it('mid-rewind: the workspace is as before or as after, never in between', async () => {
    const id = newWorkspaceId();
    const path = await storage.prepare({ workspaceId: id, uid: UID, gid: UID, quotaBytes: 0, source: { kind: 'empty' } });
    asUser(UID, path, 'sh', '-c', 'mkdir -p a/b && for i in $(seq 1 200); do echo $i > a/b/f$i; done; printf old > x');
    const before = treeOf(path);
    await storage.checkpoints.create(id, 'old', 0, { maxCount: 0, maxBytes: 0 });
    asUser(UID, path, 'sh', '-c', 'rm -r a; printf new > x; printf more > y');
    const after = treeOf(path);
    await storage.checkpoints.create(id, 'new', 0, { maxCount: 0, maxBytes: 0 });
    // `rewound`: killed, recovered as after the rewind; `untouched`: as before it.
    const outcomes = { untouched: 0, rewound: 0, finished: 0 };
    for (let round = 0; round < ROUNDS; round++) {
      // From "after", rewind to "old" and kill somewhere in it.
      const result = await killDuring([fs.root, 'restore', id, 'old'], Math.floor(Math.random() * 120));
      await storage.checkpoints.recover(0);
      expect(leftovers(id)).toEqual([]);
      const tree = treeOf(path);
      if (result === 'finished') {
        outcomes.finished++;
        expect(tree).toEqual(before);
      } else if (JSON.stringify(tree) === JSON.stringify(before)) outcomes.rewound++;
      else {
        expect(tree).toEqual(after);
        outcomes.untouched++;
      }
      await storage.checkpoints.restore(id, 'new', 0);
      expect(treeOf(path)).toEqual(after);
    }
    console.log(`mid-rewind kills over ${ROUNDS} rounds: ${JSON.stringify(outcomes)}`);
  }, 300_000);

  it('mid-checkpoint: the checkpoint exists whole or not at all', async () => {
    const id = newWorkspaceId();
    const path = await storage.prepare({ workspaceId: id, uid: UID, gid: UID, quotaBytes: 0, source: { kind: 'empty' } });
    asUser(UID, path, 'sh', '-c', 'for i in $(seq 1 300); do echo $i > f$i; done');
    const tree = treeOf(path);
    const outcomes = { taken: 0, absent: 0 };
    for (let round = 0; round < ROUNDS; round++) {
      const ckpt = `r${round}`;
      await killDuring([fs.root, 'create', id, ckpt], Math.floor(Math.random() * 150));
      await storage.checkpoints.recover(0);
      const at = join(fs.root, '.checkpoints', id, ckpt);
      if (existsSync(at)) {
        outcomes.taken++;
        expect(treeOf(at)).toEqual(tree);
        // And it restores.
        await storage.checkpoints.restore(id, ckpt, 0);
        expect(treeOf(path)).toEqual(tree);
      } else outcomes.absent++;
      expect(treeOf(path)).toEqual(tree);
      expect(leftovers(id)).toEqual([]);
    }
    console.log(`mid-checkpoint kills over ${ROUNDS} rounds: ${JSON.stringify(outcomes)}`);
  }, 300_000);
});
