/**
 * The run ledger (at-most-once side effects, liveness of running work) against both
 * implementations: in-process and the real Redis (a prefix unique to this run). Liveness
 * windows are short here (300 ms) so expiry is observed quickly.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Redis } from 'ioredis';
import { createMemoryRunLedger, createRedisRunLedger, redisKeys } from '../src/index.ts';
import type { RunLedger } from '../src/index.ts';
import { waitFor } from './transport-contract-support.ts';
import { REDIS_URL, deleteKeys, uniquePrefix } from './redis-helpers.ts';

const ALIVE_MS = 300;
const prefix = uniquePrefix('runs');
let redis: Redis;

beforeAll(() => {
  redis = new Redis(REDIS_URL);
});
afterAll(async () => {
  await deleteKeys(prefix);
  await redis.quit();
});

let counter = 0;
const key = (what: string) => `tool/conv-${++counter}/${what}`;

describe.each([
  ['in-process', () => createMemoryRunLedger({ aliveTtlMs: ALIVE_MS, retentionMs: 60_000 })],
  ['redis', () => createRedisRunLedger({ connection: redis, keys: redisKeys(prefix), aliveTtlMs: ALIVE_MS, retentionMs: 60_000 })],
] as const)('%s run ledger', (_name, make) => {
  let ledger: RunLedger;
  beforeAll(() => {
    ledger = make();
  });

  it("forgets a conversation's tool records, results included, and no other's", async () => {
    const [a, b, other] = ['conv-forget/t1', 'conv-forget/t2', 'conv-keep/t1'].map((k) => `tool/${k}`);
    expect(await ledger.claim(a!, 'r#1')).toBeNull();
    await ledger.finish(a!, 'r#1', 'secret output');
    expect(await ledger.claim(b!, 'r#1')).toBeNull();
    await ledger.settle(other!, 'kept');
    await ledger.markAlive('llm/req-1', 'g#1');
    expect(await ledger.removeConversation('conv-forget')).toBe(2);
    expect(await ledger.get(a!)).toBeNull();
    expect(await ledger.get(b!)).toBeNull();
    expect(await ledger.isAlive(b!)).toBe(false);
    expect((await ledger.get(other!))?.result).toBe('kept');
    expect(await ledger.isAlive('llm/req-1')).toBe(true);
    expect(await ledger.removeConversation('conv-forget')).toBe(0);
  });

  it('beats four times per liveness window', () => {
    expect(ledger.aliveTtlMs).toBe(ALIVE_MS);
    expect(ledger.heartbeatMs).toBe(ALIVE_MS / 4);
  });

  it('lets exactly one owner claim a key; the others see its claim', async () => {
    const k = key('claim');
    const claims = await Promise.all(['a#1', 'b#1', 'c#1', 'd#1'].map((owner) => ledger.claim(k, owner)));
    const winners = claims.filter((c) => c === null);
    expect(winners).toHaveLength(1);
    const winner = ['a#1', 'b#1', 'c#1', 'd#1'][claims.indexOf(null)]!;
    for (const c of claims.filter((x) => x !== null)) expect(c).toEqual({ owner: winner, state: 'started', alive: true, result: null });
    expect(await ledger.get(k)).toEqual({ owner: winner, state: 'started', alive: true, result: null });
  });

  it('keeps a claim alive with heartbeats, and shows it dead once they stop', async () => {
    const k = key('alive');
    expect(await ledger.claim(k, 'a#1')).toBeNull();
    for (let i = 0; i < 4; i++) {
      await new Promise((r) => setTimeout(r, ALIVE_MS / 2));
      expect(await ledger.heartbeat(k, 'a#1')).toBe(true);
      expect((await ledger.get(k))?.alive).toBe(true);
    }
    await waitFor(async () => (await ledger.get(k))?.alive === false, 'the claim to look dead');
    // Still claimed: nobody else may run it.
    expect(await ledger.claim(k, 'b#1')).toEqual({ owner: 'a#1', state: 'started', alive: false, result: null });
  });

  it('refuses a heartbeat from another owner, and after the run finished', async () => {
    const k = key('other');
    await ledger.claim(k, 'a#1');
    expect(await ledger.heartbeat(k, 'b#1')).toBe(false);
    await ledger.finish(k, 'a#1', 'done');
    expect(await ledger.heartbeat(k, 'a#1')).toBe(false);
    expect(await ledger.get(k)).toEqual({ owner: 'a#1', state: 'finished', alive: false, result: 'done' });
  });

  it('re-creates a claim its owner still beats for when the store lost it (a Redis restart)', async () => {
    const k = key('recreate');
    expect(await ledger.heartbeat(k, 'a#1')).toBe(true);
    expect(await ledger.get(k)).toEqual({ owner: 'a#1', state: 'started', alive: true, result: null });
    expect(await ledger.claim(k, 'b#1')).toMatchObject({ owner: 'a#1' });
  });

  it('returns the recorded result to a later claim (a redelivery after completion)', async () => {
    const k = key('finished');
    await ledger.claim(k, 'a#1');
    await ledger.finish(k, 'a#1', '{"content":"hello"}');
    expect(await ledger.claim(k, 'b#1')).toEqual({ owner: 'a#1', state: 'finished', alive: false, result: '{"content":"hello"}' });
  });

  it('settles an unfinished run with the given result, but never replaces a recorded one', async () => {
    const dead = key('dead');
    await ledger.claim(dead, 'a#1');
    expect(await ledger.settle(dead, 'interrupted')).toEqual({ owner: 'a#1', state: 'finished', alive: false, result: 'interrupted' });
    expect(await ledger.settle(dead, 'again')).toMatchObject({ result: 'interrupted' });

    const done = key('done');
    await ledger.claim(done, 'a#1');
    await ledger.finish(done, 'a#1', 'real');
    expect(await ledger.settle(done, 'interrupted')).toMatchObject({ state: 'finished', result: 'real' });

    // Nothing recorded at all (lost with the store): settling records it.
    const unknown = key('unknown');
    expect(await ledger.settle(unknown, 'interrupted')).toMatchObject({ state: 'finished', result: 'interrupted' });
  });

  it('keeps liveness without a claim for work that may be repeated', async () => {
    const k = `llm/req-${++counter}`;
    expect(await ledger.isAlive(k)).toBe(false);
    await ledger.markAlive(k, 'gw#1');
    expect(await ledger.isAlive(k)).toBe(true);
    expect(await ledger.get(k)).toBeNull();
    await waitFor(async () => !(await ledger.isAlive(k)), 'the request to look dead');
  });

  it('answers null for a key nobody claimed', async () => {
    expect(await ledger.get(key('nothing'))).toBeNull();
  });
});

describe('redis run ledger layout', () => {
  it('keeps a hash per run and a liveness key, both under the prefix, the record with the retention', async () => {
    const ledger = createRedisRunLedger({ connection: redis, keys: redisKeys(prefix), aliveTtlMs: 5000, retentionMs: 60_000 });
    await ledger.claim('tool/c1/tu1', 'runner-1#ab');
    const keys = redisKeys(prefix);
    expect(await redis.hgetall(keys.runRecord('tool/c1/tu1'))).toEqual({ owner: 'runner-1#ab', state: 'started' });
    expect(await redis.get(keys.runAlive('tool/c1/tu1'))).toBe('runner-1#ab');
    expect(await redis.pttl(keys.runRecord('tool/c1/tu1'))).toBeGreaterThan(50_000);
    expect(await redis.pttl(keys.runAlive('tool/c1/tu1'))).toBeLessThanOrEqual(5000);
    await ledger.finish('tool/c1/tu1', 'runner-1#ab', 'r');
    expect(await redis.exists(keys.runAlive('tool/c1/tu1'))).toBe(0);
  });
});
