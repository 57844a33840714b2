/**
 * A runner's start removes the per-run cgroups that an earlier process of the same runner id left
 * when it died, and kills what still ran in them; another live process's are left alone. Against
 * the machine's real hierarchies: needs root and a writable cgroup hierarchy (skips otherwise).
 */
import { describe, it, expect, afterAll } from '@jest/globals';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createPidsCgroups, findCgroupRoots } from './pids-cgroup.ts';

const roots = process.getuid?.() === 0 ? findCgroupRoots() : null;
const runnerId = `test-sweep-${process.pid}`;
/** The orphan's `sleep` argument, this test's own (pkill finds it after a failed run). */
const ORPHAN_SECONDS = `300.${process.pid}`;

/** A pid that no longer names a process: a child's, after it exited. */
function deadPid(): number {
  const child = spawnSync('sh', ['-c', 'echo $$'], { encoding: 'utf8' });
  return Number(child.stdout.trim());
}

(roots ? describe : describe.skip)('leftover per-run cgroups', () => {
  const first = roots ? createPidsCgroups(roots, runnerId) : null;
  const bases = first ? [...first.bases] : [];

  afterAll(async () => {
    // Whatever a failed run left: the orphan, then the directories.
    spawnSync('pkill', ['-KILL', '-f', `^sleep ${ORPHAN_SECONDS}$`]);
    await new Promise((resolve) => setTimeout(resolve, 100));
    for (const b of bases) spawnSync('sh', ['-c', `for d in "${b}"/*/; do rmdir "$d"; done; rmdir "${b}"`]);
  });

  it("a dead process's are emptied and removed at the next start; a live one's and other directories stay", async () => {
    const dead = deadPid();
    const emptyLeftover = `run-${dead}-1`;
    const busyLeftover = `warm-${dead}-2`;
    const mcpLeftover = `mcp-${dead}-3`;
    const mine = `run-${process.pid}-1`;
    const other = 'not-a-run';
    for (const b of bases) for (const name of [emptyLeftover, busyLeftover, mcpLeftover, mine, other]) mkdirSync(join(b, name));
    // A process that outlived its runner, still in the dead runner's cgroup (in every hierarchy).
    const orphan = spawn('sleep', [ORPHAN_SECONDS], { stdio: 'ignore', detached: true });
    const orphanPid = orphan.pid!;
    const exited = new Promise<void>((resolve) => orphan.once('exit', () => resolve()));
    for (const b of bases) writeFileSync(join(b, busyLeftover, 'cgroup.procs'), String(orphanPid));
    expect([orphan.exitCode, orphan.signalCode]).toEqual([null, null]);

    // The runner starts again (same id): its start sweeps; close waits for the removals.
    const second = createPidsCgroups(roots!, runnerId);
    await second.close();

    for (const b of bases) {
      const left = readdirSync(b, { withFileTypes: true })
        .filter((e) => e.isDirectory())
        .map((e) => e.name)
        .sort();
      expect([b, left]).toEqual([b, [other, mine].sort()]);
    }
    await Promise.race([exited, new Promise((resolve) => setTimeout(resolve, 5000))]);
    expect(orphan.signalCode).toBe('SIGKILL');
    expect(existsSync(join(bases[0]!, mine))).toBe(true);
  });
});
