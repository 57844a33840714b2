/**
 * `make bench BENCH=checkpoints`: what a checkpoint and a rewind cost on a large workspace, on a
 * loop-mounted btrfs image the storage makes itself (needs root and btrfs-progs): the storage's
 * `create` and `restore` timed "before" (the `btrfs` command) and "after" (the snapshot helper)
 * in one run on one workspace, then the kernel's floor; p50/p95/max against the goals, the
 * rewound trees checked, no assertions. docs/testing.md, "Checkpoints benchmark".
 */
import { execFileSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { readToolRunnerConfig } from '../services/tool-runner/src/config.ts';
import { DEFAULT_SNAPSHOT_HELPER_PATH } from '../services/tool-runner/src/workspaces/snapshot-helper.ts';
import { openWorkspaceStorage } from '../services/tool-runner/src/workspaces/workspace-storage.ts';
import type { WorkspaceStorage } from '../services/tool-runner/src/workspaces/workspace-storage.ts';

/** Files in the workspace: directories of 100 small files each (500 at the default 50,000). */
const FILES = Number(process.env.BENCH_FILES ?? 50_000);
const CHECKPOINTS = Number(process.env.BENCH_CHECKPOINTS ?? 60);
/** Checkpoints timed one per turn (the workspace is at its 50 by then: each retires one). */
const PER_TURN = Number(process.env.BENCH_PER_TURN ?? 20);
const REWINDS = Number(process.env.BENCH_REWINDS ?? 10);
const FLOOR = Number(process.env.BENCH_FLOOR ?? 20);
/** The shipped retention (BEDROCK_CHECKPOINT_MAX_COUNT, BEDROCK_CHECKPOINT_MAX_BYTES). */
const RETENTION = { maxCount: 50, maxBytes: 2 * 1024 ** 3 };
const QUOTA = 2 * 1024 ** 3;
const UID = 200_099;

if (process.getuid?.() !== 0) {
  console.log('checkpoints bench: skipped (needs root for the loop-mounted btrfs image)');
  process.exit(0);
}

const pct = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.ceil((p / 100) * xs.length) - 1)]!;
const fmt = (ms: number) => `${ms.toFixed(1)} ms`;
const load = () =>
  loadavg()
    .map((x) => x.toFixed(2))
    .join(' ');
const summary = (xs: number[]) => `p50 ${fmt(pct(xs, 50))}, p95 ${fmt(pct(xs, 95))}, max ${fmt(Math.max(...xs))}`;

const dir = mkdtempSync(join(tmpdir(), 'bedrock-bench-ckpt-'));
chmodSync(dir, 0o711);
const root = join(dir, 'root');
const config = readToolRunnerConfig({}, { workspaces: { root, image: join(dir, 'image.btrfs'), imageSize: 4 * 1024 ** 3 } }).workspaces;
// Two storages on the same root: the same workspace, its snapshots taken either way.
/**
 * Snapshots and retention's byte counts through the snapshot helper (bin/bedrock-snapshot: one
 * ioctl each, in a process that stays up), retention's deletions off the answer's path.
 */
const after = await openWorkspaceStorage({ config });
/** Snapshots and retention's byte counts through the `btrfs` command (a process each). */
const before = await openWorkspaceStorage({ config, snapshotHelper: null });
let round = 0;
try {
  const id = 'ws-bench0000000000000000000000'.slice(0, 29);
  const path = await after.prepare({ workspaceId: id, uid: UID, gid: UID, quotaBytes: QUOTA, source: { kind: 'empty' } });
  const t0 = Date.now();
  const perDir = 100;
  for (let d = 0; d < Math.ceil(FILES / perDir); d++) {
    const sub = join(path, `dir${d}`);
    mkdirSync(sub);
    for (let f = 0; f < perDir && d * perDir + f < FILES; f++) writeFileSync(join(sub, `f${f}.txt`), `file ${d}/${f}\n`.repeat(4));
  }
  execFileSync('sync');
  console.log(
    `workspace: ${FILES.toLocaleString('en-US')} files written in ${((Date.now() - t0) / 1000).toFixed(1)} s; load average ${load()}`,
  );

  /** A few changes, as a turn's tools would leave: the checkpoint must take them (its transaction writes them). */
  const change = (): number => {
    const i = round++;
    writeFileSync(join(path, `dir${i % 500}`, 'f0.txt'), `round ${i}\n`);
    writeFileSync(join(path, `new${i}.txt`), `new ${i}\n`);
    return i;
  };

  /**
   * Times CreateCheckpoint's work (the storage's `create`: a read-only snapshot inside the
   * workspace's qgroup, then retention with the shipped defaults). Back to back, each checkpoint
   * pays for the kernel's deletion of the one retention retired just before (qgroup accounting of
   * a dropped snapshot, which grows with the snapshots sharing its blocks). `perTurn`: before each
   * checkpoint, the kernel's background work of the last one (deleting the checkpoint retention
   * retired) is let finish, as a turn's model and tools would take longer than that between two
   * checkpoints.
   */
  const checkpoint = async (storage: WorkspaceStorage, label: string, perTurn = false): Promise<number[]> => {
    const times: number[] = [];
    for (let k = 0; k < (perTurn ? PER_TURN : CHECKPOINTS); k++) {
      if (perTurn) execFileSync('btrfs', ['subvolume', 'sync', root], { stdio: 'ignore' });
      const i = change();
      const start = performance.now();
      await storage.checkpoints.create(id, `t${i}`, QUOTA, RETENTION);
      times.push(performance.now() - start);
    }
    const p95 = pct(times, 95);
    console.log(
      `checkpoint, ${label} (${times.length}): ${summary(times)} — goal p95 ≤ 50 ms: ${p95 <= 50 ? 'met' : 'MISSED'}; load average ${load()}`,
    );
    return times;
  };

  /** Times rewinds (`restore`: a snapshot of a checkpoint swapped into place) and checks each rewound tree. */
  const rewind = async (storage: WorkspaceStorage, label: string): Promise<void> => {
    const times: number[] = [];
    let right = true;
    const ids = (await storage.checkpoints.list(id)).map((c) => Number(c.id.slice(1)));
    for (let k = 0; k < REWINDS; k++) {
      const target = ids[(k * 7) % ids.length]!;
      const start = performance.now();
      await storage.checkpoints.restore(id, `t${target}`, QUOTA);
      times.push(performance.now() - start);
      // t<k> was taken after round k's writes: dir<k>/f0.txt says "round k", new<k+1>.txt does not exist.
      right &&= readFileSync(join(path, `dir${target % 500}`, 'f0.txt'), 'utf8') === `round ${target}\n`;
      try {
        readFileSync(join(path, `new${target + 1}.txt`));
        right = false;
      } catch {
        // absent, as it should be
      }
    }
    const p95 = pct(times, 95);
    console.log(
      `rewind, ${label} (${REWINDS}): ${summary(times)} — goal p95 ≤ 1 s: ${p95 <= 1000 ? 'met' : 'MISSED'}; trees after rewind ${right ? 'right' : 'WRONG'}`,
    );
  };

  /**
   * Between phases: the deletions one phase queued (`.gone-` entries) done and the kernel's
   * cleaner idle (`btrfs subvolume sync`), so that no phase pays for the one before.
   */
  const settle = async (): Promise<void> => {
    const start = Date.now();
    const holder = join(root, '.checkpoints', id);
    while (readdirSync(holder).some((n) => n.startsWith('.gone-')) && Date.now() - start < 600_000)
      await new Promise((resolve) => setTimeout(resolve, 200));
    execFileSync('btrfs', ['subvolume', 'sync', root], { stdio: 'ignore' });
    console.log(`(settled in ${((Date.now() - start) / 1000).toFixed(1)} s)`);
  };

  await checkpoint(before, 'before (btrfs command)');
  await settle();
  await checkpoint(after, 'after (snapshot helper)');
  await settle();
  await checkpoint(before, 'before (btrfs command), one per turn', true);
  await settle();
  await checkpoint(after, 'after (snapshot helper), one per turn', true);
  await settle();
  await rewind(before, 'before (btrfs command)');
  await settle();
  await rewind(after, 'after (snapshot helper)');
  await settle();

  // The floor: the kernel's snapshot (its transaction commit writes what changed) after the same
  // change, through the ioctl alone (`bedrock-snapshot --time`, timed in the kernel call) and through
  // `btrfs subvolume snapshot` alone, and a bare `sync` of the filesystem.
  const floor = join(root, '.bench-floor');
  mkdirSync(floor, { mode: 0o700 });
  // Inside the workspace's family qgroup, as checkpoints are.
  const family = readFileSync(join(root, '.checkpoints', id, '.qgroup'), 'utf8').trim();
  const ioctl: number[] = [];
  const cli: number[] = [];
  const sync: number[] = [];
  for (let k = 0; k < FLOOR; k++) {
    change();
    ioctl.push(
      Number(execFileSync(DEFAULT_SNAPSHOT_HELPER_PATH, ['--time', '-r', '-i', family, path, join(floor, `i${k}`)]).toString()) / 1000,
    );
    change();
    let start = performance.now();
    execFileSync('btrfs', ['subvolume', 'snapshot', '-r', '-i', family, path, join(floor, `c${k}`)], { stdio: 'ignore' });
    cli.push(performance.now() - start);
    change();
    start = performance.now();
    execFileSync('sync', ['-f', path]);
    sync.push(performance.now() - start);
  }
  console.log(`floor: the snapshot ioctl alone (${FLOOR}): ${summary(ioctl)}`);
  console.log(`floor: \`btrfs subvolume snapshot -r\` alone, process included (${FLOOR}): ${summary(cli)}`);
  console.log(`floor: \`sync -f\` of the filesystem after the same change (${FLOOR}): ${summary(sync)}; load average ${load()}`);
} finally {
  before.close();
  after.close();
  try {
    execFileSync('umount', [root]);
  } catch {
    execFileSync('umount', ['-l', root]);
  }
  rmSync(dir, { recursive: true, force: true });
}
