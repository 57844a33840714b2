/**
 * What only the Redis transport has: the key layout operators rely on (docs/transports.md),
 * readable payloads, trimming and expiry, prefix isolation, and settings from the environment.
 * Runs on the real Redis with a prefix unique to this file.
 */
import { describe, it, expect, beforeAll, afterAll } from '@jest/globals';
import { create } from '@bufbuild/protobuf';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { CancelSignalSchema, ConversationEventSchema, LlmRequestJobSchema, RunnerCapabilitiesSchema } from '@bedrock/contracts';
import { STREAM_START, createRedisTransport, redisKeys } from '../src/index.ts';
import { loadConfig } from '../src/config/config.ts';
import { redisSection } from '../src/config/common.ts';
import type { Transport } from '../src/index.ts';
import { waitFor } from './transport-contract-support.ts';
import { REDIS_URL, deleteKeys, uniquePrefix } from './redis-helpers.ts';
import { keySlot } from '../src/redis/cluster-slot.ts';
import { STREAM_BUCKETS } from '../src/redis/redis-keys.ts';

const prefix = uniquePrefix('redis');
const keys = redisKeys(prefix);

describe('redis transport specifics', () => {
  let t: Transport;
  let redis: Redis;

  beforeAll(() => {
    t = createRedisTransport({ redisUrl: REDIS_URL, prefix, streamMaxLen: 20, streamTtlMs: 60_000 });
    redis = new Redis(REDIS_URL);
  });

  afterAll(async () => {
    await t.close();
    await deleteKeys(prefix);
    // Nothing may be left under the prefix once the test data is deleted.
    expect(await redis.keys(`${prefix}:*`)).toEqual([]);
    await redis.quit();
  });

  it('lays out every key under the prefix (the documented names with the default `bedrock`), hash-tagged', () => {
    const k = redisKeys('bedrock');
    expect(k).toMatchObject({
      bullPrefix: 'bedrock:q',
      cancelChannel: 'bedrock:cancel',
      runners: 'bedrock:{runners}',
      runnersExpiry: 'bedrock:{runners}:expiry',
    });
    const tag = /^bedrock:(\{c\d\d-\d+\}):/.exec(k.stream('c1'))![1]!;
    expect([k.stream('c1'), k.bullKey('llm-requests', 'wait'), k.runRecord('tool/c1/t1'), k.runAlive('llm/r1')]).toEqual([
      `bedrock:${tag}:conv:c1:events`,
      'bedrock:q:{llm-requests}:wait',
      `bedrock:${tag}:runs:tool/c1/t1`,
      expect.stringMatching(/^bedrock:\{c\d\d-\d+\}:runs:llm\/r1:alive$/),
    ]);
    expect(k.bullQueueName('llm-requests')).toBe('{llm-requests}');
    // What one script or MULTI touches together is in one slot.
    const slot = (key: string) => keySlot(key);
    for (const [a, b] of [
      [k.stream('c1'), k.conversationJobs('c1')],
      [k.conversationRuns('c1'), k.runRecord('tool/c1/t9')],
      [k.runRecord('tool/c1/t9'), k.runAlive('tool/c1/t9')],
      [k.runRecord('llm/r1'), k.runAlive('llm/r1')],
      [k.runners, k.runnersExpiry],
      [k.bullKey('tool-exec', 'wait'), k.bullKey('tool-exec', 'x%3Ay')],
    ]) {
      expect([a, slot(a!)]).toEqual([a, slot(b!)]);
    }
    expect(k.runRecordPrefix('c1') + 'tool/c1/t9').toBe(k.runRecord('tool/c1/t9'));
    // The buckets spread over the slot space: bucket i in the i-th sixteenth.
    const slots = new Set<number>();
    for (let i = 0; i < 2000; i++) slots.add(Math.floor(slot(k.stream(`conv-${i}`)) / (16384 / STREAM_BUCKETS)));
    expect(slots.size).toBe(STREAM_BUCKETS);
    const s = redisKeys('staging');
    for (const key of [
      s.stream('c1'),
      s.cancelChannel,
      s.runners,
      s.runnersExpiry,
      s.bullKey('q', 'wait'),
      s.runRecord('x'),
      s.runAlive('x'),
    ]) {
      expect(key.startsWith('staging:')).toBe(true);
    }
    expect(() => redisKeys('')).toThrow();
  });

  it('splits queues into partitions with their own tags, placed over the slot space; one partition is the plain layout', () => {
    const one = redisKeys('bedrock');
    expect([one.queuePartitions, one.partitionOf('conv-1'), one.bullKey('tool-exec', 'wait', 0)]).toEqual([
      1,
      0,
      'bedrock:q:{tool-exec}:wait',
    ]);
    expect(() => one.bullQueueName('tool-exec', 1)).toThrow(/partition 1 out of 0..0/);
    const k = redisKeys('bedrock', { queuePartitions: 3 });
    // The names docs/deploy.md and the prod-ha overlay use.
    expect([0, 1, 2].map((p) => k.bullKey('llm-requests', 'wait', p))).toEqual([
      'bedrock:q:{llm-requests.p0-940}:wait',
      'bedrock:q:{llm-requests.p1-526}:wait',
      'bedrock:q:{llm-requests.p2-804}:wait',
    ]);
    for (const n of [2, 3, 4, 6, 12, 24]) {
      const keys = redisKeys('bedrock', { queuePartitions: n });
      for (let p = 0; p < n; p++) {
        // Near the middle of its 1/n of the slots.
        const slot = keySlot(keys.bullKey('conversation-events', 'wait', p));
        expect([n, p, Math.abs(slot - (p + 0.5) * (16384 / n)) <= 8]).toEqual([n, p, true]);
        // Every key of one partition in one slot.
        expect(keySlot(keys.bullKey('conversation-events', 'x%3Ay', p))).toBe(slot);
      }
      // Stable, and every partition used.
      const used = new Set(Array.from({ length: 50 * n }, (_, i) => keys.partitionOf(`conv-${i}`)));
      expect(used.size).toBe(n);
      expect(keys.partitionOf('conv-7')).toBe(redisKeys('other', { queuePartitions: n }).partitionOf('conv-7'));
    }
    expect(() => redisKeys('bedrock', { queuePartitions: 0 })).toThrow(/1..256/);
    expect(() => redisKeys('bedrock', { queuePartitions: 257 })).toThrow(/1..256/);
    expect(loadConfig(redisSection, {}).queuePartitions).toBe(1);
    expect(loadConfig(redisSection, { BEDROCK_QUEUE_PARTITIONS: '12' }).queuePartitions).toBe(12);
    expect(() => loadConfig(redisSection, { BEDROCK_QUEUE_PARTITIONS: '0' })).toThrow(/BEDROCK_QUEUE_PARTITIONS="0" is invalid/);
  });

  it('BullMQ itself refuses ids with a colon, which is why ids are encoded', async () => {
    const queue = new Queue('raw-ids', { connection: { url: REDIS_URL }, prefix: keys.bullPrefix });
    try {
      await expect(queue.add('x', {}, { jobId: 'conv-1:llm' })).rejects.toThrow(/cannot contain :/);
      await expect(queue.add('x', {}, { jobId: '42' })).rejects.toThrow(/integers/);
    } finally {
      await queue.close();
    }
  });

  it('stores jobs as readable protobuf JSON under an encoded id, with retention set', async () => {
    const producer = t.queues.producer('readable', LlmRequestJobSchema);
    const job = create(LlmRequestJobSchema, { requestId: 'r-1', conversationId: 'c-1', notifySequence: 7n });
    expect(await producer.add('c-1:llm:1', job, { delayMs: 60_000 })).toBe(true);
    const hash = await redis.hgetall(keys.bullKey('readable', 'c-1%3Allm%3A1'));
    expect(JSON.parse(hash.data!)).toEqual({ requestId: 'r-1', conversationId: 'c-1', notifySequence: '7' });
    expect(hash.name).toMatch(/^bedrock\.internal\.v1\.LlmRequestJob\//);
    expect(JSON.parse(hash.opts!)).toMatchObject({ removeOnComplete: { age: 86_400 }, removeOnFail: { age: 604_800 } });
    expect(await producer.remove('c-1:llm:1')).toBe(true);
  });

  it('stores stream entries with kind and JSON event fields, an expiry, and trims to about maxLen', async () => {
    const key = keys.stream('trim');
    for (let seq = 1n; seq <= 200n; seq++) {
      const event = create(ConversationEventSchema, {
        conversationId: 'trim',
        sequence: seq,
        kind: { case: 'contextExhausted', value: { summary: `s${seq}` } },
      });
      expect(await t.streams.appendDurable(event)).toBe(true);
    }
    const length = await redis.xlen(key);
    // MAXLEN ~ trims whole radix-tree nodes, so the length is near, not exactly, maxLen.
    expect(length).toBeLessThan(200);
    expect(length).toBeGreaterThanOrEqual(20);
    const ttl = await redis.pttl(key);
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(60_000);
    const [entry] = await redis.xrevrange(key, '+', '-', 'COUNT', 1);
    expect(entry![0]).toBe('200-0');
    expect(entry![1]).toEqual(['kind', 'contextExhausted', 'event', expect.any(String)]);
    expect(JSON.parse(entry![1][3]!)).toMatchObject({ conversationId: 'trim', sequence: '200', contextExhausted: { summary: 's200' } });
    // A re-publish of a trimmed-away position is still refused.
    expect(await t.streams.appendDurable(create(ConversationEventSchema, { conversationId: 'trim', sequence: 3n }))).toBe(false);
    expect(await t.streams.last('trim')).toEqual({ sequence: 200n, deltaIndex: 0 });
  });

  it('follows many streams over a few connections (multi-stream blocking reads)', async () => {
    const convs = Array.from({ length: 40 }, (_, i) => `follow-${process.pid}-${i}`);
    const got = new Map<string, number>();
    const follows = convs.map((c) => t.streams.follow(c, STREAM_START, (events) => got.set(c, (got.get(c) ?? 0) + events.length)));
    await new Promise((resolve) => setTimeout(resolve, 100));
    const followers = String(await redis.call('CLIENT', 'LIST'))
      .split('\n')
      .filter((l) => l.includes('name=bedrock-stream-follower')).length;
    expect(followers).toBeGreaterThan(0);
    expect(followers).toBeLessThanOrEqual(4);
    for (const c of convs) {
      await t.streams.appendDurable(
        create(ConversationEventSchema, { conversationId: c, sequence: 1n, kind: { case: 'contextExhausted', value: { summary: 's' } } }),
      );
    }
    await waitFor(() => convs.every((c) => got.get(c) === 1), 'every followed stream');
    for (const f of follows) f.stop();
  });

  it('keeps runners in a readable hash with a server-clock expiry set', async () => {
    await t.runners.report(create(RunnerCapabilitiesSchema, { runnerId: 'r-hash', hostname: 'h' }), 30_000);
    expect(JSON.parse((await redis.hget(keys.runners, 'r-hash'))!)).toEqual({ runnerId: 'r-hash', hostname: 'h' });
    expect(Number(await redis.zscore(keys.runnersExpiry, 'r-hash'))).toBeGreaterThan(Date.now() - 60_000);
    expect(await redis.pttl(keys.runners)).toBeGreaterThan(0);
    await t.runners.remove('r-hash');
    expect(await redis.hexists(keys.runners, 'r-hash')).toBe(0);
  });

  it('isolates deployments with different prefixes', async () => {
    const otherPrefix = `${prefix}-other`;
    const other = createRedisTransport({ redisUrl: REDIS_URL, prefix: otherPrefix });
    try {
      const event = create(ConversationEventSchema, { conversationId: 'iso', sequence: 1n });
      expect(await t.streams.appendDurable(event)).toBe(true);
      expect(await other.streams.appendDurable(event)).toBe(true);
      expect(await other.streams.read('iso', STREAM_START)).toHaveLength(1);
      const seen: string[] = [];
      const unsubscribe = await other.cancels.subscribe((s) => seen.push(s.conversationId));
      const unsubscribeHere = await t.cancels.subscribe((s) => seen.push(`here:${s.conversationId}`));
      await t.cancels.publish(create(CancelSignalSchema, { conversationId: 'x' }));
      await waitFor(() => seen.includes('here:x'), 'the local subscriber');
      // Had the other deployment's subscriber been on the same channel, it would get x before y.
      await other.cancels.publish(create(CancelSignalSchema, { conversationId: 'y' }));
      await waitFor(() => seen.includes('y'), 'the other deployment');
      expect(seen).toEqual(['here:x', 'y']);
      await unsubscribe();
      await unsubscribeHere();
    } finally {
      await other.close();
      await deleteKeys(otherPrefix);
    }
  });

  it('reads its settings from the environment, durations with their unit', () => {
    const defaults = loadConfig(redisSection, {});
    expect(defaults).toMatchObject({ url: 'redis://127.0.0.1:6379', prefix: 'bedrock', completedJobRetention: 24 * 3_600_000 });
    expect(
      loadConfig(redisSection, {
        REDIS_URL: 'redis://redis:6380/2',
        BEDROCK_REDIS_PREFIX: 'staging',
        BEDROCK_COMPLETED_JOB_RETENTION: '1h',
        BEDROCK_STREAM_MAXLEN: '500',
      }),
    ).toMatchObject({ url: 'redis://redis:6380/2', prefix: 'staging', completedJobRetention: 3_600_000, streamMaxLen: 500 });
    expect(() => loadConfig(redisSection, { BEDROCK_STREAM_TTL: 'soon' })).toThrow(/BEDROCK_STREAM_TTL="soon" is invalid/);
  });
});
