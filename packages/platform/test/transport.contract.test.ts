/**
 * Runs the transport contract against both implementations: the in-process one (a single
 * shared instance, as every service of the embedded process shares it) and the Redis one
 * (a fresh transport per "replica", on the real Redis with a prefix unique to this run).
 */
import { createMemoryTransport, createRedisTransport } from '../src/index.ts';
import type { Transport } from '../src/index.ts';
import { transportContract } from './transport-contract.ts';
import { REDIS_URL, deleteKeys, uniquePrefix } from './redis-helpers.ts';

let memory: Transport | undefined;
transportContract('in-process', {
  async make() {
    memory ??= createMemoryTransport();
    return memory;
  },
});

const prefix = uniquePrefix('contract');
transportContract('redis', {
  async make() {
    return createRedisTransport({ redisUrl: REDIS_URL, prefix });
  },
  async cleanup() {
    await deleteKeys(prefix);
  },
});
