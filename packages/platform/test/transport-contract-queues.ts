/**
 * The queue part of the transport contract: de-duplication, bulk and delayed adds, removal,
 * job status, order, hand-back on close, retries, concurrency and the limiter.
 */
import { describe, it, expect, beforeAll } from '@jest/globals';
import { LlmRequestJobSchema } from '@bedrock/contracts';
import type { LlmRequestJob } from '@bedrock/contracts';
import type { Job, Transport } from '../src/index.ts';
import { deferred, llmJob, unique, waitFor } from './transport-contract-support.ts';
import type { ContractContext } from './transport-contract-support.ts';

export function queueContract({ transport, make, consume, closeConsumers }: ContractContext): void {
  describe('queues', () => {
    let t: Transport;
    beforeAll(() => {
      t = transport();
    });

    it('de-duplicates job ids, including ids with colons, also after completion', async () => {
      const queue = unique('dedup');
      const producer = t.queues.producer(queue, LlmRequestJobSchema);
      const id = 'conv-1:llm:3';
      expect(await producer.add(id, llmJob('r1'))).toBe(true);
      expect(await producer.add(id, llmJob('r1-again'))).toBe(false);
      expect(await producer.add('a:b', llmJob('r2'))).toBe(true);
      expect(await producer.add('42', llmJob('r3'))).toBe(true);
      const seen: Job<LlmRequestJob>[] = [];
      const consumer = consume(t, queue, async (job) => {
        seen.push(job);
      });
      await waitFor(() => seen.length === 3, 'three deliveries');
      await waitFor(async () => (await t.queues.depth(queue)).active === 0, 'jobs to complete');
      expect(seen.map((j) => j.id).sort()).toEqual(['42', 'a:b', 'conv-1:llm:3']);
      const first = seen.find((j) => j.id === id)!;
      expect(first.data.requestId).toBe('r1');
      expect(first.data.notifySequence).toBe(12345678901234n);
      expect(first.data.toolNames).toEqual(['bash', 'patch']);
      expect(first.data.traceContext).toEqual({ traceparent: '00-abc-def-01' });
      expect(first.attemptsMade).toBe(1);
      // Completed ids are remembered: an outbox re-publish after a crash is still a duplicate.
      expect(await producer.add(id, llmJob('r1-late'))).toBe(false);
      await consumer.close();
      expect(seen).toHaveLength(3);
    });

    it('adds jobs in bulk, in order, with delays, leaving known ids as they are', async () => {
      const queue = unique('bulk');
      const producer = t.queues.producer(queue, LlmRequestJobSchema);
      expect(await producer.add('known', llmJob('first'))).toBe(true);
      const addedAt = Date.now();
      await producer.addBulk([
        { jobId: 'b:1', payload: llmJob('one') },
        { jobId: 'known', payload: llmJob('second') },
        { jobId: 'b:2', payload: llmJob('two'), options: { delayMs: 300 } },
      ]);
      await producer.addBulk([]);
      expect(await t.queues.depth(queue)).toEqual({ waiting: 2, active: 0, delayed: 1, failed: 0 });
      const seen: { id: string; requestId: string; at: number }[] = [];
      consume(t, queue, async (job) => {
        seen.push({ id: job.id, requestId: job.data.requestId, at: Date.now() });
      });
      await waitFor(() => seen.length === 3, 'three jobs');
      expect(seen.map((s) => [s.id, s.requestId])).toEqual([
        ['known', 'first'],
        ['b:1', 'one'],
        ['b:2', 'two'],
      ]);
      expect(seen[2]!.at - addedAt).toBeGreaterThanOrEqual(290);
      await closeConsumers();
    });

    it('delays a job and reports it in depth', async () => {
      const queue = unique('delay');
      const producer = t.queues.producer(queue, LlmRequestJobSchema);
      const addedAt = Date.now();
      expect(await producer.add('later', llmJob('later'), { delayMs: 400 })).toBe(true);
      expect(await producer.add('now', llmJob('now'))).toBe(true);
      expect(await t.queues.depth(queue)).toEqual({ waiting: 1, active: 0, delayed: 1, failed: 0 });
      const seen: { id: string; at: number; readyAt: number }[] = [];
      consume(t, queue, async (job) => {
        seen.push({ id: job.id, at: Date.now(), readyAt: job.readyAt });
      });
      await waitFor(() => seen.length === 2, 'both jobs');
      expect(seen.map((s) => s.id)).toEqual(['now', 'later']);
      // A few ms of slack: timers and Redis timestamps have ms resolution.
      expect(seen[1]!.at - addedAt).toBeGreaterThanOrEqual(390);
      expect(seen[1]!.readyAt - addedAt).toBeGreaterThanOrEqual(390);
      expect(seen[0]!.readyAt).toBeLessThanOrEqual(seen[0]!.at);
      await closeConsumers();
    });

    it('removes a job that has not started, but not a running one', async () => {
      const queue = unique('remove');
      const producer = t.queues.producer(queue, LlmRequestJobSchema);
      expect(await producer.add('timer:1', llmJob('t1'), { delayMs: 60_000 })).toBe(true);
      expect(await producer.add('waiting:1', llmJob('w1'))).toBe(true);
      expect(await producer.remove('timer:1')).toBe(true);
      expect(await producer.remove('timer:1')).toBe(false);
      expect(await producer.remove('waiting:1')).toBe(true);
      expect(await producer.remove('never-added')).toBe(false);
      expect(await t.queues.depth(queue)).toEqual({ waiting: 0, active: 0, delayed: 0, failed: 0 });
      // A removed id is forgotten, so it can be queued again.
      expect(await producer.add('timer:1', llmJob('t1-again'))).toBe(true);
      const release = deferred();
      const started: string[] = [];
      consume(t, queue, async (job) => {
        started.push(job.id);
        await release.promise;
      });
      await waitFor(() => started.length === 1, 'the job to start');
      expect(started).toEqual(['timer:1']);
      expect(await producer.remove('timer:1')).toBe(false);
      release.resolve();
      await waitFor(async () => (await t.queues.depth(queue)).active === 0, 'the job to finish');
      await closeConsumers();
    });

    it("removes a conversation's jobs of every queue and state but running ones, and no other conversation's", async () => {
      const [qa, qb] = [unique('conv-a'), unique('conv-b')];
      const conv = unique('gone');
      const a = t.queues.producer(qa, LlmRequestJobSchema);
      const b = t.queues.producer(qb, LlmRequestJobSchema);
      const mine = (id: string) => llmJob(id, { conversationId: conv });
      // Completed, failed, delayed (one of them added in bulk), waiting behind a running one.
      const release = deferred();
      const seen: string[] = [];
      consume(
        t,
        qa,
        async (job) => {
          seen.push(job.id);
          if (job.id === 'fail') throw new Error('refused');
          if (job.id === 'running') await release.promise;
        },
        { attempts: 1 },
      );
      expect(await a.add('done', mine('done'))).toBe(true);
      expect(await a.add('fail', mine('fail'))).toBe(true);
      await waitFor(async () => (await t.queues.jobStatus(qa, 'fail')).state === 'failed', 'the failed job');
      expect(await a.add('running', mine('running'))).toBe(true);
      await waitFor(() => seen.includes('running'), 'the running job');
      await b.addBulk([{ jobId: 'later', payload: mine('later'), options: { delayMs: 60_000 } }]);
      expect(await b.add('other', llmJob('other', { conversationId: 'someone-else' }))).toBe(true);

      expect(await t.queues.removeConversation(conv)).toBe(3);
      for (const [queue, id, state] of [
        [qa, 'done', 'unknown'],
        [qa, 'fail', 'unknown'],
        [qb, 'later', 'unknown'],
        [qa, 'running', 'active'],
        [qb, 'other', 'waiting'],
      ] as const)
        expect({ id, state: (await t.queues.jobStatus(queue, id)).state }).toEqual({ id, state });
      // Removed ids are forgotten; the running one goes once it finished.
      expect(await a.add('done', mine('done'))).toBe(true);
      release.resolve();
      await waitFor(async () => (await t.queues.jobStatus(qa, 'running')).state === 'completed', 'the running job to finish');
      await waitFor(async () => (await t.queues.jobStatus(qa, 'done')).state === 'completed', 'the re-added job');
      expect(await t.queues.removeConversation(conv)).toBe(2);
      expect((await t.queues.jobStatus(qa, 'running')).state).toBe('unknown');
      expect(await t.queues.removeConversation(conv)).toBe(0);
      await closeConsumers();
    });

    it('reports where a job is through its life', async () => {
      const queue = unique('status');
      const producer = t.queues.producer(queue, LlmRequestJobSchema);
      expect(await t.queues.jobStatus(queue, 'nope:1')).toEqual({ state: 'unknown', finishedAt: null });
      await producer.add('later:1', llmJob('later'), { delayMs: 60_000 });
      await producer.add('ok:1', llmJob('ok'));
      await producer.add('bad:1', llmJob('bad'));
      expect(await t.queues.jobStatus(queue, 'later:1')).toEqual({ state: 'delayed', finishedAt: null });
      expect(await t.queues.jobStatus(queue, 'ok:1')).toEqual({ state: 'waiting', finishedAt: null });
      const release = deferred();
      const started: string[] = [];
      const before = Date.now();
      consume(
        t,
        queue,
        async (job) => {
          started.push(job.id);
          if (job.id === 'bad:1') throw new Error('no');
          await release.promise;
        },
        { attempts: 1 },
      );
      await waitFor(() => started.includes('ok:1'), 'ok:1 to start');
      expect(await t.queues.jobStatus(queue, 'ok:1')).toEqual({ state: 'active', finishedAt: null });
      release.resolve();
      await waitFor(async () => (await t.queues.jobStatus(queue, 'ok:1')).state === 'completed', 'ok:1 to complete');
      await waitFor(async () => (await t.queues.jobStatus(queue, 'bad:1')).state === 'failed', 'bad:1 to fail');
      for (const id of ['ok:1', 'bad:1']) {
        const { finishedAt } = await t.queues.jobStatus(queue, id);
        expect(finishedAt).toBeGreaterThanOrEqual(before - 5);
        expect(finishedAt).toBeLessThanOrEqual(Date.now() + 5);
      }
      expect(await producer.remove('later:1')).toBe(true);
      expect(await t.queues.jobStatus(queue, 'later:1')).toEqual({ state: 'unknown', finishedAt: null });
      await closeConsumers();
    });

    it('delivers in the order added', async () => {
      const queue = unique('order');
      const producer = t.queues.producer(queue, LlmRequestJobSchema);
      const ids = Array.from({ length: 8 }, (_, i) => `job:${i}`);
      for (const id of ids) expect(await producer.add(id, llmJob(id))).toBe(true);
      const seen: string[] = [];
      consume(t, queue, async (job) => {
        seen.push(job.id);
      });
      await waitFor(() => seen.length === ids.length, 'every job');
      expect(seen).toEqual(ids);
      await closeConsumers();
    });

    it('hands a running job back when its consumer closes, and another consumer gets it', async () => {
      const queue = unique('handback');
      const producer = t.queues.producer(queue, LlmRequestJobSchema);
      let abortedA = false;
      const startedA: Job<LlmRequestJob>[] = [];
      const consumerA = consume(t, queue, async (job, signal) => {
        startedA.push(job);
        // A handler that ignores nothing: it runs until told to stop.
        await new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
        abortedA = signal.aborted;
      });
      expect(await producer.add('conv-9:tool:1', llmJob('h1'))).toBe(true);
      await waitFor(() => startedA.length === 1, 'consumer A to start the job');
      expect(startedA[0]!.attemptsMade).toBe(1);

      const other = await make();
      const seenB: Job<LlmRequestJob>[] = [];
      consume(other, queue, async (job) => {
        seenB.push(job);
      });
      await consumerA.close(200);
      expect(abortedA).toBe(true);
      await waitFor(() => seenB.length === 1, 'consumer B to get the handed-back job');
      expect(seenB[0]!.id).toBe('conv-9:tool:1');
      expect(seenB[0]!.data.requestId).toBe('h1');
      expect(seenB[0]!.attemptsMade).toBe(2);
      await waitFor(async () => (await t.queues.depth(queue)).active === 0, 'the job to complete');
      expect(startedA).toHaveLength(1);
      await closeConsumers();
    });

    it('hands a job back even when its handler ignores the signal, and ignores its late end', async () => {
      const queue = unique('stubborn');
      const producer = t.queues.producer(queue, LlmRequestJobSchema);
      const release = deferred();
      let startedA = 0;
      let signalA: AbortSignal | undefined;
      const consumerA = consume(t, queue, async (_job, signal) => {
        startedA += 1;
        signalA = signal;
        await release.promise;
        throw new Error('finished late, after the job was handed back');
      });
      await producer.add('stubborn:1', llmJob('s1'));
      await waitFor(() => startedA === 1, 'consumer A to start the job');
      await consumerA.close(0);
      expect(signalA?.aborted).toBe(true);
      const other = await make();
      const seenB: number[] = [];
      consume(other, queue, async (job) => {
        seenB.push(job.attemptsMade);
      });
      await waitFor(() => seenB.length === 1, 'consumer B to get the job');
      expect(seenB).toEqual([2]);
      await waitFor(async () => (await t.queues.jobStatus(queue, 'stubborn:1')).state === 'completed', 'completion by B');
      release.resolve();
      // A's late failure must not reopen or fail the job that B completed.
      await new Promise((resolve) => setTimeout(resolve, 100));
      expect((await t.queues.jobStatus(queue, 'stubborn:1')).state).toBe('completed');
      expect(await t.queues.depth(queue)).toEqual({ waiting: 0, active: 0, delayed: 0, failed: 0 });
      expect(seenB).toEqual([2]);
      await closeConsumers();
    });

    it('close waits for running jobs within the grace period', async () => {
      const queue = unique('grace');
      const producer = t.queues.producer(queue, LlmRequestJobSchema);
      const started = deferred();
      let finished = false;
      let aborted = false;
      const consumer = consume(t, queue, async (_job, signal) => {
        started.resolve();
        await new Promise((resolve) => setTimeout(resolve, 150));
        aborted = signal.aborted;
        finished = true;
      });
      await producer.add('slow', llmJob('slow'));
      await started.promise;
      await consumer.close(10_000);
      expect(finished).toBe(true);
      expect(aborted).toBe(false);
      expect(await t.queues.depth(queue)).toEqual({ waiting: 0, active: 0, delayed: 0, failed: 0 });
      expect(await producer.add('slow', llmJob('slow'))).toBe(false);
    });

    it('retries a throwing handler up to `attempts`, then fails the job', async () => {
      const queue = unique('attempts');
      const producer = t.queues.producer(queue, LlmRequestJobSchema);
      const attempts: number[] = [];
      consume(
        t,
        queue,
        async (job) => {
          attempts.push(job.attemptsMade);
          throw new Error('boom');
        },
        { attempts: 3, backoffMs: 20 },
      );
      await producer.add('always-fails', llmJob('f'));
      await waitFor(async () => (await t.queues.depth(queue)).failed === 1, 'the job to fail');
      expect(attempts).toEqual([1, 2, 3]);
      expect(await producer.add('always-fails', llmJob('f'))).toBe(false);

      const flaky: number[] = [];
      const flakyQueue = unique('flaky');
      consume(
        t,
        flakyQueue,
        async (job) => {
          flaky.push(job.attemptsMade);
          if (job.attemptsMade === 1) throw new Error('first try fails');
        },
        { attempts: 2, backoffMs: 0 },
      );
      await t.queues.producer(flakyQueue, LlmRequestJobSchema).add('flaky', llmJob('x'));
      await waitFor(() => flaky.length === 2, 'the retry');
      await waitFor(async () => (await t.queues.depth(flakyQueue)).active === 0, 'completion');
      expect(await t.queues.depth(flakyQueue)).toEqual({ waiting: 0, active: 0, delayed: 0, failed: 0 });
      await closeConsumers();
    });

    it('runs at most `concurrency` jobs at once per consumer', async () => {
      const queue = unique('concurrency');
      const producer = t.queues.producer(queue, LlmRequestJobSchema);
      for (let i = 0; i < 6; i++) await producer.add(`c:${i}`, llmJob(`c${i}`));
      let running = 0;
      let maxRunning = 0;
      let done = 0;
      const release = deferred();
      consume(
        t,
        queue,
        async () => {
          running += 1;
          maxRunning = Math.max(maxRunning, running);
          await release.promise;
          running -= 1;
          done += 1;
        },
        { concurrency: 3 },
      );
      await waitFor(() => running === 3, 'three jobs in flight');
      release.resolve();
      await waitFor(() => done === 6, 'every job');
      expect(maxRunning).toBe(3);
      await closeConsumers();
    });

    it('applies the queue-wide limiter', async () => {
      const queue = unique('limiter');
      const producer = t.queues.producer(queue, LlmRequestJobSchema);
      for (let i = 0; i < 4; i++) await producer.add(`l:${i}`, llmJob(`l${i}`));
      const startedAt: number[] = [];
      consume(
        t,
        queue,
        async () => {
          startedAt.push(Date.now());
        },
        { concurrency: 4, limiter: { max: 2, durationMs: 600 } },
      );
      await waitFor(() => startedAt.length === 4, 'every job');
      startedAt.sort((a, b) => a - b);
      // Two per 600 ms window: the third cannot start in the first window.
      expect(startedAt[2]! - startedAt[0]!).toBeGreaterThanOrEqual(500);
      await closeConsumers();
    });
  });
}
