/**
 * Connections to one Redis or to a Redis Cluster (BEDROCK_REDIS_CLUSTER). On a cluster the URL is a seed
 * node (its user, password and `rediss:` apply to every node); ioredis' `Cluster` finds the others and
 * routes each command by its key's slot, following MOVED/ASK and refreshing its slot map after a failover
 * (docs/transports.md, "Redis Cluster").
 */
import { Cluster, Redis } from 'ioredis';
import type { RedisOptions } from 'ioredis';
import { keySlot } from './cluster-slot.ts';

/** The shared connection of a transport: one Redis, or a cluster. */
export type RedisClient = Redis | Cluster;

export interface RedisClientOptions {
  readonly connectionName: string;
  /** ioredis' retries per command (null: forever, as BullMQ's workers need). Default ioredis' (20). */
  readonly maxRetriesPerRequest?: number | null;
  readonly lazyConnect?: boolean;
}

/** ioredis options of a node from a `redis://` / `rediss://` URL (no host and port). */
function nodeOptions(url: URL): RedisOptions {
  const options: RedisOptions = {};
  if (url.username) options.username = decodeURIComponent(url.username);
  if (url.password) options.password = decodeURIComponent(url.password);
  if (url.protocol === 'rediss:') options.tls = {};
  return options;
}

export function createRedisClient(redisUrl: string, cluster: boolean, options: RedisClientOptions): RedisClient {
  const common: RedisOptions = {
    connectionName: options.connectionName,
    lazyConnect: options.lazyConnect,
    ...(options.maxRetriesPerRequest === undefined ? {} : { maxRetriesPerRequest: options.maxRetriesPerRequest }),
  };
  if (!cluster) return new Redis(redisUrl, common);
  const url = new URL(redisUrl);
  return new Cluster([{ host: url.hostname, port: Number(url.port || 6379) }], {
    lazyConnect: options.lazyConnect,
    redisOptions: { ...nodeOptions(url), ...common, lazyConnect: undefined },
    // While a failover runs (a few seconds: the nodes' cluster-node-timeout plus the election)
    // the slots of the dead master answer CLUSTERDOWN or nothing: retry every 200 ms for up to
    // 20 s (each retry counts as a redirection) before a command fails.
    maxRedirections: 100,
    retryDelayOnClusterDown: 200,
    retryDelayOnFailover: 200,
    retryDelayOnTryAgain: 200,
    slotsRefreshTimeout: 2000,
  });
}

export function isCluster(client: RedisClient): client is Cluster {
  return client instanceof Cluster;
}

/** Where dedicated connections for blocking reads go. */
export interface BlockingTargets {
  /** The node a blocking command on `key` must be sent to: '' on one Redis, else the slot master's `host:port`. */
  nodeOf(key: string): string;
  /** A new connection (not connected yet: lazyConnect) to `node`. */
  open(node: string, connectionName: string): Redis;
  /** A connection to `node` to send CLIENT UNBLOCK on (the node's blocked client ids are its own). */
  control(node: string): Redis | undefined;
  /** After an error on `node`: have the slot map refreshed (a failover moves slots). */
  refresh(): void;
}

/**
 * Blocking stream reads need a connection of their own on the node that serves the streams' slot, and
 * CLIENT UNBLOCK sent to that same node: this gives both, for one Redis or a cluster.
 */
export function blockingTargets(shared: RedisClient): BlockingTargets {
  if (!isCluster(shared)) {
    return {
      nodeOf: () => '',
      open: (_node, connectionName) => shared.duplicate({ lazyConnect: true, connectionName }),
      control: () => shared,
      refresh: () => undefined,
    };
  }
  const redisOptions = shared.options.redisOptions ?? {};
  return {
    nodeOf(key) {
      const node = shared.slots[keySlot(key)]?.[0];
      if (node === undefined) throw new Error(`no node serves the slot of ${key} (yet)`);
      return node;
    },
    open(node, connectionName) {
      const at = node.lastIndexOf(':');
      return new Redis({
        ...redisOptions,
        host: node.slice(0, at),
        port: Number(node.slice(at + 1)),
        connectionName,
        lazyConnect: true,
        // A dead node is left for the slot's new master rather than waited for.
        maxRetriesPerRequest: 1,
        retryStrategy: () => null,
      });
    },
    control(node) {
      return shared.nodes('master').find((redis) => `${redis.options.host}:${redis.options.port}` === node);
    },
    refresh() {
      shared.refreshSlotsCache();
    },
  };
}

/** A new connection like `client` (a cluster: a new Cluster with the same seeds and options). */
export function duplicateClient(client: RedisClient, connectionName: string): RedisClient {
  if (isCluster(client)) {
    return client.duplicate(undefined, { redisOptions: { ...client.options.redisOptions, connectionName } });
  }
  return client.duplicate({ connectionName });
}
