/**
 * `make bench BENCH=checkpoints`: what a checkpoint and a rewind cost on a large workspace, on
 * loop-mounted btrfs images the storage makes itself (needs root and btrfs-progs): the storage's
 * `create` and `restore` (through the snapshot helper) timed under full qgroups ("before") and
 * under simple quotas ("after", what the runner turns on now), each on an image of its own, in
 * one run, with the kernel's floor of each; p50/p95/max against the goals, the rewound trees
 * checked, no assertions. docs/testing.md, "Checkpoints benchmark".
 */
import { execFileSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { readToolRunnerConfig } from '../services/tool-runner/src/config.ts';
import { DEFAULT_SNAPSHOT_HELPER_PATH } from '../services/tool-runner/src/workspaces/snapshot-helper.ts';
import { openWorkspaceStorage } from '../services/tool-runner/src/workspaces/workspace-storage.ts';

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

type Mode = 'full' | 'simple';
const LABEL: Record<Mode, string> = { full: 'full qgroups (before)', simple: 'simple quotas (after)' };
const results: { label: string; mode: Mode; times: number[]; goal: number }[] = [];
const record = (label: string, mode: Mode, times: number[], goal: number) => {
  results.push({ label, mode, times, goal });
  const p95 = pct(times, 95);
  console.log(
    `${label}, ${LABEL[mode]} (${times.length}): ${summary(times)} — goal p95 ≤ ${goal} ms: ${p95 <= goal ? 'met' : 'MISSED'}; load average ${load()}`,
  );
};

/** One image, its quotas turned on in `mode` by the first storage opened on it; every figure of that mode. */
async function runMode(mode: Mode): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), `bedrock-bench-ckpt-${mode}-`));
  chmodSync(dir, 0o711);
  const root = join(dir, 'root');
  const config = readToolRunnerConfig({}, { workspaces: { root, image: join(dir, 'image.btrfs'), imageSize: 4 * 1024 ** 3 } }).workspaces;
  // Without the helper the storage turns on full qgroups (`btrfs quota enable`); with it, simple quotas.
  if (mode === 'full') (await openWorkspaceStorage({ config, snapshotHelper: null })).close();
  const storage = await openWorkspaceStorage({ config });
  let round = 0;
  try {
    const description = storage.info().description;
    if (!description.startsWith(mode === 'simple' ? 'btrfs simple quotas' : 'btrfs qgroups'))
      throw new Error(`expected ${mode} quotas, the storage says: ${description}`);
    const id = 'ws-bench0000000000000000000000'.slice(0, 29);
    const path = await storage.prepare({ workspaceId: id, uid: UID, gid: UID, quotaBytes: QUOTA, source: { kind: 'empty' } });
    const t0 = Date.now();
    const perDir = 100;
    for (let d = 0; d < Math.ceil(FILES / perDir); d++) {
      const sub = join(path, `dir${d}`);
      mkdirSync(sub);
      for (let f = 0; f < perDir && d * perDir + f < FILES; f++) writeFileSync(join(sub, `f${f}.txt`), `file ${d}/${f}\n`.repeat(4));
    }
    execFileSync('sync');
    console.log(
      `${LABEL[mode]}: ${FILES.toLocaleString('en-US')} files written in ${((Date.now() - t0) / 1000).toFixed(1)} s; load average ${load()}`,
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
     * pays for the kernel's deletion of the one retention retired just before. `perTurn`: before
     * each checkpoint, the kernel's background work of the last one (deleting the checkpoint
     * retention retired) is let finish, as a turn's model and tools would take longer than that
     * between two checkpoints.
     */
    const checkpoint = async (perTurn = false): Promise<void> => {
      const times: number[] = [];
      for (let k = 0; k < (perTurn ? PER_TURN : CHECKPOINTS); k++) {
        if (perTurn) execFileSync('btrfs', ['subvolume', 'sync', root], { stdio: 'ignore' });
        const i = change();
        const start = performance.now();
        await storage.checkpoints.create(id, `t${i}`, QUOTA, RETENTION);
        times.push(performance.now() - start);
      }
      record(perTurn ? 'checkpoint, one per turn' : 'checkpoint, back to back', mode, times, 50);
    };

    /** Times rewinds (`restore`: a snapshot of a checkpoint swapped into place) and checks each rewound tree. */
    const rewind = async (): Promise<void> => {
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
      record(`rewind (trees after rewind ${right ? 'right' : 'WRONG'})`, mode, times, 1000);
    };

    /** Between phases: the kernel's cleaner idle (`btrfs subvolume sync`), so that no phase pays for the one before. */
    const settle = (): void => {
      const start = Date.now();
      execFileSync('btrfs', ['subvolume', 'sync', root], { stdio: 'ignore' });
      console.log(`(settled in ${((Date.now() - start) / 1000).toFixed(1)} s)`);
    };

    await checkpoint();
    settle();
    await checkpoint(true);
    settle();
    await rewind();
    settle();

    // The floor: the kernel's snapshot (its transaction commit writes what changed) after the same
    // change, through the ioctl alone (`bedrock-snapshot --time`, timed in the kernel call), inside
    // the workspace's family qgroup as checkpoints are.
    const floor = join(root, '.bench-floor');
    mkdirSync(floor, { mode: 0o700 });
    const family = readFileSync(join(root, '.checkpoints', id, '.qgroup'), 'utf8').trim();
    const ioctl: number[] = [];
    for (let k = 0; k < FLOOR; k++) {
      change();
      ioctl.push(
        Number(execFileSync(DEFAULT_SNAPSHOT_HELPER_PATH, ['--time', '-r', '-i', family, path, join(floor, `i${k}`)]).toString()) / 1000,
      );
    }
    console.log(`floor, ${LABEL[mode]}: the snapshot ioctl alone (${FLOOR}): ${summary(ioctl)}`);
  } finally {
    storage.close();
    try {
      execFileSync('umount', [root]);
    } catch {
      execFileSync('umount', ['-l', root]);
    }
    rmSync(dir, { recursive: true, force: true });
  }
}

await runMode('full');
await runMode('simple');
console.log('\nside by side (p50 / p95 / max, ms):');
for (const label of [...new Set(results.map((r) => r.label.replace(/ \(trees.*\)$/, '')))]) {
  const cell = (mode: Mode) => {
    const r = results.find((x) => x.mode === mode && x.label.startsWith(label));
    return r ? `${pct(r.times, 50).toFixed(1)} / ${pct(r.times, 95).toFixed(1)} / ${Math.max(...r.times).toFixed(1)}` : '-';
  };
  const goal = results.find((x) => x.label.startsWith(label))!.goal;
  const met = results.find((x) => x.mode === 'simple' && x.label.startsWith(label))!;
  console.log(
    `  ${label.padEnd(26)} full ${cell('full').padEnd(24)} simple ${cell('simple').padEnd(24)} goal p95 ≤ ${goal} ms: ${pct(met.times, 95) <= goal ? 'met' : 'MISSED'}`,
  );
}
