/**
 * `make bench BENCH=checkpoints`: what a checkpoint and a rewind cost on a large workspace, no
 * assertions. A workspace of 50,000 files (500 directories of 100 small files, BENCH_FILES to
 * change) on a loop-mounted btrfs image the storage makes itself (needs root and btrfs-progs);
 * each round changes a few files, then times CreateCheckpoint's work (the storage's `create`:
 * a read-only snapshot inside the workspace's qgroup, retention included); then times rewinds
 * (`restore`: a snapshot of a checkpoint swapped into place). Prints p50/p95/max against the
 * goals (checkpoint p95 ≤ 50 ms, rewind ≤ 1 s) and a check that the rewound tree is right.
 */
import { execFileSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { readToolRunnerConfig } from '../services/tool-runner/src/config.ts';
import { openWorkspaceStorage } from '../services/tool-runner/src/workspaces/workspace-storage.ts';

const FILES = Number(process.env.BENCH_FILES ?? 50_000);
const CHECKPOINTS = Number(process.env.BENCH_CHECKPOINTS ?? 40);
const REWINDS = Number(process.env.BENCH_REWINDS ?? 10);
const UID = 200_099;

if (process.getuid?.() !== 0) {
  console.log('checkpoints bench: skipped (needs root for the loop-mounted btrfs image)');
  process.exit(0);
}

const pct = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.ceil((p / 100) * xs.length) - 1)]!;
const fmt = (ms: number) => `${ms.toFixed(1)} ms`;

const dir = mkdtempSync(join(tmpdir(), 'bedrock-bench-ckpt-'));
chmodSync(dir, 0o711);
const root = join(dir, 'root');
const config = readToolRunnerConfig({}, { workspaces: { root, image: join(dir, 'image.btrfs'), imageSize: 4 * 1024 ** 3 } }).workspaces;
const storage = await openWorkspaceStorage({ config });
try {
  const id = 'ws-bench0000000000000000000000'.slice(0, 29);
  const path = await storage.prepare({ workspaceId: id, uid: UID, gid: UID, quotaBytes: 2 * 1024 ** 3, source: { kind: 'empty' } });
  const t0 = Date.now();
  const perDir = 100;
  for (let d = 0; d < Math.ceil(FILES / perDir); d++) {
    const sub = join(path, `dir${d}`);
    mkdirSync(sub);
    for (let f = 0; f < perDir && d * perDir + f < FILES; f++) writeFileSync(join(sub, `f${f}.txt`), `file ${d}/${f}\n`.repeat(4));
  }
  execFileSync('sync');
  console.log(`workspace: ${FILES.toLocaleString('en-US')} files written in ${((Date.now() - t0) / 1000).toFixed(1)} s`);

  const create: number[] = [];
  for (let i = 0; i < CHECKPOINTS; i++) {
    writeFileSync(join(path, `dir${i % 500}`, 'f0.txt'), `round ${i}\n`);
    writeFileSync(join(path, `new${i}.txt`), `new ${i}\n`);
    const start = performance.now();
    await storage.checkpoints.create(id, `t${i}`, 2 * 1024 ** 3, { maxCount: Number(process.env.BENCH_KEEP ?? 50), maxBytes: 0 });
    create.push(performance.now() - start);
  }
  const createP95 = pct(create, 95);
  console.log(
    `checkpoint (${CHECKPOINTS}): p50 ${fmt(pct(create, 50))}, p95 ${fmt(createP95)}, max ${fmt(Math.max(...create))} — goal p95 ≤ 50 ms: ${createP95 <= 50 ? 'met' : 'MISSED'}`,
  );

  const rewind: number[] = [];
  let right = true;
  for (let i = 0; i < REWINDS; i++) {
    const target = (i * 7) % CHECKPOINTS;
    const start = performance.now();
    await storage.checkpoints.restore(id, `t${target}`, 2 * 1024 ** 3);
    rewind.push(performance.now() - start);
    // t<k> was taken after round k's writes: dir<k>/f0.txt says "round k", new<k+1>.txt does not exist.
    right &&= readFileSync(join(path, `dir${target % 500}`, 'f0.txt'), 'utf8') === `round ${target}\n`;
    try {
      readFileSync(join(path, `new${target + 1}.txt`));
      right = false;
    } catch {
      // absent, as it should be
    }
  }
  const rewindMax = Math.max(...rewind);
  console.log(
    `rewind (${REWINDS}): p50 ${fmt(pct(rewind, 50))}, p95 ${fmt(pct(rewind, 95))}, max ${fmt(rewindMax)} — goal ≤ 1 s: ${rewindMax <= 1000 ? 'met' : 'MISSED'}; trees after rewind ${right ? 'right' : 'WRONG'}`,
  );
} finally {
  storage.close();
  try {
    execFileSync('umount', [root]);
  } catch {
    execFileSync('umount', ['-l', root]);
  }
  rmSync(dir, { recursive: true, force: true });
}
