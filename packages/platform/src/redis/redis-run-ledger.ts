/**
 * The run ledger on Redis: per piece of work a hash `<prefix>:runs:<key>` (`owner`, `state`,
 * `result`), kept for the completed-job retention, and a liveness key `<prefix>:runs:<key>:alive`
 * (the owner) that expires `aliveTtlMs` after the owner's last heartbeat. Claims and results
 * are Lua scripts, atomic with their checks.
 */
import type { Redis } from 'ioredis';
import type { RunLedger, RunRecord } from '../interfaces.ts';
import { DEFAULT_COMPLETED_RETENTION_MS, DEFAULT_JOB_LOCK_MS } from '../defaults.ts';
import type { RedisKeys } from './redis-keys.ts';
import { luaScript, runScript } from './redis-script.ts';

export interface RedisRunLedgerOptions {
  readonly connection: Redis;
  readonly keys: RedisKeys;
  /** How long a record is kept, ms (the completed-job retention: a job can be redelivered that long). */
  readonly retentionMs?: number;
  /** Liveness window, ms (the job lock duration). */
  readonly aliveTtlMs?: number;
}

/** KEYS record, alive; ARGV owner, retention ms, alive ms. nil when claimed, else {owner, state, result, alive}. */
const CLAIM = luaScript(`
if redis.call('HSETNX', KEYS[1], 'owner', ARGV[1]) == 1 then
  redis.call('HSET', KEYS[1], 'state', 'started')
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  redis.call('SET', KEYS[2], ARGV[1], 'PX', ARGV[3])
  return false
end
local r = redis.call('HMGET', KEYS[1], 'owner', 'state', 'result')
return {r[1] or '', r[2] or 'started', r[3] or false, redis.call('EXISTS', KEYS[2])}
`);

/** KEYS record, alive; ARGV owner, retention ms, alive ms. 1 when the claim is the owner's and running. */
const HEARTBEAT = luaScript(`
local owner = redis.call('HGET', KEYS[1], 'owner')
if not owner then
  redis.call('HSET', KEYS[1], 'owner', ARGV[1], 'state', 'started')
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
elseif owner ~= ARGV[1] or redis.call('HGET', KEYS[1], 'state') ~= 'started' then
  return 0
end
redis.call('SET', KEYS[2], ARGV[1], 'PX', ARGV[3])
return 1
`);

/** KEYS record, alive; ARGV owner, result, retention ms. */
const FINISH = luaScript(`
redis.call('HSET', KEYS[1], 'owner', ARGV[1], 'state', 'finished', 'result', ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
redis.call('DEL', KEYS[2])
return 1
`);

/** KEYS record, alive; ARGV result, retention ms. {owner, state, result} after. */
const SETTLE = luaScript(`
if redis.call('HGET', KEYS[1], 'state') ~= 'finished' then
  redis.call('HSETNX', KEYS[1], 'owner', '')
  redis.call('HSET', KEYS[1], 'state', 'finished', 'result', ARGV[1])
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  redis.call('DEL', KEYS[2])
end
local r = redis.call('HMGET', KEYS[1], 'owner', 'state', 'result')
return {r[1], r[2], r[3]}
`);

type Reply = [string, string, string | null, number?];

function toRecord(reply: Reply): RunRecord {
  const state = reply[1] === 'finished' ? 'finished' : 'started';
  return { owner: reply[0], state, alive: state === 'started' && reply[3] === 1, result: reply[2] ?? null };
}

export function createRedisRunLedger(options: RedisRunLedgerOptions): RunLedger {
  const { connection, keys } = options;
  const retentionMs = Math.max(1, Math.round(options.retentionMs ?? DEFAULT_COMPLETED_RETENTION_MS));
  const aliveTtlMs = Math.max(1, Math.round(options.aliveTtlMs ?? DEFAULT_JOB_LOCK_MS));
  const record = keys.runRecord;
  const alive = keys.runAlive;
  const both = (key: string) => [record(key), alive(key)];

  return {
    aliveTtlMs,
    heartbeatMs: Math.max(1, Math.floor(aliveTtlMs / 4)),

    async claim(key, owner) {
      const reply = (await runScript(connection, CLAIM, both(key), [owner, retentionMs, aliveTtlMs])) as Reply | null;
      return reply ? toRecord(reply) : null;
    },

    async heartbeat(key, owner) {
      return (await runScript(connection, HEARTBEAT, both(key), [owner, retentionMs, aliveTtlMs])) === 1;
    },

    async markAlive(key, owner) {
      await connection.set(alive(key), owner, 'PX', aliveTtlMs);
    },

    async isAlive(key) {
      return (await connection.exists(alive(key))) === 1;
    },

    async finish(key, owner, result) {
      await runScript(connection, FINISH, both(key), [owner, result, retentionMs]);
    },

    async settle(key, result) {
      return toRecord((await runScript(connection, SETTLE, both(key), [result, retentionMs])) as Reply);
    },

    async get(key) {
      const replies = await connection.multi().hmget(record(key), 'owner', 'state', 'result').exists(alive(key)).exec();
      if (!replies) throw new Error('run ledger read was aborted');
      for (const [err] of replies) if (err) throw err;
      const [owner, state, result] = replies[0]![1] as (string | null)[];
      if (owner === null || owner === undefined) return null;
      return toRecord([owner, state ?? 'started', result ?? null, replies[1]![1] as number]);
    },

    async close() {
      // Nothing of its own: it uses the transport's shared connection.
    },
  };
}
