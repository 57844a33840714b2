/**
 * CPU time by process group from /proc (Linux): this process, the PostgreSQL server's processes
 * and Redis', so a benchmark can say what one operation costs each of them, not just how many
 * ran per second. Clock ticks (USER_HZ, 100 per second on Linux) turned into milliseconds.
 */
import { readdirSync, readFileSync } from 'node:fs';

export interface CpuSplit {
  readonly node: number;
  readonly postgres: number;
  readonly redis: number;
}

const TICK_MS = 10;

/**
 * utime + stime of one process and of its children that exited and were waited for (cutime +
 * cstime: a Postgres backend that ends, say when a pool closes an idle connection, leaves its
 * time with the postmaster), in ms; 0 if it is gone.
 */
function cpuOf(pid: string): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12]) + Number(fields[13]) + Number(fields[14])) * TICK_MS;
  } catch {
    return 0;
  }
}

function commOf(pid: string): string {
  try {
    return readFileSync(`/proc/${pid}/comm`, 'utf8').trim();
  } catch {
    return '';
  }
}

/** CPU used so far by each group (a process that exits between two snapshots takes its time with it). */
export function cpuSnapshot(): CpuSplit {
  let postgres = 0;
  let redis = 0;
  for (const pid of readdirSync('/proc')) {
    if (!/^\d+$/.test(pid)) continue;
    const comm = commOf(pid);
    if (comm === 'postgres') postgres += cpuOf(pid);
    else if (comm.startsWith('redis-server')) redis += cpuOf(pid);
  }
  const own = process.cpuUsage();
  return { node: (own.user + own.system) / 1000, postgres, redis };
}

/** `after − before`, per operation. */
export function cpuPer(before: CpuSplit, after: CpuSplit, operations: number): CpuSplit {
  const per = (k: keyof CpuSplit) => (after[k] - before[k]) / Math.max(1, operations);
  return { node: per('node'), postgres: per('postgres'), redis: per('redis') };
}

export function formatSplit(split: CpuSplit): string {
  const total = split.node + split.postgres + split.redis;
  return `${total.toFixed(3)} ms (Node ${split.node.toFixed(3)}, Postgres ${split.postgres.toFixed(3)}, Redis ${split.redis.toFixed(3)})`;
}
