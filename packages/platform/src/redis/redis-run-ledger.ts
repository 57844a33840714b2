/**
 * The run ledger on Redis: per piece of work a hash `runRecord(key)` (`owner`, `state`,
 * `result`), kept for the completed-job retention, and a liveness key `runAlive(key)`
 * (the owner) that expires `aliveTtlMs` after the owner's last heartbeat. Claims and results
 * are Lua scripts, atomic with their checks. A script's keys (record, liveness, the conversation's
 * set) share one hash tag (redis-keys.ts), so they run on a Redis Cluster as on one Redis.
 */
import type { RedisClient } from './redis-connection.ts';
import { conversationOfRunKey } from '@bedrock/contracts';
import type { RunLedger, RunRecord } from '../interfaces.ts';
import { DEFAULT_COMPLETED_RETENTION_MS, DEFAULT_JOB_LOCK_MS } from '../defaults.ts';
import type { RedisKeys } from './redis-keys.ts';
import { luaScript, runScript } from './redis-script.ts';

export interface RedisRunLedgerOptions {
  readonly connection: RedisClient;
  readonly keys: RedisKeys;
  /** How long a record is kept, ms (the completed-job retention: a job can be redelivered that long). */
  readonly retentionMs?: number;
  /** Liveness window, ms (the job lock duration). */
  readonly aliveTtlMs?: number;
}

/**
 * A tool call's record is listed in its conversation's set (KEYS[3], `conversationRuns`; absent
 * for keys of no conversation) when it is written, so that deleting the conversation finds it.
 * The set lives as long as the records it lists. ARGV[4] is the run key.
 */
const INDEX = `
if KEYS[3] then
  redis.call('SADD', KEYS[3], ARGV[4])
  redis.call('PEXPIRE', KEYS[3], ARGV[2])
end
`;

/** KEYS record, alive, [index]; ARGV owner, retention ms, alive ms, run key. nil when claimed, else {owner, state, result, alive}. */
const CLAIM = luaScript(`
if redis.call('HSETNX', KEYS[1], 'owner', ARGV[1]) == 1 then
  ${INDEX}
  redis.call('HSET', KEYS[1], 'state', 'started')
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  redis.call('SET', KEYS[2], ARGV[1], 'PX', ARGV[3])
  return false
end
local r = redis.call('HMGET', KEYS[1], 'owner', 'state', 'result')
return {r[1] or '', r[2] or 'started', r[3] or false, redis.call('EXISTS', KEYS[2])}
`);

/** KEYS record, alive, [index]; ARGV owner, retention ms, alive ms, run key. 1 when the claim is the owner's and running. */
const HEARTBEAT = luaScript(`
local owner = redis.call('HGET', KEYS[1], 'owner')
if not owner then
  ${INDEX}
  redis.call('HSET', KEYS[1], 'owner', ARGV[1], 'state', 'started')
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
elseif owner ~= ARGV[1] or redis.call('HGET', KEYS[1], 'state') ~= 'started' then
  return 0
end
redis.call('SET', KEYS[2], ARGV[1], 'PX', ARGV[3])
return 1
`);

/** KEYS record, alive, [index]; ARGV owner, retention ms, result, run key. */
const FINISH = luaScript(`
${INDEX}
redis.call('HSET', KEYS[1], 'owner', ARGV[1], 'state', 'finished', 'result', ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
redis.call('DEL', KEYS[2])
return 1
`);

/** KEYS record, alive, [index]; ARGV unused, retention ms, result, run key. {owner, state, result} after. */
const SETTLE = luaScript(`
if redis.call('HGET', KEYS[1], 'state') ~= 'finished' then
  ${INDEX}
  redis.call('HSETNX', KEYS[1], 'owner', '')
  redis.call('HSET', KEYS[1], 'state', 'finished', 'result', ARGV[3])
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  redis.call('DEL', KEYS[2])
end
local r = redis.call('HMGET', KEYS[1], 'owner', 'state', 'result')
return {r[1], r[2], r[3]}
`);

/** KEYS index; ARGV the records' key prefix (`runRecordPrefix`, in the index's slot). Deletes every listed record, its liveness and the set; the count. */
const REMOVE = luaScript(`
local keys = redis.call('SMEMBERS', KEYS[1])
for _, key in ipairs(keys) do
  redis.call('DEL', ARGV[1] .. key, ARGV[1] .. key .. ':alive')
end
redis.call('DEL', KEYS[1])
return #keys
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
  /** The record, its liveness, and its conversation's set when it has one. */
  const both = (key: string) => {
    const conversation = conversationOfRunKey(key);
    return conversation === null ? [record(key), alive(key)] : [record(key), alive(key), keys.conversationRuns(conversation)];
  };

  return {
    aliveTtlMs,
    heartbeatMs: Math.max(1, Math.floor(aliveTtlMs / 4)),

    async claim(key, owner) {
      const reply = (await runScript(connection, CLAIM, both(key), [owner, retentionMs, aliveTtlMs, key])) as Reply | null;
      return reply ? toRecord(reply) : null;
    },

    async heartbeat(key, owner) {
      return (await runScript(connection, HEARTBEAT, both(key), [owner, retentionMs, aliveTtlMs, key])) === 1;
    },

    async markAlive(key, owner) {
      await connection.set(alive(key), owner, 'PX', aliveTtlMs);
    },

    async isAlive(key) {
      return (await connection.exists(alive(key))) === 1;
    },

    async finish(key, owner, result) {
      await runScript(connection, FINISH, both(key), [owner, retentionMs, result, key]);
    },

    async settle(key, result) {
      return toRecord((await runScript(connection, SETTLE, both(key), ['', retentionMs, result, key])) as Reply);
    },

    async get(key) {
      const replies = await connection.multi().hmget(record(key), 'owner', 'state', 'result').exists(alive(key)).exec();
      if (!replies) throw new Error('run ledger read was aborted');
      for (const [err] of replies) if (err) throw err;
      const [owner, state, result] = replies[0]![1] as (string | null)[];
      if (owner === null || owner === undefined) return null;
      return toRecord([owner, state ?? 'started', result ?? null, replies[1]![1] as number]);
    },

    async removeConversation(conversationId) {
      return (await runScript(
        connection,
        REMOVE,
        [keys.conversationRuns(conversationId)],
        [keys.runRecordPrefix(conversationId)],
      )) as number;
    },

    async close() {
      // Nothing of its own: it uses the transport's shared connection.
    },
  };
}
