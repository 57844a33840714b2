/**
 * Queue partitions (BEDROCK_QUEUE_PARTITIONS > 1) on the Redis transport, as one set of Jest
 * cases run on one Redis (transport.contract.test.ts) and on a Redis Cluster
 * (transport.cluster.test.ts): a conversation's jobs stay in one partition, the partitions have
 * their own hash tags (on a cluster: on every master), every partition is consumed, a flood in
 * one partition starves no other, and a consumer's concurrency is shared by its partitions.
 */
import { describe, it, expect, afterAll } from '@jest/globals';
import { create } from '@bufbuild/protobuf';
import { LlmRequestJobSchema } from '@bedrock/contracts';
import type { LlmRequestJob } from '@bedrock/contracts';
import type { Consumer, Job, Transport } from '../src/index.ts';
import { redisKeys } from '../src/index.ts';
import type { RedisKeys } from '../src/index.ts';
import { encodeJobId } from '../src/job-id.ts';
import { keySlot } from '../src/redis/cluster-slot.ts';
import { waitFor } from './transport-contract-support.ts';

export interface PartitionHarness {
  /** A fresh Redis transport with this prefix and `queuePartitions`. */
  make(prefix: string, queuePartitions: number): Promise<Transport>;
  /** Does the key exist (on whichever node serves it)? */
  exists(key: string): Promise<boolean>;
  /** On a cluster: the master serving a slot (its port); undefined on one Redis. */
  masterOfSlot?(slot: number): Promise<number>;
  /** How many masters (1 on one Redis). */
  readonly masters: number;
  cleanup?(prefix: string): Promise<void>;
}

const PARTITIONS = 4;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function job(conversationId: string, requestId: string): LlmRequestJob {
  return create(LlmRequestJobSchema, { requestId, conversationId, model: 'm' });
}

/** A conversation id in `partition` (by trying ids: the hash decides). */
function conversationIn(keys: RedisKeys, partition: number, tag: string): string {
  for (let i = 0; ; i++) {
    const id = `${tag}-${i}`;
    if (keys.partitionOf(id) === partition) return id;
  }
}

export function queuePartitionsContract(name: string, harness: PartitionHarness): void {
  describe(`${name}: queue partitions`, () => {
    const prefix = `bedrock-test-partitions-${process.pid}-${Math.random().toString(36).slice(2, 8)}`;
    const keys = redisKeys(prefix, { queuePartitions: PARTITIONS });
    const made: Transport[] = [];
    const consumers: Consumer[] = [];
    const open = async () => {
      const t = await harness.make(prefix, PARTITIONS);
      made.push(t);
      return t;
    };
    afterAll(async () => {
      await Promise.all(consumers.map((c) => c.close(0)));
      await Promise.all(made.map((t) => t.close()));
      await harness.cleanup?.(prefix);
    }, 30_000);

    it('a conversation’s jobs all go to its one partition; the partitions have their own tags and spread over the masters', async () => {
      const t = await open();
      const queue = 'p-route';
      const producer = t.queues.producer(queue, LlmRequestJobSchema);
      const conversations = Array.from({ length: 24 }, (_, i) => `route-${i}`);
      for (const c of conversations) {
        expect(await producer.add(`${c}:a`, job(c, 'a'))).toBe(true);
        await producer.addBulk([
          { jobId: `${c}:b`, payload: job(c, 'b') },
          { jobId: `${c}:c`, payload: job(c, 'c'), options: { delayMs: 60_000 } },
        ]);
      }
      const used = new Set<number>();
      for (const c of conversations) {
        const home = keys.partitionOf(c);
        used.add(home);
        for (const suffix of ['a', 'b', 'c']) {
          const where: number[] = [];
          for (let p = 0; p < PARTITIONS; p++)
            if (await harness.exists(keys.bullKey(queue, encodeJobId(`${c}:${suffix}`), p))) where.push(p);
          expect([c, suffix, where]).toEqual([c, suffix, [home]]);
        }
      }
      expect(used.size).toBe(PARTITIONS);
      // One id is in one partition, so de-duplication holds across them.
      expect(await producer.add(`${conversations[0]}:a`, job(conversations[0]!, 'again'))).toBe(false);
      const depth = await t.queues.depth(queue);
      expect([depth.waiting, depth.delayed]).toEqual([48, 24]);
      expect((await t.queues.jobStatus(queue, `${conversations[5]}:c`)).state).toBe('delayed');
      expect(await producer.remove(`${conversations[5]}:c`)).toBe(true);
      expect((await t.queues.jobStatus(queue, `${conversations[5]}:c`)).state).toBe('unknown');
      expect(await t.queues.removeConversation(conversations[6]!)).toBe(3);
      expect((await t.queues.depth(queue)).waiting).toBe(46);

      const tags = Array.from({ length: PARTITIONS }, (_, p) => keys.bullQueueName(queue, p));
      expect(new Set(tags).size).toBe(PARTITIONS);
      if (harness.masterOfSlot) {
        const masters = new Set(await Promise.all(tags.map((tag) => harness.masterOfSlot!(keySlot(tag)))));
        expect(masters.size).toBe(Math.min(PARTITIONS, harness.masters));
      }
    });

    it('consumers take every partition; a conversation’s jobs are delivered in the order added', async () => {
      const producerSide = await open();
      const queue = 'p-all';
      const producer = producerSide.queues.producer(queue, LlmRequestJobSchema);
      const conversations = Array.from({ length: 16 }, (_, i) => `all-${i}`);
      const seen: { conversation: string; n: number; consumer: number }[] = [];
      const handler = (consumer: number) => async (j: Job<LlmRequestJob>) => {
        seen.push({ conversation: j.data.conversationId, n: Number(j.data.requestId), consumer });
      };
      // Two replicas, concurrency 1 each: one job at a time per replica.
      for (const index of [0, 1]) consumers.push((await open()).queues.consume(queue, LlmRequestJobSchema, handler(index)));
      for (let n = 0; n < 5; n++) for (const c of conversations) await producer.add(`${c}:${n}`, job(c, String(n)));
      await waitFor(() => seen.length === 5 * conversations.length, 'every job delivered');
      const partitionsSeen = new Set(seen.map((s) => keys.partitionOf(s.conversation)));
      expect(partitionsSeen.size).toBe(PARTITIONS);
      expect(new Set(seen.map((s) => s.consumer)).size).toBe(2);
      // Each job exactly once. (Order across replicas is not promised, with partitions or without:
      // a job held by one replica may start after the next one of its list on another.)
      for (const c of conversations) {
        const ns = seen.filter((s) => s.conversation === c).map((s) => s.n);
        expect([c, [...ns].sort((a, b) => a - b)]).toEqual([c, [0, 1, 2, 3, 4]]);
      }
      expect((await producerSide.queues.depth(queue)).waiting).toBe(0);
    });

    it('a flood in one partition starves no other: each waits for at most a few of the flood’s jobs', async () => {
      const t = await open();
      const queue = 'p-fair';
      const producer = t.queues.producer(queue, LlmRequestJobSchema);
      const flood = conversationIn(keys, 0, 'flood');
      const others = [1, 2, 3].map((p) => conversationIn(keys, p, `other${p}`));
      await producer.addBulk(Array.from({ length: 120 }, (_, i) => ({ jobId: `${flood}:${i}`, payload: job(flood, String(i)) })));
      const order: string[] = [];
      let running = 0;
      let most = 0;
      consumers.push(
        t.queues.consume(
          queue,
          LlmRequestJobSchema,
          async (j) => {
            running += 1;
            most = Math.max(most, running);
            order.push(j.data.conversationId);
            await sleep(30);
            running -= 1;
          },
          { concurrency: 2 },
        ),
      );
      await waitFor(() => order.length >= 10, 'the flood under way');
      await Promise.all(others.map((c) => producer.add(`${c}:x`, job(c, 'x'))));
      // Counted from when every add is acknowledged: what the adds' round trips take on a busy
      // machine is not the consumer's fairness.
      const floodBefore = order.length;
      await waitFor(() => others.every((c) => order.includes(c)), 'the other partitions served');
      // The flood's jobs that started after the others were queued and before the last of them:
      // with a fair turn, a few (jobs already fetched and waiting at the gate); without, ~100.
      const lastOther = Math.max(...others.map((c) => order.indexOf(c)));
      const floodBetween = order.slice(floodBefore, lastOther).filter((c) => c === flood).length;
      expect(floodBetween).toBeLessThanOrEqual(2 * PARTITIONS);
      expect(order.length).toBeLessThan(120);
      // The consumer's concurrency (2) is shared by its four partitions' workers.
      await waitFor(() => order.length === 123, 'the flood done', 30_000);
      expect(most).toBe(2);
    }, 60_000);
  });
}
