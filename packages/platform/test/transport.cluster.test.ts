/**
 * The Redis transport on a Redis Cluster of its own (3 masters + 3 replicas, redis-server processes on free
 * ports): the whole transport contract with `cluster: true`, then what only a cluster shows: one
 * conversation bucket's keys share a slot and the buckets land on every master; a follow of many
 * conversations reads from every master; a master killed (its replica promoted) loses no follow, no
 * consumer, no cancel subscription, and nothing that was replicated before the kill.
 */
import { afterAll, describe, expect, it } from '@jest/globals';
import { create } from '@bufbuild/protobuf';
import { Cluster } from 'ioredis';
import { CancelSignalSchema, ConversationEventSchema, LlmRequestJobSchema, type ConversationEvent } from '@bedrock/contracts';
import { startRedisCluster, type LocalRedisCluster } from '@bedrock/testkit/redis-cluster';
import { STREAM_START, createRedisTransport, redisKeys } from '../src/index.ts';
import type { Transport } from '../src/index.ts';
import { keySlot } from '../src/redis/cluster-slot.ts';
import { transportContract } from './transport-contract.ts';
import { waitFor } from './transport-contract-support.ts';
import { queuePartitionsContract } from './queue-partitions-contract.ts';
import { uniquePrefix } from './redis-helpers.ts';

let started: Promise<LocalRedisCluster> | undefined;
const redisCluster = () => (started ??= startRedisCluster());
afterAll(async () => {
  if (started) await (await started).stop();
});

// The contract with the queues in 3 partitions (one per master); one partition is the code path
// of one Redis, which transport.contract.test.ts runs.
const prefix = uniquePrefix('cluster-contract');
transportContract('redis-cluster with 3 queue partitions', {
  async make() {
    return createRedisTransport({ redisUrl: (await redisCluster()).url, cluster: true, prefix, queuePartitions: 3 });
  },
});

let admin: Cluster | undefined;
const adminClient = async () => {
  if (!admin) {
    admin = new Cluster([{ host: '127.0.0.1', port: (await redisCluster()).ports[0]! }]);
    await admin.ping();
  }
  return admin;
};
afterAll(() => admin?.disconnect());
queuePartitionsContract('redis-cluster', {
  masters: 3,
  async make(p, queuePartitions) {
    return createRedisTransport({ redisUrl: (await redisCluster()).url, cluster: true, prefix: p, queuePartitions });
  },
  async exists(key) {
    return (await (await adminClient()).exists(key)) === 1;
  },
  async masterOfSlot(slot) {
    const node = (await adminClient()).slots[slot]![0]!;
    return Number(node.split(':')[1]);
  },
});

function event(conversationId: string, sequence: number): ConversationEvent {
  return create(ConversationEventSchema, {
    conversationId,
    sequence: BigInt(sequence),
    kind: { case: 'contextExhausted', value: { summary: `m${sequence}` } },
  });
}

describe('on a Redis Cluster', () => {
  const transports: Transport[] = [];
  const open = async (p: string) => {
    const t = createRedisTransport({
      redisUrl: (await redisCluster()).url,
      cluster: true,
      prefix: p,
      lockDurationMs: 1000,
      stalledIntervalMs: 500,
      onError: () => undefined,
    });
    transports.push(t);
    return t;
  };
  afterAll(async () => {
    await Promise.all(transports.map((t) => t.close()));
  }, 30_000);

  it('spreads the conversations over every master; one follow reads them all', async () => {
    const c = await redisCluster();
    const p = uniquePrefix('cluster-spread');
    const t = await open(p);
    const keys = redisKeys(p);
    const ids = Array.from({ length: 40 }, (_, i) => `conv-${i}`);
    const admin = new Cluster([{ host: '127.0.0.1', port: c.ports[0]! }]);
    try {
      // Which master serves each conversation's stream: all three are used.
      await admin.ping();
      const nodes = new Set(ids.map((id) => admin.slots[keySlot(keys.stream(id))]![0]));
      expect(nodes.size).toBe(3);
    } finally {
      admin.disconnect();
    }
    const seen = new Map<string, number>();
    const follows = ids.map((id) => t.streams.follow(id, STREAM_START, (events) => seen.set(id, (seen.get(id) ?? 0) + events.length)));
    for (const id of ids) for (let s = 1; s <= 3; s++) expect(await t.streams.appendDurable(event(id, s))).toBe(true);
    await waitFor(async () => ids.every((id) => seen.get(id) === 3), 'every event followed', 10_000);
    for (const f of follows) f.stop();
  });

  it('a killed master: its replica takes over, follows and consumers carry on, nothing acknowledged is lost', async () => {
    const c = await redisCluster();
    const p = uniquePrefix('cluster-failover');
    const producer = await open(p);
    const consumer = await open(p);
    const ids = Array.from({ length: 24 }, (_, i) => `fo-${i}`);
    const seen = new Map<string, bigint>();
    const follows = ids.map((id) =>
      consumer.streams.follow(id, STREAM_START, (events) => seen.set(id, events[events.length - 1]!.sequence)),
    );
    const handled = new Set<string>();
    const worker = consumer.queues.consume('fo-jobs', LlmRequestJobSchema, async (job) => {
      handled.add(job.data.requestId);
    });
    const cancels: string[] = [];
    await consumer.cancels.subscribe((signal) => cancels.push(signal.conversationId));
    const jobs = producer.queues.producer('fo-jobs', LlmRequestJobSchema);
    let n = 0;
    const round = async () => {
      n++;
      for (const id of ids) await producer.streams.appendDurable(event(id, n));
      await jobs.add(`job-${n}`, create(LlmRequestJobSchema, { requestId: `r-${n}`, conversationId: ids[n % ids.length]! }));
    };
    for (let i = 0; i < 3; i++) await round();
    await waitFor(async () => ids.every((id) => seen.get(id) === 3n) && handled.size === 3, 'before: all followed and handled', 10_000);

    // Replication is asynchronous: writes a master acknowledged just before dying may be lost
    // (docs/transports.md, "Redis Cluster"). Those above were seen by the consumer well before
    // the kill, so the replica has them: what this checks is that nothing else goes missing.
    const killedAt = Date.now();
    const [victim] = await c.masters();
    await c.kill(victim!);
    // Writes go on through the failover (the client retries while the slots have no master).
    for (let i = 0; i < 3; i++) await round();
    await c.waitHealthy(20_000);
    await waitFor(async () => ids.every((id) => seen.get(id) === 6n) && handled.size === 6, 'after: all followed and handled', 20_000);
    expect(Date.now() - killedAt).toBeLessThan(20_000);
    // The cancel subscription is back too (pub/sub is fire-and-forget: a signal sent while the
    // subscriber reconnects is lost, so it is sent until one arrives).
    await waitFor(
      async () => {
        await producer.cancels.publish(create(CancelSignalSchema, { conversationId: 'after-failover' }));
        await new Promise((r) => setTimeout(r, 200));
        return cancels.includes('after-failover');
      },
      'a cancel signal after the failover',
      20_000,
    );
    expect(await producer.streams.last(ids[0]!)).toEqual({ sequence: 6n, deltaIndex: 0 });
    for (const f of follows) f.stop();
    await worker.close();
  }, 60_000);
});
