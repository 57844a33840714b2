/** Runs a Lua script by its SHA1, loading it on the first NOSCRIPT (after a restart or FLUSH). */
import { createHash } from 'node:crypto';
import type { RedisClient } from './redis-connection.ts';

export interface LuaScript {
  readonly lua: string;
  readonly sha: string;
}

export function luaScript(lua: string): LuaScript {
  return { lua, sha: createHash('sha1').update(lua).digest('hex') };
}

export async function runScript(redis: RedisClient, script: LuaScript, keys: string[], args: (string | number)[]): Promise<unknown> {
  try {
    return await redis.evalsha(script.sha, keys.length, ...keys, ...args);
  } catch (error) {
    if (!(error instanceof Error) || !error.message.startsWith('NOSCRIPT')) throw error;
    return redis.eval(script.lua, keys.length, ...keys, ...args);
  }
}
