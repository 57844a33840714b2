/**
 * A local highly available PostgreSQL: one etcd and 2 or 3 Patroni-managed postgres nodes with
 * synchronous replication (`synchronous_mode: true`), on free ports under one folder, tuned for a fast
 * failover (docs/conversation.md, "Postgres failover"). Used by `make cluster PG=ha` and the failover
 * end-to-end tests (docs/local-cluster.md). As root, everything runs as the `postgres` user.
 */
import { execFileSync, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { chownSync, existsSync, mkdirSync, openSync, closeSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import { freePort } from '@bedrock/platform/server';

export interface HaPostgresOptions {
  /** Folder for etcd, the data directories, configurations and logs (made if missing). */
  readonly dir: string;
  /** Postgres nodes, 2 or 3. Default 2. */
  readonly nodes?: number;
  /** Patroni's scope (cluster name). Default `bedrock`. */
  readonly scope?: string;
  /** Where each process's pid is written (`<name>.pid`), so `make cluster-down` can sweep them. */
  readonly pidDir?: string;
}

export interface HaNode {
  readonly name: string;
  readonly port: number;
  readonly restPort: number;
  readonly dataDir: string;
}

export interface HaPostgres {
  readonly nodes: readonly HaNode[];
  /** `postgres://postgres@127.0.0.1:p1,127.0.0.1:p2/<database>?target_session_attrs=read-write` */
  url(database: string): string;
  /** The node whose postgres is the read-write primary now (asked over SQL), if any. */
  primary(): Promise<HaNode | undefined>;
  /** Waits until there is a primary and every other node streams from it synchronously (or `timeoutMs`). */
  waitHealthy(timeoutMs?: number): Promise<HaNode>;
  /** The pid of a node's postmaster (from postmaster.pid). */
  postmasterPid(node: HaNode): number;
  stop(): Promise<void>;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function binDir(): string {
  const root = '/usr/lib/postgresql';
  const versions = existsSync(root) ? readdirSync(root).sort((a, b) => Number(b) - Number(a)) : [];
  for (const v of versions) if (existsSync(join(root, v, 'bin', 'initdb'))) return join(root, v, 'bin');
  throw new Error('no PostgreSQL server binaries under /usr/lib/postgresql (apt-get install postgresql)');
}

function which(command: string): void {
  try {
    execFileSync('sh', ['-c', `command -v ${command}`], { stdio: 'ignore' });
  } catch {
    throw new Error(`${command} is not installed: run bash scripts/ensure-patroni.sh`);
  }
}

/** As root, the `postgres` user's uid and gid (postgres refuses to run as root). */
function runAs(): { uid: number; gid: number } | undefined {
  if (process.getuid?.() !== 0) return undefined;
  const uid = Number(execFileSync('id', ['-u', 'postgres']).toString().trim());
  const gid = Number(execFileSync('id', ['-g', 'postgres']).toString().trim());
  return { uid, gid };
}

async function probe(port: number): Promise<'primary' | 'standby' | undefined> {
  const client = new pg.Client({ host: '127.0.0.1', port, user: 'postgres', database: 'postgres', connectionTimeoutMillis: 1000 });
  client.on('error', () => undefined);
  try {
    await client.connect();
    const { rows } = await client.query<{ standby: boolean }>('SELECT pg_is_in_recovery() AS standby');
    return rows[0]!.standby ? 'standby' : 'primary';
  } catch {
    return undefined;
  } finally {
    await client.end().catch(() => undefined);
  }
}

export async function startHaPostgres(options: HaPostgresOptions): Promise<HaPostgres> {
  which('patroni');
  which('etcd');
  const bin = binDir();
  const count = options.nodes ?? 2;
  if (count < 2 || count > 3) throw new Error('nodes: 2 or 3');
  const scope = options.scope ?? 'bedrock';
  const user = runAs();
  const dir = options.dir;
  mkdirSync(join(dir, 'logs'), { recursive: true });
  const own = (path: string) => {
    if (user) chownSync(path, user.uid, user.gid);
  };
  own(dir);
  own(join(dir, 'logs'));
  if (user && spawnSync('test', ['-w', dir, '-a', '-x', dir], { uid: user.uid, gid: user.gid }).status !== 0)
    throw new Error(`${dir} is out of reach of the postgres user (a parent folder is closed to it): choose a folder it can reach`);

  const children: ChildProcess[] = [];
  const nodes: HaNode[] = [];
  const pidOf = (node: HaNode): number | undefined => readPid(join(node.dataDir, 'postmaster.pid'));
  const launch = (name: string, command: string, args: string[]) => {
    const fd = openSync(join(dir, 'logs', `${name}.log`), 'a');
    const child = spawn(command, args, {
      cwd: dir,
      stdio: ['ignore', fd, fd],
      // Own process group: `make cluster-down` sweeps it by its pid file; SIGTERM stops it.
      detached: true,
      ...(user ? { uid: user.uid, gid: user.gid } : {}),
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: dir, LANG: 'C.UTF-8' },
    });
    closeSync(fd);
    children.push(child);
    if (options.pidDir && child.pid) writeFileSync(join(options.pidDir, `${name}.pid`), String(child.pid));
    return child;
  };

  const stop = async () => {
    // Patroni stops its postgres on SIGTERM (fast shutdown); etcd last.
    const byEtcdLast = [...children].reverse();
    for (const child of byEtcdLast) {
      if (child.exitCode !== null || child.signalCode !== null) continue;
      const gone = new Promise((r) => child.once('exit', r));
      try {
        process.kill(-child.pid!, 'SIGTERM');
      } catch {
        continue;
      }
      const killed = await Promise.race([gone.then(() => true), sleep(15_000).then(() => false)]);
      if (!killed) {
        try {
          process.kill(-child.pid!, 'SIGKILL');
        } catch {
          // gone
        }
        await gone;
      }
      if (options.pidDir)
        for (const f of readdirSync(options.pidDir))
          if (readPid(join(options.pidDir, f)) === child.pid) rmSync(join(options.pidDir, f), { force: true });
    }
    // A postmaster left behind (its Patroni was killed): stop it by its pid file.
    for (const node of nodes) {
      const pid = pidOf(node);
      if (pid && alive(pid)) process.kill(pid, 'SIGQUIT');
    }
  };

  const etcdClient = await freePort();
  const etcdPeer = await freePort();
  const etcdDir = join(dir, 'etcd');
  mkdirSync(etcdDir, { recursive: true, mode: 0o700 });
  own(etcdDir);
  try {
    launch('etcd', 'etcd', [
      '--name=etcd0',
      `--data-dir=${etcdDir}`,
      `--listen-client-urls=http://127.0.0.1:${etcdClient}`,
      `--advertise-client-urls=http://127.0.0.1:${etcdClient}`,
      `--listen-peer-urls=http://127.0.0.1:${etcdPeer}`,
      `--initial-advertise-peer-urls=http://127.0.0.1:${etcdPeer}`,
      `--initial-cluster=etcd0=http://127.0.0.1:${etcdPeer}`,
      '--enable-v2=true',
    ]);
    await waitFor('etcd', 20_000, async () => {
      const res = await fetch(`http://127.0.0.1:${etcdClient}/health`).catch(() => undefined);
      return res?.ok === true;
    });

    for (let i = 1; i <= count; i++) {
      const name = `pg${i}`;
      const node: HaNode = { name, port: await freePort(), restPort: await freePort(), dataDir: join(dir, name) };
      nodes.push(node);
      const config = patroniConfig({ scope, node, etcd: `127.0.0.1:${etcdClient}`, bin, socketDir: dir });
      const file = join(dir, `${name}.yml`);
      writeFileSync(file, config);
      own(file);
    }
    // The first node bootstraps the cluster; the others clone it (pg_basebackup) once it leads.
    launch(nodes[0]!.name, 'patroni', [join(dir, `${nodes[0]!.name}.yml`)]);
    await waitFor('the first Patroni node to lead', 60_000, async () => (await probe(nodes[0]!.port)) === 'primary');
    for (const node of nodes.slice(1)) launch(node.name, 'patroni', [join(dir, `${node.name}.yml`)]);
  } catch (err) {
    await stop();
    throw err;
  }

  const ha: HaPostgres = {
    nodes,
    url: (database) =>
      `postgres://postgres@${nodes.map((n) => `127.0.0.1:${n.port}`).join(',')}/${encodeURIComponent(database)}?target_session_attrs=read-write`,
    async primary() {
      for (const node of nodes) if ((await probe(node.port)) === 'primary') return node;
      return undefined;
    },
    async waitHealthy(timeoutMs = 90_000) {
      let leader: HaNode | undefined;
      await waitFor('a primary with a synchronous standby and every standby streaming', timeoutMs, async () => {
        leader = await ha.primary();
        if (!leader) return false;
        // Patroni's view (the /sync key in etcd), not only pg_stat_replication: a failover
        // after a crash goes only to a member Patroni has recorded as synchronous.
        const res = await fetch(`http://127.0.0.1:${leader.restPort}/cluster`).catch(() => undefined);
        if (!res?.ok) return false;
        const { members = [] } = (await res.json()) as { members?: Array<{ name: string; role: string; state: string }> };
        const standbys = members.filter((m) => m.name !== leader!.name);
        return (
          members.some((m) => m.name === leader!.name && m.role === 'leader') &&
          standbys.length === nodes.length - 1 &&
          standbys.some((m) => m.role === 'sync_standby') &&
          standbys.every((m) => m.state === 'streaming' || m.state === 'running')
        );
      });
      return leader!;
    },
    postmasterPid(node) {
      const pid = pidOf(node);
      if (!pid) throw new Error(`${node.name}: no postmaster.pid`);
      return pid;
    },
    stop,
  };
  try {
    await ha.waitHealthy();
  } catch (err) {
    await stop();
    throw err;
  }
  return ha;
}

function patroniConfig(o: { scope: string; node: HaNode; etcd: string; bin: string; socketDir: string }): string {
  const { node } = o;
  // JSON is YAML: no YAML library needed.
  return `${JSON.stringify(
    {
      scope: o.scope,
      namespace: '/bedrock/',
      name: node.name,
      log: { level: 'INFO' },
      restapi: { listen: `127.0.0.1:${node.restPort}`, connect_address: `127.0.0.1:${node.restPort}` },
      etcd: { host: o.etcd },
      bootstrap: {
        dcs: {
          // Failover figures: docs/conversation.md, "Postgres failover".
          ttl: 10,
          loop_wait: 1,
          retry_timeout: 3,
          maximum_lag_on_failover: 1048576,
          synchronous_mode: true,
          // A primary that crashed is failed over at once rather than restarted in place.
          primary_start_timeout: 0,
          postgresql: {
            use_pg_rewind: true,
            parameters: {
              wal_level: 'replica',
              hot_standby: 'on',
              wal_log_hints: 'on',
              max_wal_senders: 10,
              max_replication_slots: 10,
              max_connections: 200,
            },
          },
        },
        initdb: [{ encoding: 'UTF8' }, { 'auth-local': 'trust' }, { 'auth-host': 'trust' }],
      },
      postgresql: {
        listen: `127.0.0.1:${node.port}`,
        connect_address: `127.0.0.1:${node.port}`,
        data_dir: node.dataDir,
        bin_dir: o.bin,
        pgpass: join(o.socketDir, `${node.name}.pgpass`),
        authentication: { superuser: { username: 'postgres' }, replication: { username: 'postgres' }, rewind: { username: 'postgres' } },
        pg_hba: ['local all all trust', 'host all all 127.0.0.1/32 trust', 'host replication all 127.0.0.1/32 trust'],
        parameters: { unix_socket_directories: o.socketDir },
      },
      tags: { nofailover: false, noloadbalance: false, clonefrom: false, nosync: false },
    },
    null,
    2,
  )}\n`;
}

async function waitFor(what: string, timeoutMs: number, probe: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await probe())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(200);
  }
}

function readPid(file: string): number | undefined {
  try {
    const pid = Number(readFileSync(file, 'utf8').split('\n')[0]);
    return Number.isSafeInteger(pid) && pid > 0 ? pid : undefined;
  } catch {
    return undefined;
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
