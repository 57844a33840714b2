/**
 * In-process job queues with the semantics of the BullMQ ones (see ../redis/redis-queues.ts):
 * de-duplicating ids remembered after completion, delays, FIFO order, concurrency, a
 * queue-wide fixed-window limiter, attempts with exponential backoff, and hand-back of jobs
 * whose consumer closed before finishing them.
 */
import { fromBinary, toBinary } from '@bufbuild/protobuf';
import type { DescMessage, MessageShape } from '@bufbuild/protobuf';
import type { BulkJob, ConsumeOptions, Consumer, Job, JobHandler, JobStatus, Producer, QueueDepth, Queues } from '../interfaces.ts';
import {
  DEFAULT_ATTEMPTS,
  DEFAULT_BACKOFF_MS,
  DEFAULT_CLOSE_GRACE_MS,
  DEFAULT_COMPLETED_RETENTION_MS,
  DEFAULT_FAILED_RETENTION_MS,
  assertQueueName,
  backoffDelay,
  conversationOfPayload,
} from '../defaults.ts';

export interface MemoryQueuesOptions {
  /** How long a completed job's id stays known, so re-adding it is a duplicate, ms. Default 24 h. */
  readonly completedRetentionMs?: number;
  /** How long a job that used up its attempts stays known, ms. Default 7 days. */
  readonly failedRetentionMs?: number;
}

type JobState = 'waiting' | 'delayed' | 'active' | 'completed' | 'failed';

interface JobRecord {
  readonly id: string;
  /** The conversation its payload names (removeConversation), or null. */
  readonly conversationId: string | null;
  /** The payload as protobuf binary, so every delivery decodes a fresh message. Dropped once finished. */
  bytes: Uint8Array;
  state: JobState;
  readyAt: number;
  /** Deliveries so far (Job.attemptsMade of the current one). */
  deliveries: number;
  /** Handler throws so far; counted against ConsumeOptions.attempts. */
  failures: number;
  timer?: NodeJS.Timeout;
  finishedAt?: number;
}

interface Run {
  readonly record: JobRecord;
  readonly controller: AbortController;
  handedBack: boolean;
  done?: Promise<void>;
}

/** What the queue needs from one of its consumers. */
interface ConsumerSlot {
  readonly options: ConsumeOptions;
  hasCapacity(): boolean;
  deliver(record: JobRecord): void;
  close(graceMs?: number): Promise<void>;
}

interface QueueState {
  readonly name: string;
  readonly jobs: Map<string, JobRecord>;
  /** Ready jobs, next first. */
  readonly waiting: JobRecord[];
  readonly consumers: ConsumerSlot[];
  /** Finished jobs in finishing order, for pruning by age without scanning every job. */
  readonly completed: JobRecord[];
  readonly failed: JobRecord[];
  /** Fixed-window limiter shared by every consumer of the queue, like BullMQ's. */
  limiterWindowStart: number;
  limiterCount: number;
  limiterTimer?: NodeJS.Timeout;
  nextConsumer: number;
}

export function createMemoryQueues(options: MemoryQueuesOptions = {}): Queues {
  const completedRetentionMs = options.completedRetentionMs ?? DEFAULT_COMPLETED_RETENTION_MS;
  const failedRetentionMs = options.failedRetentionMs ?? DEFAULT_FAILED_RETENTION_MS;
  const queues = new Map<string, QueueState>();
  let closed = false;

  function stateOf(name: string): QueueState {
    assertQueueName(name);
    let q = queues.get(name);
    if (!q) {
      q = {
        name,
        jobs: new Map(),
        waiting: [],
        consumers: [],
        completed: [],
        failed: [],
        limiterWindowStart: 0,
        limiterCount: 0,
        nextConsumer: 0,
      };
      queues.set(name, q);
    }
    return q;
  }

  function assertOpen(): void {
    if (closed) throw new Error('queues are closed');
  }

  function prune(q: QueueState, now: number): void {
    for (const [list, retention] of [
      [q.completed, completedRetentionMs],
      [q.failed, failedRetentionMs],
    ] as const) {
      while (list.length > 0 && (list[0]!.finishedAt ?? 0) + retention <= now) {
        const record = list.shift()!;
        if (q.jobs.get(record.id) === record) q.jobs.delete(record.id);
      }
    }
  }

  function makeReady(q: QueueState, record: JobRecord, front = false): void {
    record.timer = undefined;
    record.state = 'waiting';
    if (front) q.waiting.unshift(record);
    else q.waiting.push(record);
    pump(q);
  }

  function schedule(q: QueueState, record: JobRecord, delayMs: number): void {
    // readyAt stays the first time the job was ready, retries included, as with BullMQ.
    if (delayMs <= 0) {
      makeReady(q, record);
      return;
    }
    record.state = 'delayed';
    record.timer = setTimeout(() => makeReady(q, record), delayMs);
  }

  /** Hands ready jobs to consumers with free capacity, round robin, within the limiter. */
  function pump(q: QueueState): void {
    while (!closed && q.waiting.length > 0) {
      const consumer = pickConsumer(q);
      if (!consumer) return;
      const limiter = consumer.options.limiter;
      if (limiter) {
        const now = Date.now();
        if (now - q.limiterWindowStart >= limiter.durationMs) {
          q.limiterWindowStart = now;
          q.limiterCount = 0;
        }
        if (q.limiterCount >= limiter.max) {
          if (!q.limiterTimer) {
            q.limiterTimer = setTimeout(
              () => {
                q.limiterTimer = undefined;
                pump(q);
              },
              q.limiterWindowStart + limiter.durationMs - now,
            );
          }
          return;
        }
        q.limiterCount += 1;
      }
      consumer.deliver(q.waiting.shift()!);
    }
  }

  function pickConsumer(q: QueueState): ConsumerSlot | undefined {
    for (let i = 0; i < q.consumers.length; i++) {
      const index = (q.nextConsumer + i) % q.consumers.length;
      const consumer = q.consumers[index]!;
      if (consumer.hasCapacity()) {
        q.nextConsumer = index + 1;
        return consumer;
      }
    }
    return undefined;
  }

  function finish(q: QueueState, record: JobRecord, state: 'completed' | 'failed'): void {
    record.state = state;
    record.finishedAt = Date.now();
    record.bytes = new Uint8Array(0);
    (state === 'completed' ? q.completed : q.failed).push(record);
  }

  class MemoryConsumer implements Consumer, ConsumerSlot {
    readonly queue: string;
    readonly options: ConsumeOptions;
    private readonly runs = new Set<Run>();
    private closing?: Promise<void>;

    constructor(
      private readonly q: QueueState,
      private readonly schema: DescMessage,
      private readonly handler: JobHandler<MessageShape<DescMessage>>,
      options: ConsumeOptions,
    ) {
      this.queue = q.name;
      this.options = options;
    }

    hasCapacity(): boolean {
      return !this.closing && this.runs.size < (this.options.concurrency ?? 1);
    }

    deliver(record: JobRecord): void {
      record.state = 'active';
      record.deliveries += 1;
      const run: Run = { record, controller: new AbortController(), handedBack: false };
      this.runs.add(run);
      const job: Job<MessageShape<DescMessage>> = {
        id: record.id,
        data: fromBinary(this.schema, record.bytes),
        attemptsMade: record.deliveries,
        readyAt: record.readyAt,
      };
      // Start the handler on a later tick: add() resolves before any handler runs, as with Redis.
      run.done = Promise.resolve()
        .then(() => this.handler(job, run.controller.signal))
        .then(
          () => this.settle(run, undefined),
          (error: unknown) => this.settle(run, error ?? new Error('job handler threw')),
        );
    }

    private settle(run: Run, error: unknown): void {
      this.runs.delete(run);
      // A handed-back job belongs to the queue again; whatever this handler did is moot.
      if (run.handedBack || closed) return;
      const { record } = run;
      if (error === undefined) {
        finish(this.q, record, 'completed');
      } else {
        record.failures += 1;
        if (record.failures < (this.options.attempts ?? DEFAULT_ATTEMPTS)) {
          schedule(this.q, record, backoffDelay(this.options.backoffMs ?? DEFAULT_BACKOFF_MS, record.failures));
        } else {
          finish(this.q, record, 'failed');
        }
      }
      pump(this.q);
    }

    close(graceMs = DEFAULT_CLOSE_GRACE_MS): Promise<void> {
      this.closing ??= this.shutDown(graceMs);
      return this.closing;
    }

    private async shutDown(graceMs: number): Promise<void> {
      const index = this.q.consumers.indexOf(this);
      if (index >= 0) this.q.consumers.splice(index, 1);
      if (this.runs.size > 0 && graceMs > 0) {
        let timer: NodeJS.Timeout | undefined;
        await Promise.race([
          Promise.all([...this.runs].map((run) => run.done)),
          new Promise<void>((resolve) => {
            timer = setTimeout(resolve, graceMs);
          }),
        ]);
        clearTimeout(timer);
      }
      // Hand back what is still running, keeping the order in which it was taken.
      const left = [...this.runs].reverse();
      this.runs.clear();
      for (const run of left) {
        run.handedBack = true;
        run.controller.abort(new Error(`consumer of ${this.queue} closed; job handed back`));
        if (!closed) makeReady(this.q, run.record, true);
      }
    }
  }

  return {
    producer<S extends DescMessage>(queue: string, schema: S): Producer<S> {
      const q = stateOf(queue);
      const producer: Producer<S> = {
        queue,
        async add(jobId: string, payload: MessageShape<S>, addOptions = {}): Promise<boolean> {
          assertOpen();
          if (jobId === '') throw new Error('job id must not be empty');
          const now = Date.now();
          prune(q, now);
          if (q.jobs.has(jobId)) return false;
          const delayMs = Math.max(0, addOptions.delayMs ?? 0);
          const record: JobRecord = {
            id: jobId,
            conversationId: conversationOfPayload(payload),
            bytes: toBinary(schema, payload),
            state: 'delayed',
            readyAt: now + delayMs,
            deliveries: 0,
            failures: 0,
          };
          q.jobs.set(jobId, record);
          schedule(q, record, delayMs);
          return true;
        },
        async addBulk(jobs: readonly BulkJob<S>[]): Promise<void> {
          for (const job of jobs) await producer.add(job.jobId, job.payload, job.options);
        },
        async remove(jobId: string): Promise<boolean> {
          assertOpen();
          const record = q.jobs.get(jobId);
          if (!record || (record.state !== 'waiting' && record.state !== 'delayed')) return false;
          clearTimeout(record.timer);
          const index = q.waiting.indexOf(record);
          if (index >= 0) q.waiting.splice(index, 1);
          q.jobs.delete(jobId);
          return true;
        },
      };
      return producer;
    },

    consume<S extends DescMessage>(
      queue: string,
      schema: S,
      handler: JobHandler<MessageShape<S>>,
      consumeOptions: ConsumeOptions = {},
    ): Consumer {
      assertOpen();
      const q = stateOf(queue);
      const consumer = new MemoryConsumer(q, schema, handler as JobHandler<MessageShape<DescMessage>>, consumeOptions);
      q.consumers.push(consumer);
      queueMicrotask(() => pump(q));
      return consumer;
    },

    async depth(queue: string): Promise<QueueDepth> {
      const q = stateOf(queue);
      prune(q, Date.now());
      const counts = { waiting: 0, active: 0, delayed: 0, failed: 0, completed: 0 };
      for (const record of q.jobs.values()) counts[record.state] += 1;
      return { waiting: counts.waiting, active: counts.active, delayed: counts.delayed, failed: counts.failed };
    },

    async jobStatus(queue: string, jobId: string): Promise<JobStatus> {
      const q = stateOf(queue);
      prune(q, Date.now());
      const record = q.jobs.get(jobId);
      if (!record) return { state: 'unknown', finishedAt: null };
      return { state: record.state, finishedAt: record.finishedAt ?? null };
    },

    async removeConversation(conversationId: string): Promise<number> {
      let removed = 0;
      for (const q of queues.values()) {
        for (const record of [...q.jobs.values()]) {
          // A running job stays, as on BullMQ (its consumer holds it).
          if (record.conversationId !== conversationId || record.state === 'active') continue;
          clearTimeout(record.timer);
          for (const list of [q.waiting, q.completed, q.failed]) {
            const at = list.indexOf(record);
            if (at >= 0) list.splice(at, 1);
          }
          q.jobs.delete(record.id);
          removed += 1;
        }
      }
      return removed;
    },

    async close(): Promise<void> {
      if (closed) return;
      // Consumers still open lose their running jobs: close them first to let work finish.
      await Promise.all([...queues.values()].flatMap((q) => [...q.consumers].map((c) => c.close(0))));
      closed = true;
      for (const q of queues.values()) {
        clearTimeout(q.limiterTimer);
        for (const record of q.jobs.values()) clearTimeout(record.timer);
      }
      queues.clear();
    },
  };
}
