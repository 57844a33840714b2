/**
 * The per-service Redis ACL users on the real Redis (127.0.0.1:6379, or REDIS_URL): each user runs the
 * whole transport contract, a plain BullMQ queue + worker + events round trip and a raw stream round trip
 * under its prefix, and is refused everything else: other prefixes' keys and channels, CONFIG, FLUSHALL,
 * KEYS, SCAN, ACL. A private redis-server with the default user off shows that a connection without
 * credentials is refused.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { Queue, QueueEvents, Worker } from 'bullmq';
import { Redis } from 'ioredis';
import { createRedisTransport, redisKeys } from '@bedrock/platform';
import { transportContract } from '../../test/transport-contract.ts';
import { waitFor } from '../../test/transport-contract-support.ts';
import { REDIS_URL, deleteKeys, uniquePrefix } from '../../test/redis-helpers.ts';
import { freePort } from '../server/free-port.ts';
import {
  REDIS_ACL_SERVICES,
  createRedisAclUsers,
  redisAclFileLine,
  redisServiceAclRules,
  redisServiceUser,
  type RedisAclUsers,
} from './redis-acl.ts';

const prefix = uniquePrefix('acl');
const other = uniquePrefix('acl-other');

let users: RedisAclUsers | undefined;
async function aclUsers(): Promise<RedisAclUsers> {
  users ??= await createRedisAclUsers({ adminUrl: REDIS_URL, prefix, services: REDIS_ACL_SERVICES });
  return users;
}

afterAll(async () => {
  await users?.cleanup();
  await deleteKeys(prefix);
  await deleteKeys(other);
});

// The transport contract (BullMQ queues with retries, delays and hand-back, notification streams
// with blocking reads cut short by CLIENT UNBLOCK, the cancel bus, the runner registry), each
// "replica" on the next service's user: jobs added by one user are taken by another, as in a deployment.
let made = 0;
transportContract('redis with per-service ACL users', {
  async make() {
    const { urls } = await aclUsers();
    const service = REDIS_ACL_SERVICES[made++ % REDIS_ACL_SERVICES.length]!;
    return createRedisTransport({ redisUrl: urls[service]!, prefix, onError: () => undefined });
  },
});

/** The error a connection to `url` is refused with (ioredis reports it as an 'error' event). */
async function refusal(url: string): Promise<string> {
  const c = new Redis(url, { maxRetriesPerRequest: 0, retryStrategy: () => null, lazyConnect: true });
  let reason = 'no error event';
  c.on('error', (e: Error) => {
    reason = e.message;
  });
  try {
    await c.connect();
    return `connected: ${await c.ping()}`;
  } catch {
    return reason;
  } finally {
    await close(c);
  }
}

/** Commands a service user must be refused (another deployment's keys and channels, administration). */
function refusedCommands(mine: string, theirs: string): (string | number)[][] {
  return [
    ...harmlessRefusals(mine, theirs),
    ['SET', `${theirs}:x`, '1'],
    ['DEL', `${theirs}:secret`],
    ['XADD', `${theirs}:s`, '*', 'a', 'b'],
    ['PUBLISH', `${theirs}:cancel`, 'x'],
    ['CONFIG', 'SET', 'maxmemory-policy', 'allkeys-lru'],
    ['FLUSHALL'],
    ['FLUSHDB'],
    ['ACL', 'SETUSER', `${mine}-evil`, 'on', 'nopass', '+@all', '~*'],
    ['ACL', 'DELUSER', 'default'],
    ['CLIENT', 'KILL', 'ID', 1],
    ['CLIENT', 'PAUSE', 1000],
    ['MONITOR'],
    ['DEBUG', 'SLEEP', 0],
    ['SHUTDOWN'],
    ['SORT', `${mine}:list`],
    ['MIGRATE', '127.0.0.1', 1, `${mine}:x`, 0, 10],
    ['RESTORE', `${mine}:y`, 0, 'x'],
    ['FUNCTION', 'FLUSH'],
    ['SWAPDB', 0, 1],
    ['BGSAVE'],
    ['REPLICAOF', 'NO', 'ONE'],
  ];
}

/** The subset that changes nothing even if it were allowed. */
function harmlessRefusals(mine: string, theirs: string): (string | number)[][] {
  return [
    ['GET', `${theirs}:secret`],
    ['XRANGE', `${theirs}:s`, '-', '+'],
    ['SUBSCRIBE', `${theirs}:cancel`],
    ['CONFIG', 'GET', 'requirepass'],
    ['KEYS', '*'],
    ['KEYS', `${mine}:*`],
    ['SCAN', 0],
    ['RANDOMKEY'],
    ['PUBSUB', 'CHANNELS'],
    ['ACL', 'LIST'],
    ['ACL', 'WHOAMI'],
    ['ACL', 'LOG'],
    ['CLIENT', 'LIST'],
  ];
}

/** 'NOPERM' when `c` is refused the command, else what happened. */
async function refusedWith(c: Redis, args: (string | number)[]): Promise<string> {
  const [command, ...rest] = args;
  return c.call(String(command), ...rest).then(
    (reply) => `allowed: ${JSON.stringify(reply)}`,
    // Refusals inside a script are reported as script errors.
    (e: Error) => (/NOPERM|The user executing the script can't (access|run)/.test(e.message) ? 'NOPERM' : e.message),
  );
}

/** QUIT (a bare disconnect leaves ioredis' 2 s socket timer behind). */
async function close(c: Redis): Promise<void> {
  if (c.status === 'ready') await c.quit().catch(() => c.disconnect());
  else if (c.status !== 'end') c.disconnect();
}

function connect(url: string): Redis {
  // No retries and no reconnects: a refused command must fail, and nothing may keep Jest waiting.
  return new Redis(url, { maxRetriesPerRequest: 0, retryStrategy: () => null });
}

describe('redis ACL users', () => {
  const clients: Redis[] = [];
  const as = async (service: string) => {
    const c = connect((await aclUsers()).urls[service]!);
    clients.push(c);
    return c;
  };
  afterAll(async () => {
    await Promise.all(clients.map(close));
  });

  it('names and URLs: one user <prefix>-<service> per service, on the admin URL host', async () => {
    const { urls, users: names } = await aclUsers();
    expect(Object.keys(urls).sort()).toEqual([...REDIS_ACL_SERVICES].sort());
    for (const service of REDIS_ACL_SERVICES) {
      const url = new URL(urls[service]!);
      expect(names[service]).toBe(`${prefix}-${service}`);
      expect(decodeURIComponent(url.username)).toBe(names[service]);
      expect(url.password).toMatch(/^[0-9a-f]{48}$/);
      expect(url.host).toBe(new URL(REDIS_URL).host);
      const c = await as(service);
      expect(await c.call('ACL', 'WHOAMI').catch((e: Error) => e.message)).toMatch(/NOPERM/);
      expect(await c.ping()).toBe('PONG');
    }
    expect(() => redisServiceAclRules('a*')).toThrow(/key prefix/);
    expect(() => redisServiceUser('bedrock', 'tool runner')).toThrow(/service name/);
    expect(redisAclFileLine('bedrock', 'web-bff', 'pw')).toBe(
      `user bedrock-web-bff reset on #30c952fab122c3f9759f02a6d95c3758b246b4fee239957b2d4fee46e26170c4 ${redisServiceAclRules('bedrock').join(' ')}`,
    );
  });

  it.each(REDIS_ACL_SERVICES)('%s: BullMQ queue, worker, delayed job and queue events under its prefix', async (service) => {
    const url = (await aclUsers()).urls[service]!;
    const name = `raw-${service}`;
    const bull = `${prefix}:q`;
    const queue = new Queue(name, { connection: { url }, prefix: bull });
    const events = new QueueEvents(name, { connection: { url }, prefix: bull });
    const done: string[] = [];
    const worker = new Worker(name, async (job) => `${job.name}:${(job.data as { n: number }).n}`, { connection: { url }, prefix: bull });
    try {
      await events.waitUntilReady();
      const completed = new Promise<string>((resolve) => events.on('completed', ({ jobId }) => jobId === 'delayed-1' && resolve(jobId)));
      worker.on('completed', (job, result: string) => done.push(result));
      await queue.add('now', { n: 1 }, { jobId: 'now-1' });
      await queue.add('later', { n: 2 }, { jobId: 'delayed-1', delay: 200 });
      expect(await queue.getJobCounts('delayed')).toEqual({ delayed: 1 });
      await waitFor(() => done.length === 2, 'both jobs');
      expect(done.sort()).toEqual(['later:2', 'now:1']);
      expect(await completed).toBe('delayed-1');
    } finally {
      await worker.close();
      await events.close();
      await queue.close();
    }
  });

  it.each(REDIS_ACL_SERVICES)('%s: stream XADD, XREAD BLOCK, XRANGE, XTRIM and pub/sub under its prefix', async (service) => {
    const c = await as(service);
    const reader = await as(service);
    const key = `${prefix}:stream:${service}`;
    // Blocks until the first entry (from 0-0: no race with the XADD below).
    const read = reader.xread('BLOCK', 5000, 'STREAMS', key, '0-0');
    await new Promise((r) => setTimeout(r, 50));
    await c.xadd(key, '1-0', 'kind', 'a');
    expect((await read)![0]![1]).toEqual([['1-0', ['kind', 'a']]]);
    await c.xadd(key, '2-0', 'kind', 'b');
    expect((await c.xrange(key, '-', '+')).map(([id]) => id)).toEqual(['1-0', '2-0']);
    expect(await c.xtrim(key, 'MAXLEN', 1)).toBe(1);
    expect(await c.xlen(key)).toBe(1);

    const sub = await as(service);
    const got: string[] = [];
    sub.on('message', (_channel: string, message: string) => got.push(message));
    await sub.subscribe(`${prefix}:cancel:${service}`);
    expect(await c.publish(`${prefix}:cancel:${service}`, 'stop')).toBe(1);
    await waitFor(() => got.length === 1, 'the message');
  });

  it("the hash-tagged keys of the layout (`<prefix>:{tag}:...`, Redis Cluster) match the user pattern; another prefix's do not", async () => {
    const admin = connect(REDIS_URL);
    clients.push(admin);
    const user = (await aclUsers()).users['conversation']!;
    const layout = (p: string) => {
      const k = redisKeys(p);
      return [
        k.stream('c1'),
        k.conversationJobs('c1'),
        k.conversationRuns('c1'),
        k.runRecord('tool/c1/t1'),
        k.runAlive('llm/r1'),
        k.runners,
        k.runnersExpiry,
        k.bullKey('tool-exec', 'wait'),
      ];
    };
    for (const key of layout(prefix)) {
      expect(key).toMatch(/\{/);
      expect([key, String(await admin.call('ACL', 'DRYRUN', user, 'EXISTS', key))]).toEqual([key, 'OK']);
    }
    for (const key of layout(other)) {
      expect([key, String(await admin.call('ACL', 'DRYRUN', user, 'EXISTS', key))]).toEqual([key, expect.stringMatching(/no permissions/)]);
    }
  });

  it.each(REDIS_ACL_SERVICES)(
    '%s: refused other prefixes, CONFIG, FLUSHALL, KEYS, SCAN, ACL and other admin commands (ACL DRYRUN; the harmless ones run)',
    async (service) => {
      const admin = connect(REDIS_URL);
      clients.push(admin);
      await admin.set(`${other}:secret`, 'x');
      const user = (await aclUsers()).users[service]!;
      // On the shared Redis nothing destructive is sent as the user: the admin asks whether it may.
      for (const args of refusedCommands(prefix, other)) {
        const verdict = String(await admin.call('ACL', 'DRYRUN', user, ...args.map(String)));
        expect([args.join(' '), verdict]).toEqual([args.join(' '), expect.stringMatching(/no permissions/)]);
      }
      expect(String(await admin.call('ACL', 'DRYRUN', user, 'GET', `${prefix}:mine`))).toBe('OK');
      const c = await as(service);
      for (const args of harmlessRefusals(prefix, other))
        expect([args.join(' '), await refusedWith(c, args)]).toEqual([args.join(' '), 'NOPERM']);
      expect(await admin.get(`${other}:secret`)).toBe('x');
    },
  );

  it('deleted users can no longer authenticate; cleanup is idempotent', async () => {
    const extra = await createRedisAclUsers({ adminUrl: REDIS_URL, prefix, services: ['probe'] });
    const c = connect(extra.urls.probe!);
    clients.push(c);
    expect(await c.set(`${prefix}:probe`, '1')).toBe('OK');
    await extra.cleanup();
    await extra.cleanup();
    // Redis disconnects the deleted user's clients, and the password no longer works.
    await waitFor(() => c.status !== 'ready', 'the disconnect');
    expect(await refusal(extra.urls.probe!)).toMatch(/^WRONGPASS/);
  });
});

// A redis-server of its own: no job, cancel or event can be forged without credentials, and there
// every refused command is really sent (on the shared Redis only ACL DRYRUN asks).
describe('a Redis whose default user is off', () => {
  let server: ChildProcess;
  let port: number;
  const adminUrl = () => `redis://bedrock-admin:admin-secret@127.0.0.1:${port}`;

  beforeAll(async () => {
    port = await freePort();
    server = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], {
      stdio: 'ignore',
    });
    const boot = new Redis(`redis://127.0.0.1:${port}`, { maxRetriesPerRequest: 0, retryStrategy: () => 50 });
    try {
      await waitFor(async () => (await boot.ping().catch(() => '')) === 'PONG', 'redis-server');
      await boot.call('ACL', 'SETUSER', 'bedrock-admin', 'on', '>admin-secret', '~*', '&*', '+@all');
      await boot.call('ACL', 'SETUSER', 'default', 'off');
    } finally {
      await close(boot);
    }
  });

  afterAll(async () => {
    if (server.exitCode === null) {
      const exited = new Promise((resolve) => server.once('exit', resolve));
      server.kill('SIGTERM');
      await exited;
    }
  });

  it('refuses a connection without credentials; the service users work and are refused the rest for real', async () => {
    expect(await refusal(`redis://127.0.0.1:${port}`)).toMatch(/^NOAUTH/);
    // Without credentials nothing can be forged: no job, no cancel signal, no stream event.
    for (const args of [
      ['PUBLISH', 'bedrock:cancel', '{"conversationId":"c1"}'],
      ['RPUSH', 'bedrock:q:tool-exec:wait', 'forged'],
      ['HSET', 'bedrock:q:tool-exec:forged', 'data', '{}'],
      ['XADD', 'bedrock:conv:c1:events', '*', 'kind', 'stateChanged'],
      ['EVAL', "return redis.call('SET', KEYS[1], 'x')", '1', 'bedrock:x'],
    ]) {
      const out = spawnSync('redis-cli', ['-p', String(port), ...args], { encoding: 'utf8' });
      expect([args[0], `${out.stdout}${out.stderr}`.trim()]).toEqual([args[0], expect.stringMatching(/^NOAUTH/)]);
    }
    expect(await refusal(`redis://default:guess@127.0.0.1:${port}`)).toMatch(/^WRONGPASS/);
    expect(await refusal(`redis://bedrock-tool-runner:guess@127.0.0.1:${port}`)).toMatch(/^WRONGPASS/);

    const local = await createRedisAclUsers({ adminUrl: adminUrl(), prefix: 'bedrock' });
    try {
      expect(new URL(local.urls['tool-runner']!).port).toBe(String(port));
      expect(await refusal(local.urls['tool-runner']!)).toBe('connected: PONG');
      const admin = connect(adminUrl());
      await admin.set('other:secret', 'x');
      try {
        for (const service of REDIS_ACL_SERVICES) {
          const c = connect(local.urls[service]!);
          try {
            expect(await c.set('bedrock:k', service)).toBe('OK');
            // Here every refused command is really sent (DEBUG is refused before ACLs are checked).
            for (const args of refusedCommands('bedrock', 'other').filter((a) => a[0] !== 'DEBUG')) {
              expect([service, args.join(' '), await refusedWith(c, args)]).toEqual([service, args.join(' '), 'NOPERM']);
            }
            for (const args of [
              ['EVAL', "return redis.call('GET', KEYS[1])", 1, 'other:secret'],
              ['EVAL', "return redis.call('GET', 'other:secret')", 0],
              ['EVAL', "return redis.call('FLUSHALL')", 0],
            ]) {
              expect([service, args.join(' '), await refusedWith(c, args)]).toEqual([service, args.join(' '), 'NOPERM']);
            }
          } finally {
            await close(c);
          }
        }
        expect(await admin.get('other:secret')).toBe('x');
        expect(await admin.dbsize()).toBe(2);
      } finally {
        await close(admin);
      }
    } finally {
      await local.cleanup();
    }
  });
});
