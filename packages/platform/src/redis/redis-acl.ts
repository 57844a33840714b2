/**
 * Redis ACL users, one per service, so that nothing reaches Redis without a credential and a service's
 * credential reaches only its deployment's keys and channels (`<prefix>:*`), with the data commands BullMQ
 * and the Redis transport use and none of the server's administration. The rules are exactly
 * `redisServiceAclRules()`; the dev overlay's ACL file holds the same ones, which packages/deploy-check
 * checks (docs/security.md, "Boundaries"; docs/deploy.md, "Redis ACL users").
 */
import { createHash, randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';

/** The services of a deployment, each with its own Redis user. */
export const REDIS_ACL_SERVICES = ['conversation', 'llm-gateway', 'tool-runner', 'web-bff'] as const;

const NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]*$/;

function checkName(what: string, value: string): void {
  // No glob characters (the prefix becomes a key pattern) and nothing that would split a rule.
  if (!NAME.test(value)) throw new Error(`${what} ${JSON.stringify(value)}: use letters, digits, '.', '_' and '-'`);
}

/** The ACL user name of a service: `<prefix>-<service>`. */
export function redisServiceUser(prefix: string, service: string): string {
  checkName('key prefix', prefix);
  checkName('service name', service);
  return `${prefix}-${service}`;
}

/**
 * The rules of a service user (everything but `reset`, `on` and the password), in order:
 * later rules override earlier ones.
 *
 * - `~<prefix>:*` and `&<prefix>:*`: only the deployment's keys and channels.
 * - `+@read +@write`: data commands on those keys (strings, hashes, lists, sorted sets,
 *   streams, expiry, DEL, and the blocking ones: BZPOPMIN and BLMOVE for BullMQ, XREAD BLOCK).
 * - `+@scripting`: EVAL/EVALSHA (every BullMQ operation and the stream/registry scripts are Lua;
 *   commands inside a script are checked against the same rules).
 * - `+@transaction`: MULTI/EXEC (BullMQ).  `+@pubsub`: PUBLISH/SUBSCRIBE (the cancel bus).
 * - `+@connection`: AUTH, HELLO, PING, SELECT, CLIENT SETNAME/ID/SETINFO (not CLIENT LIST/KILL,
 *   which are @admin).
 * - `-@admin -@dangerous`: takes back CONFIG, FLUSHALL, FLUSHDB, KEYS, SORT, MIGRATE, RESTORE,
 *   DEBUG, SWAPDB, CLIENT LIST/KILL/PAUSE, MONITOR, SHUTDOWN, ACL, ...
 * - `-scan -randomkey -pubsub -function -fcall -fcall_ro`: names of other deployments' keys
 *   and channels (SCAN, RANDOMKEY and PUBSUB CHANNELS ignore key patterns), and server-wide
 *   functions: none of them is used.
 * - `+info`: BullMQ reads the server version and eviction policy with INFO (@dangerous).
 * - `+time`: the runner registry's script reads the server clock (TIME is only @fast).
 * - `+client|unblock`: an aborted blocking stream read is cut short on the server
 *   (blocking-pool.ts; @admin). It can only end another client's blocking call early.
 * - `+cluster|slots +cluster|info`: on a Redis Cluster the client reads which node serves which
 *   slots, and checks the cluster's state before it is ready (redis-connection.ts; @slow). They
 *   show the nodes' addresses and the cluster's state, no key.
 */
export function redisServiceAclRules(prefix: string): string[] {
  checkName('key prefix', prefix);
  return [
    'resetkeys',
    `~${prefix}:*`,
    'resetchannels',
    `&${prefix}:*`,
    '-@all',
    '+@read',
    '+@write',
    '+@scripting',
    '+@transaction',
    '+@pubsub',
    '+@connection',
    '-@admin',
    '-@dangerous',
    '-scan',
    '-randomkey',
    '-pubsub',
    '-function',
    '-fcall',
    '-fcall_ro',
    '+info',
    '+time',
    '+client|unblock',
    '+cluster|slots',
    '+cluster|info',
  ];
}

/**
 * One line of a Redis ACL file (`aclfile`) for a service: `user <prefix>-<service> reset on
 * #<sha256 of the password> <rules>`. The file holds only the hash; the service gets the password
 * in its REDIS_URL.
 */
export function redisAclFileLine(prefix: string, service: string, password: string): string {
  const hash = createHash('sha256').update(password).digest('hex');
  return ['user', redisServiceUser(prefix, service), 'reset', 'on', `#${hash}`, ...redisServiceAclRules(prefix)].join(' ');
}

function adminConnection(url: string): Redis {
  // A short-lived connection: fail rather than retry for long. Its errors reach the caller
  // through the commands; the listener keeps ioredis from printing them as unhandled.
  const redis = new Redis(url, { maxRetriesPerRequest: 2, connectionName: 'bedrock-acl-admin' });
  redis.on('error', () => undefined);
  return redis;
}

/** QUIT, so that no socket timer outlives the call (a bare disconnect leaves one for 2 s). */
async function close(redis: Redis): Promise<void> {
  if (redis.status === 'ready') await redis.quit().catch(() => redis.disconnect());
  else if (redis.status !== 'end') redis.disconnect();
}

/**
 * When the server keeps its users in an ACL file (`aclfile`), writes them there, so that a
 * restarted Redis still knows them (a server configured with users in redis.conf cannot save
 * them: nothing to do then).
 */
async function persist(admin: Redis): Promise<void> {
  const config = (await admin.call('CONFIG', 'GET', 'aclfile')) as string[];
  if (config[1]) await admin.call('ACL', 'SAVE');
}

export interface RedisAclUsersOptions {
  /** A URL whose user may run `ACL SETUSER` and `ACL DELUSER` (e.g. `redis://127.0.0.1:6379`). */
  readonly adminUrl: string;
  /** The deployment's key prefix (`BEDROCK_REDIS_PREFIX`). */
  readonly prefix: string;
  /** One user per service name. Default `REDIS_ACL_SERVICES`. */
  readonly services?: readonly string[];
  /**
   * `adminUrl` is a node of a Redis Cluster: ACL users are per node, so they are created on every
   * node `CLUSTER NODES` lists (masters and replicas: a promoted replica knows them). A node
   * added later needs them too (ACL LOAD of the same file, or this again).
   */
  readonly cluster?: boolean;
}

/** The admin URL of every node of the cluster `adminUrl` is a node of (same credentials). */
async function clusterNodeUrls(adminUrl: string): Promise<string[]> {
  const admin = adminConnection(adminUrl);
  try {
    const nodes = String(await admin.call('CLUSTER', 'NODES'));
    const urls: string[] = [];
    for (const line of nodes.split('\n')) {
      const fields = line.split(' ');
      const flags = (fields[2] ?? '').split(',');
      const address = /^(.+):(\d+)@/.exec(fields[1] ?? '');
      if (!address || flags.includes('fail') || flags.includes('noaddr') || flags.includes('handshake')) continue;
      const url = new URL(adminUrl);
      url.hostname = address[1]!;
      url.port = address[2]!;
      urls.push(url.href);
    }
    return urls;
  } finally {
    await close(admin);
  }
}

export interface RedisAclUsers {
  /** Per service: `redis://<prefix>-<service>:<password>@host:port[/db]` (rediss:// if the admin URL is). */
  readonly urls: Readonly<Record<string, string>>;
  /** Per service: its user name. */
  readonly users: Readonly<Record<string, string>>;
  /** Deletes the users (Redis disconnects their clients). Safe to call more than once. */
  cleanup(): Promise<void>;
}

/**
 * Creates (or replaces) one ACL user per service with a fresh random password and
 * `redisServiceAclRules(prefix)`, and returns the URL each service should use. If creating one
 * fails, the ones already created are deleted again.
 */
export async function createRedisAclUsers(options: RedisAclUsersOptions): Promise<RedisAclUsers> {
  const services = options.services ?? REDIS_ACL_SERVICES;
  const rules = redisServiceAclRules(options.prefix);
  const users = Object.fromEntries(services.map((s) => [s, redisServiceUser(options.prefix, s)]));
  const base = new URL(options.adminUrl);
  const urls: Record<string, string> = {};
  const created: string[] = [];
  const nodes = options.cluster ? await clusterNodeUrls(options.adminUrl) : [options.adminUrl];

  const deleteUsers = async (names: string[]) => {
    if (names.length === 0) return;
    const errors: unknown[] = [];
    for (const node of nodes) {
      const admin = adminConnection(node);
      try {
        await admin.call('ACL', 'DELUSER', ...names);
        await persist(admin);
      } catch (error) {
        errors.push(error);
      } finally {
        await close(admin);
      }
    }
    // On a cluster a node may be gone meanwhile (failover): the others are still cleaned.
    if (errors.length === nodes.length) throw errors[0];
  };

  const passwords = Object.fromEntries(services.map((s) => [s, randomBytes(24).toString('hex')]));
  for (const node of nodes) {
    const admin = adminConnection(node);
    try {
      for (const service of services) {
        const user = users[service]!;
        await admin.call('ACL', 'SETUSER', user, 'reset', 'on', `>${passwords[service]}`, ...rules);
        if (!created.includes(user)) created.push(user);
      }
      await persist(admin);
    } catch (error) {
      await close(admin);
      await deleteUsers(created).catch(() => undefined);
      throw error;
    }
    await close(admin);
  }
  for (const service of services) {
    const url = new URL(base.href);
    url.username = encodeURIComponent(users[service]!);
    url.password = passwords[service]!;
    urls[service] = url.href;
  }

  let cleaned: Promise<void> | undefined;
  return {
    urls,
    users,
    cleanup() {
      cleaned ??= deleteUsers(created);
      return cleaned;
    },
  };
}
