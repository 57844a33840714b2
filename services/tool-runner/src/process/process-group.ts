/**
 * Killing a tool's whole process group. Commands run as the leader of their own group
 * (spawned detached, so setsid made pid == pgid); everything they start stays in it unless
 * it calls setsid itself, which the pids cgroup (see sandbox/pids-cgroup.ts) also catches.
 */

/** Sends SIGKILL to every process of group `pgid`. False when the group is already gone. */
export function killGroup(pgid: number): boolean {
  try {
    process.kill(-pgid, 'SIGKILL');
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ESRCH') return false;
    throw err;
  }
}

/** True while any process (zombies included) still belongs to group `pgid`. */
export function groupAlive(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code !== 'ESRCH';
  }
}
