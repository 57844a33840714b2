/**
 * A local Redis Cluster: `masters` redis-server processes with `replicasPerMaster` replicas each (default
 * 3 + 3), on free ports, with their data and logs under one temporary folder; joined with `redis-cli
 * --cluster create`. Every node knows the same users: an ACL file per node (`default` without password).
 * Used by the platform's cluster tests, the e2e tests and `make cluster REDIS=cluster`.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

export interface LocalRedisCluster {
  /** A seed node's URL (any node: clients find the others). */
  readonly url: string;
  readonly dir: string;
  readonly ports: readonly number[];
  /** Process ids of the nodes still running. */
  pids(): number[];
  /** Ports of the nodes that are masters now, by `CLUSTER NODES` of a live node. */
  masters(): Promise<number[]>;
  /** Kills (SIGKILL) the node on `port`. */
  kill(port: number): Promise<void>;
  /** Resolves when every live node reports `cluster_state:ok`, every replica is in sync and there are `masters` masters. */
  waitHealthy(timeoutMs?: number): Promise<void>;
  /** Kills every node and removes the folder (unless `keepDir`). */
  stop(): Promise<void>;
}

export interface RedisClusterOptions {
  /** Default 3. */
  readonly masters?: number;
  /** Default 1. */
  readonly replicasPerMaster?: number;
  /** Folder for the nodes' files. Default a new temporary one. */
  readonly dir?: string;
  /** First port to try (then upwards; each node needs its port and its cluster bus port, +10000). Default a random one in 20000..29000. */
  readonly basePort?: number;
  /** `cluster-node-timeout`. Default 1500 ms, short, so a killed master's replica takes over in a few seconds. */
  readonly nodeTimeoutMs?: number;
  /** Leave the folder after stop(). */
  readonly keepDir?: boolean;
  /** Started detached (left running when this process exits; `make cluster`). */
  readonly detached?: boolean;
}

function portFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

async function freePorts(count: number, base: number): Promise<number[]> {
  const ports: number[] = [];
  for (let port = base; ports.length < count && port < 55000; port++) {
    if ((await portFree(port)) && (await portFree(port + 10000))) ports.push(port);
  }
  if (ports.length < count) throw new Error('no free ports for the Redis Cluster');
  return ports;
}

async function cli(port: number, ...args: string[]): Promise<string> {
  const { stdout } = await run('redis-cli', ['-p', String(port), ...args], { timeout: 10_000 });
  return stdout;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export async function startRedisCluster(options: RedisClusterOptions = {}): Promise<LocalRedisCluster> {
  const masters = options.masters ?? 3;
  const replicas = options.replicasPerMaster ?? 1;
  const dir = options.dir ?? mkdtempSync(join(tmpdir(), 'bedrock-redis-cluster-'));
  mkdirSync(dir, { recursive: true });
  const ports = await freePorts(masters * (1 + replicas), options.basePort ?? 20000 + Math.floor(Math.random() * 9000));
  const children = new Map<number, ChildProcess>();
  const killed = new Set<number>();

  for (const port of ports) {
    const nodeDir = join(dir, String(port));
    mkdirSync(nodeDir, { recursive: true });
    const aclFile = join(nodeDir, 'users.acl');
    writeFileSync(aclFile, 'user default on nopass ~* &* +@all\n');
    const args = [
      '--port',
      String(port),
      '--bind',
      '127.0.0.1',
      '--dir',
      nodeDir,
      '--cluster-enabled',
      'yes',
      '--cluster-config-file',
      'nodes.conf',
      '--cluster-node-timeout',
      String(options.nodeTimeoutMs ?? 1500),
      '--save',
      '',
      '--appendonly',
      'no',
      '--aclfile',
      aclFile,
      '--logfile',
      join(nodeDir, 'redis.log'),
    ];
    const child = spawn('redis-server', args, { stdio: 'ignore', detached: options.detached ?? false });
    if (options.detached) child.unref();
    child.once('exit', () => children.delete(port));
    children.set(port, child);
  }
  const stop = async () => {
    for (const port of ports) await kill(port);
    if (!options.keepDir) rmSync(dir, { recursive: true, force: true });
  };
  async function kill(port: number): Promise<void> {
    killed.add(port);
    const child = children.get(port);
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const gone = new Promise((r) => child.once('exit', r));
    // A detached node is unref'd: ref it again, or this process could end before its exit is seen.
    child.ref();
    child.kill('SIGKILL');
    await gone;
  }
  const live = () => ports.filter((p) => !killed.has(p));

  async function masterPorts(): Promise<number[]> {
    for (const port of live()) {
      try {
        const nodes = await cli(port, 'CLUSTER', 'NODES');
        return nodes
          .split('\n')
          .map((line) => line.split(' '))
          .filter((fields) => {
            const flags = (fields[2] ?? '').split(',');
            return flags.includes('master') && !flags.includes('fail') && !flags.includes('fail?');
          })
          .map((fields) => Number(/:(\d+)@/.exec(fields[1]!)![1]));
      } catch {
        // try the next node
      }
    }
    throw new Error('no node of the Redis Cluster answers');
  }

  async function waitHealthy(timeoutMs = 30_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      try {
        let ok = true;
        for (const port of live()) {
          if (!(await cli(port, 'CLUSTER', 'INFO')).includes('cluster_state:ok')) ok = false;
          // A replica that has not synced yet could not take over from its master.
          const replication = await cli(port, 'INFO', 'replication');
          if (replication.includes('role:slave') && !replication.includes('master_link_status:up')) ok = false;
        }
        if (ok && (await masterPorts()).filter((p) => !killed.has(p)).length === masters) return;
      } catch {
        // not yet
      }
      if (Date.now() > deadline) throw new Error(`the Redis Cluster in ${dir} is not healthy after ${timeoutMs} ms`);
      await sleep(100);
    }
  }

  try {
    for (const port of ports) {
      const deadline = Date.now() + 10_000;
      for (;;) {
        try {
          if ((await cli(port, 'PING')).trim() === 'PONG') break;
        } catch {
          // starting
        }
        if (Date.now() > deadline) throw new Error(`redis-server on ${port} did not start`);
        await sleep(50);
      }
    }
    await run(
      'redis-cli',
      ['--cluster', 'create', ...ports.map((p) => `127.0.0.1:${p}`), '--cluster-replicas', String(replicas), '--cluster-yes'],
      { timeout: 30_000 },
    );
    await waitHealthy();
  } catch (error) {
    await stop();
    throw error;
  }

  return {
    url: `redis://127.0.0.1:${ports[0]}`,
    dir,
    ports,
    pids: () => [...children.values()].flatMap((child) => (child.pid === undefined ? [] : [child.pid])),
    masters: masterPorts,
    kill,
    waitHealthy,
    stop,
  };
}
