/**
 * What each component used between two samples, read from where the operator would read it:
 * CPU and resident memory of each service's process group from /proc, Postgres's CPU (every
 * `postgres` process) and transactions (pg_stat_database), Redis's CPU and commands (INFO).
 */
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import type { Redis } from 'ioredis';
import type pg from 'pg';

const TICKS = (() => {
  try {
    return Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
  } catch {
    return 100;
  }
})();
const PAGE = (() => {
  try {
    return Number(execFileSync('getconf', ['PAGESIZE'], { encoding: 'utf8' }).trim()) || 4096;
  } catch {
    return 4096;
  }
})();

interface ProcStat {
  readonly pid: number;
  readonly comm: string;
  readonly pgrp: number;
  /** utime + stime, and the reaped children's cutime + cstime, seconds. */
  readonly cpu: number;
  readonly rssBytes: number;
}

function procStat(pid: number): ProcStat | undefined {
  try {
    const text = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const close = text.lastIndexOf(')');
    const comm = text.slice(text.indexOf('(') + 1, close);
    const f = text
      .slice(close + 2)
      .split(' ')
      .map(Number);
    // After the comm: state(0) ppid(1) pgrp(2) … utime(11) stime(12) cutime(13) cstime(14) … rss(21).
    return { pid, comm, pgrp: f[2]!, cpu: (f[11]! + f[12]! + f[13]! + f[14]!) / TICKS, rssBytes: f[21]! * PAGE };
  } catch {
    return undefined; // gone meanwhile
  }
}

function allProcs(): ProcStat[] {
  return readdirSync('/proc')
    .filter((d) => /^\d+$/.test(d))
    .flatMap((d) => procStat(Number(d)) ?? []);
}

export interface ComponentSample {
  /** CPU seconds used so far (processes alive now, with their reaped children). */
  readonly cpuSeconds: number;
  readonly rssBytes: number;
}

export interface Sample {
  readonly at: number;
  /** By process name (`conversation-1`, …), `postgres` and `redis`. */
  readonly components: Map<string, ComponentSample>;
  readonly pgTransactions: number;
  readonly redisCommands: number;
}

export interface SamplerTargets {
  /** Each service process by name, its pid being its process group's. */
  readonly processes: ReadonlyArray<{ readonly name: string; pid(): number | undefined }>;
  readonly pool: pg.Pool;
  readonly database: string;
  readonly redis: Redis;
}

export async function sample(targets: SamplerTargets): Promise<Sample> {
  const procs = allProcs();
  const components = new Map<string, ComponentSample>();
  for (const p of targets.processes) {
    const pid = p.pid();
    const group = pid === undefined ? [] : procs.filter((s) => s.pgrp === pid);
    components.set(p.name, {
      cpuSeconds: group.reduce((sum, s) => sum + s.cpu, 0),
      // The service's own memory (the group leader), not its short-lived tools'.
      rssBytes: group.find((s) => s.pid === pid)?.rssBytes ?? 0,
    });
  }
  const postgres = procs.filter((s) => s.comm === 'postgres');
  components.set('postgres', {
    cpuSeconds: postgres.reduce((sum, s) => sum + s.cpu, 0),
    rssBytes: postgres.reduce((sum, s) => sum + s.rssBytes, 0),
  });
  const info = String(await targets.redis.info());
  const field = (name: string) => Number(new RegExp(`^${name}:([\\d.]+)`, 'm').exec(info)?.[1] ?? 0);
  components.set('redis', {
    cpuSeconds: field('used_cpu_sys') + field('used_cpu_user'),
    rssBytes: field('used_memory_rss'),
  });
  const { rows } = await targets.pool.query<{ n: string }>(
    'SELECT (xact_commit + xact_rollback)::text AS n FROM pg_stat_database WHERE datname = $1',
    [targets.database],
  );
  return { at: Date.now(), components, pgTransactions: Number(rows[0]?.n ?? 0), redisCommands: field('total_commands_processed') };
}

export interface Usage {
  readonly seconds: number;
  /** CPU used over the interval, in cores (1 = one core busy throughout), and RSS at its end. */
  readonly components: Record<string, { cores: number; rssMiB: number }>;
  readonly pgTps: number;
  readonly redisOpsPerSecond: number;
}

/** What was used between `before` and `after`. */
export function usageBetween(before: Sample, after: Sample): Usage {
  const seconds = Math.max(0.001, (after.at - before.at) / 1000);
  const components: Usage['components'] = {};
  for (const [name, a] of after.components) {
    const b = before.components.get(name);
    components[name] = {
      cores: Math.max(0, (a.cpuSeconds - (b?.cpuSeconds ?? a.cpuSeconds)) / seconds),
      rssMiB: a.rssBytes / 1024 / 1024,
    };
  }
  return {
    seconds,
    components,
    pgTps: (after.pgTransactions - before.pgTransactions) / seconds,
    redisOpsPerSecond: (after.redisCommands - before.redisCommands) / seconds,
  };
}
