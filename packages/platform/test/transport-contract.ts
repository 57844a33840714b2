/**
 * The behaviour every Transport implementation must have, as one set of Jest cases. The
 * test file runs it against each implementation (in-process and Redis), so the embedded and
 * distributed modes cannot drift apart.
 */
import { describe, it, expect, beforeAll, afterAll } from '@jest/globals';
import { create, toJsonString } from '@bufbuild/protobuf';
import type { MessageInitShape } from '@bufbuild/protobuf';
import { CancelSignalSchema, ConversationEventSchema, LlmRequestJobSchema, RunnerCapabilitiesSchema } from '@bedrock/contracts';
import type { CancelSignal, ConversationEvent, LlmRequestJob } from '@bedrock/contracts';
import { STREAM_START } from '../src/index.ts';
import type { Consumer, Job, StreamPosition, Transport } from '../src/index.ts';

export interface TransportHarness {
  /** A fresh transport; may be called more than once (e.g. a second "replica"). */
  make(): Promise<Transport>;
  /** Called after every transport made is closed (delete keys, ...). */
  cleanup?(): Promise<void>;
}

/** Generous: conditions are awaited, never slept for, so this only bounds a failing test. */
const WAIT_MS = 15_000;

export async function waitFor(condition: () => boolean | Promise<boolean>, what: string, timeoutMs = WAIT_MS): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => {
    resolve = r;
  });
  return { promise, resolve };
}

let counter = 0;
function unique(prefix: string): string {
  counter += 1;
  return `${prefix}-${counter}-${Math.random().toString(36).slice(2, 8)}`;
}

function llmJob(requestId: string, extra: MessageInitShape<typeof LlmRequestJobSchema> = {}): LlmRequestJob {
  return create(LlmRequestJobSchema, {
    requestId,
    conversationId: 'conv-1',
    model: 'claude-test',
    toolNames: ['bash', 'patch'],
    attempt: 2,
    notifySequence: 12345678901234n,
    traceContext: { traceparent: '00-abc-def-01' },
    ...extra,
  });
}

function durable(conversationId: string, sequence: bigint): ConversationEvent {
  return create(ConversationEventSchema, {
    conversationId,
    sequence,
    kind: { case: 'contextExhausted', value: { summary: `summary ${sequence}` } },
  });
}

function delta(conversationId: string, sequence: bigint, text: string): ConversationEvent {
  return create(ConversationEventSchema, {
    conversationId,
    sequence,
    kind: { case: 'tokenDelta', value: { requestId: 'req-1', blockIndex: 0, text } },
  });
}

function positions(events: ConversationEvent[]): string[] {
  return events.map((e) => `${e.sequence}-${e.deltaIndex}`);
}

export function transportContract(name: string, harness: TransportHarness): void {
  describe(`${name} transport contract`, () => {
    const made: Transport[] = [];
    let t: Transport;
    const consumers: Consumer[] = [];

    async function make(): Promise<Transport> {
      const transport = await harness.make();
      made.push(transport);
      return transport;
    }

    /** Closes what a test left open (a failing test must not hang the others). */
    async function closeConsumers(): Promise<void> {
      await Promise.all(consumers.splice(0).map((c) => c.close(0)));
    }

    beforeAll(async () => {
      t = await make();
    });

    afterAll(async () => {
      await closeConsumers();
      await Promise.all(made.map((transport) => transport.close()));
      await harness.cleanup?.();
    });

    function consume(
      transport: Transport,
      queue: string,
      handler: (job: Job<LlmRequestJob>, signal: AbortSignal) => Promise<void>,
      options?: Parameters<Transport['queues']['consume']>[3],
    ): Consumer {
      const consumer = transport.queues.consume(queue, LlmRequestJobSchema, handler, options);
      consumers.push(consumer);
      return consumer;
    }

    describe('queues', () => {
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

    describe('notification streams', () => {
      it('appends durable events once, in sequence order', async () => {
        const conv = unique('conv');
        expect(await t.streams.last(conv)).toEqual(STREAM_START);
        for (const seq of [1n, 2n, 3n]) expect(await t.streams.appendDurable(durable(conv, seq))).toBe(true);
        expect(await t.streams.appendDurable(durable(conv, 2n))).toBe(false);
        expect(await t.streams.appendDurable(durable(conv, 3n))).toBe(false);
        expect(await t.streams.appendDurable(durable(conv, 0n))).toBe(false);
        const events = await t.streams.read(conv, STREAM_START);
        expect(positions(events)).toEqual(['1-0', '2-0', '3-0']);
        expect(events[2]!.kind).toEqual({ case: 'contextExhausted', value: expect.objectContaining({ summary: 'summary 3' }) });
        expect(events[0]!.conversationId).toBe(conv);
        expect(await t.streams.last(conv)).toEqual({ sequence: 3n, deltaIndex: 0 });
      });

      it('appends many durable events of one conversation in order, each like appendDurable', async () => {
        const conv = unique('conv');
        expect(await t.streams.appendDurableMany([])).toEqual([]);
        expect(await t.streams.appendDurableMany([durable(conv, 1n), durable(conv, 2n), durable(conv, 3n)])).toEqual([true, true, true]);
        // Taken positions, one behind, sequence 0, a repeat within the call, then new ones.
        expect(await t.streams.appendEphemeral(delta(conv, 3n, 'd'))).toEqual({ sequence: 3n, deltaIndex: 1 });
        expect(
          await t.streams.appendDurableMany([
            durable(conv, 2n),
            durable(conv, 3n),
            durable(conv, 0n),
            durable(conv, 5n),
            durable(conv, 5n),
            durable(conv, 4n),
            durable(conv, 6n),
          ]),
        ).toEqual([false, false, false, true, false, false, true]);
        const events = await t.streams.read(conv, STREAM_START);
        expect(positions(events)).toEqual(['1-0', '2-0', '3-0', '3-1', '5-0', '6-0']);
        expect(events[4]!.kind).toEqual({ case: 'contextExhausted', value: expect.objectContaining({ summary: 'summary 5' }) });
        expect(events[4]!.conversationId).toBe(conv);
        expect(await t.streams.last(conv)).toEqual({ sequence: 6n, deltaIndex: 0 });
        // Deltas go after the last durable event of the batch.
        expect(await t.streams.appendEphemeral(delta(conv, 6n, 'e'))).toEqual({ sequence: 6n, deltaIndex: 1 });
        // All re-published: nothing changes.
        expect(await t.streams.appendDurableMany([durable(conv, 1n), durable(conv, 6n)])).toEqual([false, false]);
        expect(await t.streams.last(conv)).toEqual({ sequence: 6n, deltaIndex: 1 });
        // A blocked reader is woken by a batch.
        const reading = t.streams.read(conv, { sequence: 6n, deltaIndex: 1 }, { blockMs: 20_000 });
        await new Promise((resolve) => setTimeout(resolve, 50));
        expect(await t.streams.appendDurableMany([durable(conv, 7n), durable(conv, 8n)])).toEqual([true, true]);
        const woken = positions(await reading);
        expect(woken[0]).toBe('7-0');
        // One conversation per call: a mixed batch is refused and appends nothing.
        await expect(t.streams.appendDurableMany([durable(conv, 9n), durable(unique('other'), 1n)])).rejects.toThrow(/one call/);
        expect(await t.streams.last(conv)).toEqual({ sequence: 8n, deltaIndex: 0 });
      });

      it('appends events given already encoded exactly as decoded ones', async () => {
        const conv = unique('conv');
        const encoded = (sequence: bigint) => {
          const event = durable(conv, sequence);
          return { conversationId: conv, sequence, kind: event.kind.case!, json: toJsonString(ConversationEventSchema, event) };
        };
        expect(await t.streams.appendDurableMany([encoded(1n), durable(conv, 2n), encoded(3n)])).toEqual([true, true, true]);
        expect(await t.streams.appendDurableMany([encoded(2n)])).toEqual([false]);
        const events = await t.streams.read(conv, STREAM_START);
        expect(positions(events)).toEqual(['1-0', '2-0', '3-0']);
        expect(events[2]).toEqual(durable(conv, 3n));
      });

      it('follows many streams live, each in order from its position, until stopped', async () => {
        const convs = Array.from({ length: 6 }, () => unique('conv'));
        await t.streams.appendDurable(durable(convs[0]!, 1n));
        const got = new Map<string, string[]>(convs.map((c) => [c, []]));
        // Conversation 0 from its start (catches up on 1-0), the others from now.
        const follows = convs.map((c) => t.streams.follow(c, STREAM_START, (events) => got.get(c)!.push(...positions(events))));
        // A second follow of one stream, from a later position, gets only what comes after it.
        const late: string[] = [];
        const second = t.streams.follow(convs[0]!, { sequence: 1n, deltaIndex: 0 }, (events) => late.push(...positions(events)));
        await waitFor(() => got.get(convs[0]!)!.length === 1, 'catch-up');
        for (const [i, c] of convs.entries()) {
          await t.streams.appendDurable(durable(c, i === 0 ? 2n : 1n));
          await t.streams.appendEphemeral(delta(c, i === 0 ? 2n : 1n, 'x'));
        }
        await waitFor(() => convs.every((c) => got.get(c)!.length >= (c === convs[0] ? 3 : 2)), 'live events');
        expect(got.get(convs[0]!)).toEqual(['1-0', '2-0', '2-1']);
        for (const c of convs.slice(1)) expect(got.get(c)).toEqual(['1-0', '1-1']);
        expect(late).toEqual(['2-0', '2-1']);
        // Stopped: nothing more arrives; a follow added later (after blocking reads began) is served at once.
        follows[1]!.stop();
        const added = unique('conv');
        const addedGot: string[] = [];
        const addedFollow = t.streams.follow(added, STREAM_START, (events) => addedGot.push(...positions(events)));
        await new Promise((resolve) => setTimeout(resolve, 50));
        const startedAt = Date.now();
        await t.streams.appendDurable(durable(added, 1n));
        await t.streams.appendDurable(durable(convs[1]!, 2n));
        await waitFor(() => addedGot.length === 1, 'added follow');
        expect(Date.now() - startedAt).toBeLessThan(5000);
        await new Promise((resolve) => setTimeout(resolve, 100));
        expect(got.get(convs[1]!)).toEqual(['1-0', '1-1']);
        for (const f of [...follows, second, addedFollow]) f.stop();
      });

      it('numbers ephemeral events after the last durable one and drops stale ones', async () => {
        const conv = unique('conv');
        expect(await t.streams.appendEphemeral(delta(conv, 0n, 'before anything'))).toEqual({ sequence: 0n, deltaIndex: 1 });
        expect(await t.streams.appendDurable(durable(conv, 1n))).toBe(true);
        expect(await t.streams.appendEphemeral(delta(conv, 1n, 'a'))).toEqual({ sequence: 1n, deltaIndex: 1 });
        expect(await t.streams.appendEphemeral(delta(conv, 1n, 'b'))).toEqual({ sequence: 1n, deltaIndex: 2 });
        // A durable event at a position the deltas already passed is a re-publish.
        expect(await t.streams.appendDurable(durable(conv, 1n))).toBe(false);
        expect(await t.streams.appendDurable(durable(conv, 2n))).toBe(true);
        // Stale: a later durable event exists.
        expect(await t.streams.appendEphemeral(delta(conv, 1n, 'late'))).toBeNull();
        // Ahead: durable event 5 is not in the stream yet.
        expect(await t.streams.appendEphemeral(delta(conv, 5n, 'early'))).toBeNull();
        expect(await t.streams.appendEphemeral(delta(conv, 2n, 'c'))).toEqual({ sequence: 2n, deltaIndex: 1 });
        const events = await t.streams.read(conv, STREAM_START);
        expect(positions(events)).toEqual(['0-1', '1-0', '1-1', '1-2', '2-0', '2-1']);
        const texts = events.filter((e) => e.kind.case === 'tokenDelta').map((e) => (e.kind.value as { text: string }).text);
        expect(texts).toEqual(['before anything', 'a', 'b', 'c']);
        expect(await t.streams.last(conv)).toEqual({ sequence: 2n, deltaIndex: 1 });
      });

      it('resumes after any position with no gap and no duplicate', async () => {
        const conv = unique('conv');
        for (let seq = 1n; seq <= 5n; seq++) {
          await t.streams.appendDurable(durable(conv, seq));
          for (let i = 0; i < Number(seq % 3n); i++) await t.streams.appendEphemeral(delta(conv, seq, `${seq}.${i}`));
        }
        const all = positions(await t.streams.read(conv, STREAM_START));
        expect(all).toEqual(['1-0', '1-1', '2-0', '2-1', '2-2', '3-0', '4-0', '4-1', '5-0', '5-1', '5-2']);
        // Page through with a small limit, resuming from the last position seen each time.
        const paged: string[] = [];
        let after: StreamPosition = STREAM_START;
        for (;;) {
          const page = await t.streams.read(conv, after, { limit: 2 });
          if (page.length === 0) break;
          expect(page.length).toBeLessThanOrEqual(2);
          paged.push(...positions(page));
          const lastEvent = page[page.length - 1]!;
          after = { sequence: lastEvent.sequence, deltaIndex: lastEvent.deltaIndex };
        }
        expect(paged).toEqual(all);
        expect(positions(await t.streams.read(conv, { sequence: 2n, deltaIndex: 1 }))).toEqual(all.slice(4));
        expect(positions(await t.streams.read(conv, { sequence: 3n, deltaIndex: 0 }))).toEqual(all.slice(6));
        expect(await t.streams.read(conv, { sequence: 5n, deltaIndex: 2 })).toEqual([]);
      });

      it('a blocking read is woken by an append', async () => {
        const conv = unique('conv');
        await t.streams.appendDurable(durable(conv, 1n));
        const startedAt = Date.now();
        const reading = t.streams.read(conv, { sequence: 1n, deltaIndex: 0 }, { blockMs: 20_000 });
        // Give the read a moment to block; the append must wake it whether it arrives before or after.
        await new Promise((resolve) => setTimeout(resolve, 50));
        expect(await t.streams.appendEphemeral(delta(conv, 1n, 'wake'))).toEqual({ sequence: 1n, deltaIndex: 1 });
        const events = await reading;
        expect(positions(events)).toEqual(['1-1']);
        expect(Date.now() - startedAt).toBeLessThan(10_000);
      });

      it('a blocking read resolves with [] on abort, and at once when already aborted', async () => {
        const conv = unique('conv');
        const controller = new AbortController();
        const startedAt = Date.now();
        const reading = t.streams.read(conv, STREAM_START, { blockMs: 20_000, signal: controller.signal });
        await new Promise((resolve) => setTimeout(resolve, 50));
        controller.abort();
        expect(await reading).toEqual([]);
        expect(Date.now() - startedAt).toBeLessThan(10_000);
        // The stream still works after an aborted read.
        await t.streams.appendDurable(durable(conv, 1n));
        expect(await t.streams.read(conv, STREAM_START, { signal: controller.signal })).toEqual([]);
        expect(positions(await t.streams.read(conv, STREAM_START, { blockMs: 1000 }))).toEqual(['1-0']);
      });

      it('a blocking read times out with []', async () => {
        const conv = unique('conv');
        const startedAt = Date.now();
        expect(await t.streams.read(conv, STREAM_START, { blockMs: 100 })).toEqual([]);
        expect(Date.now() - startedAt).toBeGreaterThanOrEqual(90);
      });

      it('deletes a stream: nothing left to read, last is the start, appends begin anew', async () => {
        const conv = unique('conv');
        const other = unique('conv');
        await t.streams.appendDurableMany([durable(conv, 1n), durable(conv, 2n)]);
        await t.streams.appendEphemeral(delta(conv, 2n, 'd'));
        await t.streams.appendDurable(durable(other, 1n));
        await t.streams.delete(conv);
        await t.streams.delete(unique('never-created'));
        expect(await t.streams.read(conv, STREAM_START)).toEqual([]);
        expect(await t.streams.last(conv)).toEqual(STREAM_START);
        // Another conversation's stream is untouched.
        expect(positions(await t.streams.read(other, STREAM_START))).toEqual(['1-0']);
        // Appending again starts a new stream, at any sequence (the old top is forgotten).
        expect(await t.streams.appendDurable(durable(conv, 1n))).toBe(true);
        expect(await t.streams.appendEphemeral(delta(conv, 1n, 'again'))).toEqual({ sequence: 1n, deltaIndex: 1 });
        expect(await t.streams.appendDurable(durable(conv, 3n))).toBe(true);
        expect(positions(await t.streams.read(conv, STREAM_START))).toEqual(['1-0', '1-1', '3-0']);
      });

      it('many blocking reads at once are all woken', async () => {
        const conv = unique('conv');
        const reads = Array.from({ length: 12 }, () => t.streams.read(conv, STREAM_START, { blockMs: 20_000 }));
        await new Promise((resolve) => setTimeout(resolve, 50));
        await t.streams.appendDurable(durable(conv, 1n));
        for (const events of await Promise.all(reads)) expect(positions(events)).toEqual(['1-0']);
      });
    });

    describe('cancel bus', () => {
      it('reaches every subscriber until it unsubscribes', async () => {
        const other = await make();
        const gotA: CancelSignal[] = [];
        const gotB: CancelSignal[] = [];
        const unsubscribeA = await t.cancels.subscribe((s) => gotA.push(s));
        const unsubscribeB = await other.cancels.subscribe((s) => gotB.push(s));
        const conv = unique('conv');
        await t.cancels.publish(create(CancelSignalSchema, { conversationId: conv, target: { case: 'toolUseId', value: 'tu-1' } }));
        await waitFor(() => gotA.length === 1 && gotB.length === 1, 'both subscribers');
        expect(gotA[0]!.conversationId).toBe(conv);
        expect(gotB[0]!.target).toEqual({ case: 'toolUseId', value: 'tu-1' });
        await unsubscribeA();
        await other.cancels.publish(create(CancelSignalSchema, { conversationId: conv, target: { case: 'llmRequestId', value: 'r-2' } }));
        await waitFor(() => gotB.length === 2, 'the remaining subscriber');
        expect(gotB[1]!.target).toEqual({ case: 'llmRequestId', value: 'r-2' });
        // Delivered to B, so A (unsubscribed before the publish) would have had it by now.
        expect(gotA).toHaveLength(1);
        await unsubscribeB();
      });
    });

    describe('runner registry', () => {
      it('lists runners until their ttl passes without a refresh', async () => {
        const short = unique('runner-short');
        const long = unique('runner-long');
        await t.runners.report(
          create(RunnerCapabilitiesSchema, { runnerId: short, sandboxAvailable: true, landlockAbi: 4, queues: ['tool-exec'] }),
          300,
        );
        await t.runners.report(create(RunnerCapabilitiesSchema, { runnerId: long, hostname: 'h1' }), 60_000);
        const ids = async () =>
          (await t.runners.list())
            .map((r) => r.runnerId)
            .filter((id) => id === short || id === long)
            .sort();
        expect(await ids()).toEqual([long, short].sort());
        const listed = (await t.runners.list()).find((r) => r.runnerId === short)!;
        expect(listed).toMatchObject({ sandboxAvailable: true, landlockAbi: 4, queues: ['tool-exec'] });
        await waitFor(async () => (await ids()).length === 1, 'the short-lived runner to expire');
        expect(await ids()).toEqual([long]);
        // A refresh brings a runner back with its new capabilities.
        await t.runners.report(create(RunnerCapabilitiesSchema, { runnerId: short, landlockAbi: 5 }), 60_000);
        expect((await t.runners.list()).find((r) => r.runnerId === short)?.landlockAbi).toBe(5);
        await t.runners.remove(short);
        await t.runners.remove(long);
        expect(await ids()).toEqual([]);
      });
    });
  });
}
