/**
 * Runner registry in two keys: a hash (runner id -> RunnerCapabilities as protobuf JSON, as
 * `HGETALL` shows it) and a sorted set of the same ids scored by expiry time. Expiry uses
 * the Redis server clock (TIME inside the scripts), so runners with skewed clocks agree.
 * Stale runners are dropped on every list(); both keys expire with the longest-lived runner.
 */
import { fromJsonString, toJsonString } from '@bufbuild/protobuf';
import { RunnerCapabilitiesSchema } from '@bedrock/contracts';
import type { RunnerCapabilities } from '@bedrock/contracts';
import type { RedisClient } from './redis-connection.ts';
import type { RunnerRegistry } from '../interfaces.ts';
import type { RedisKeys } from './redis-keys.ts';
import { luaScript, runScript } from './redis-script.ts';

const NOW_MS = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
`;

/** KEYS hash, expiry zset; ARGV runner id, capabilities JSON, ttl ms. */
const REPORT = luaScript(`${NOW_MS}
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('ZADD', KEYS[2], now + tonumber(ARGV[3]), ARGV[1])
local latest = redis.call('ZRANGE', KEYS[2], 0, 0, 'REV', 'WITHSCORES')
local keep = math.max(1, math.ceil(tonumber(latest[2]) - now))
redis.call('PEXPIRE', KEYS[1], keep)
redis.call('PEXPIRE', KEYS[2], keep)
return 1
`);

/** KEYS hash, expiry zset. Drops expired runners, returns the rest as [id, json, ...]. */
const LIST = luaScript(`${NOW_MS}
local stale = redis.call('ZRANGE', KEYS[2], '-inf', now, 'BYSCORE')
for _, id in ipairs(stale) do
  redis.call('HDEL', KEYS[1], id)
  redis.call('ZREM', KEYS[2], id)
end
return redis.call('HGETALL', KEYS[1])
`);

export function createRedisRunnerRegistry(connection: RedisClient, keys: RedisKeys): RunnerRegistry {
  return {
    async report(capabilities: RunnerCapabilities, ttlMs: number): Promise<void> {
      if (capabilities.runnerId === '') throw new Error('runner id must not be empty');
      const json = toJsonString(RunnerCapabilitiesSchema, capabilities);
      await runScript(
        connection,
        REPORT,
        [keys.runners, keys.runnersExpiry],
        [capabilities.runnerId, json, Math.max(1, Math.round(ttlMs))],
      );
    },

    async list(): Promise<RunnerCapabilities[]> {
      const flat = (await runScript(connection, LIST, [keys.runners, keys.runnersExpiry], [])) as string[];
      const runners: RunnerCapabilities[] = [];
      for (let i = 1; i < flat.length; i += 2) {
        runners.push(fromJsonString(RunnerCapabilitiesSchema, flat[i]!, { ignoreUnknownFields: true }));
      }
      return runners;
    },

    async remove(runnerId: string): Promise<void> {
      await connection.multi().hdel(keys.runners, runnerId).zrem(keys.runnersExpiry, runnerId).exec();
    },

    async close(): Promise<void> {
      // Nothing of its own: it uses the transport's shared connection.
    },
  };
}
