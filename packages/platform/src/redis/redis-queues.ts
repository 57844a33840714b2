/**
 * Job queues on BullMQ. Payloads are stored as protobuf JSON (readable with redis-cli); job ids go through
 * encodeJobId because BullMQ refuses `:` and integer-looking ids. Attempts and backoff are per consumer here
 * but per job in BullMQ ({@link BULL_ATTEMPTS}); with partitions each queue is N BullMQ queues, consumed by
 * one Worker each behind a {@link FairGate}. docs/transports.md, "Queues", "Redis Cluster", "Queue partitions".
 */
import { setMaxListeners } from 'node:events';
import { randomUUID } from 'node:crypto';
import { Queue, WaitingError, Worker } from 'bullmq';
import type { Job as BullJob } from 'bullmq';
import type { RedisClient } from './redis-connection.ts';
import { createRedisClient, isCluster } from './redis-connection.ts';
import { quitOrDisconnect } from './quit.ts';
import { luaScript, runScript } from './redis-script.ts';
import { fromJson, toJson } from '@bufbuild/protobuf';
import type { DescMessage, MessageShape } from '@bufbuild/protobuf';
import type { BulkJob, ConsumeOptions, Consumer, Job, JobHandler, JobStatus, Producer, QueueDepth, Queues } from '../interfaces.ts';
import {
  DEFAULT_ATTEMPTS,
  DEFAULT_BACKOFF_MS,
  DEFAULT_CLOSE_GRACE_MS,
  DEFAULT_COMPLETED_RETENTION_MS,
  DEFAULT_FAILED_RETENTION_MS,
  DEFAULT_JOB_LOCK_MS,
  DEFAULT_JOB_STALLED_INTERVAL_MS,
  JOB_LOCK_RENEW_FRACTION,
  assertQueueName,
  backoffDelay,
  conversationOfPayload,
} from '../defaults.ts';
import { decodeJobId, encodeJobId } from '../job-id.ts';
import type { RedisKeys } from './redis-keys.ts';

export interface RedisQueuesOptions {
  readonly redisUrl: string;
  /** `redisUrl` is a seed node of a Redis Cluster (each Worker opens an ioredis Cluster). */
  readonly cluster?: boolean;
  /** The key layout: BullMQ's prefix (`<prefix>:q`) and its keys. */
  readonly keys: RedisKeys;
  /** Connection for producers and depth; owned by the caller (not closed here). */
  readonly connection: RedisClient;
  /** How long a completed job (and so its id) is kept, ms. Default 24 h. */
  readonly completedRetentionMs?: number;
  /** How long a job that used up its attempts is kept, ms. Default 7 days. */
  readonly failedRetentionMs?: number;
  /**
   * How long a consumer's lock on a running job lasts before it must be renewed, ms; it is
   * renewed every quarter of it. A job whose consumer died without closing (kill -9, lost
   * node) is taken back from it after at most about lockDuration + stalledInterval. Default
   * 4 s (BullMQ's own is 30 s).
   */
  readonly lockDurationMs?: number;
  /** How often consumers look for jobs whose lock expired, ms. Default 1 s (BullMQ's own is 30 s). */
  readonly stalledIntervalMs?: number;
  readonly onError: (error: unknown) => void;
}

/**
 * Ceiling for BullMQ's own attempt count; the consumer's backoffStrategy decides the real limit. Attempts
 * and backoff are consumer options in our interface but job options in BullMQ, so every job is added with
 * this and {@link BACKOFF_TYPE}, and each Worker's `backoffStrategy` applies its own consumer's
 * `attempts`/`backoffMs` (returning -1, "do not retry", once they are used up).
 */
const BULL_ATTEMPTS = 1_000_000;
/** Our custom BullMQ backoff type, resolved by each Worker's `settings.backoffStrategy`. */
const BACKOFF_TYPE = 'bedrock-consumer';

/** BullMQ job states as ours; anything else (e.g. 'unknown') is 'unknown'. */
const STATUS_OF: Partial<Record<string, JobStatus['state']>> = {
  waiting: 'waiting',
  wait: 'waiting',
  prioritized: 'waiting',
  'waiting-children': 'waiting',
  delayed: 'delayed',
  active: 'active',
  completed: 'completed',
  failed: 'failed',
};

/** BullMQ states that mean "not started yet". */
const NOT_STARTED = new Set(['waiting', 'delayed', 'prioritized', 'wait']);

/** A conversation's job index: its entries added and its time to live set, atomically. ARGV: the TTL (ms), then the entries. */
const INDEX_JOBS = luaScript("redis.call('SADD', KEYS[1], unpack(ARGV, 2)); redis.call('PEXPIRE', KEYS[1], ARGV[1]); return 1");

export function createRedisQueues(options: RedisQueuesOptions): Queues {
  const completedAgeSec = Math.ceil((options.completedRetentionMs ?? DEFAULT_COMPLETED_RETENTION_MS) / 1000);
  const failedAgeSec = Math.ceil((options.failedRetentionMs ?? DEFAULT_FAILED_RETENTION_MS) / 1000);
  const { keys, connection, onError } = options;
  const bullPrefix = keys.bullPrefix;
  const bullQueues = new Map<string, Queue>();
  /** Options of every job we add. */
  const jobOptions = {
    attempts: BULL_ATTEMPTS,
    backoff: { type: BACKOFF_TYPE },
    removeOnComplete: { age: completedAgeSec },
    removeOnFail: { age: failedAgeSec },
  };
  const consumers = new Set<RedisConsumer>();
  let closed = false;
  /**
   * Each job is listed in its conversation's set (`conversationJobs`), so that deleting the
   * conversation finds its jobs without scanning the queues. The set outlives the jobs it lists
   * (the longest retention, plus the job's delay), and each add renews it.
   */
  const indexTtlMs = (delayMs: number) => Math.max(completedAgeSec, failedAgeSec) * 1000 + delayMs + 60_000;
  const indexEntry = (queue: string, encodedId: string) => `${queue}:${encodedId}`;
  /**
   * Lists jobs in their conversation's set and renews its expiry (one slot: one script call). On a Redis
   * Cluster the set is in another slot than the job, so the two are written by separate commands, never one
   * script or pipeline.
   */
  async function indexJobs(conversationId: string, entries: string[], delayMs: number): Promise<void> {
    // One script, not MULTI: an ioredis pipeline copies every script BullMQ defined on the
    // connection into itself, which cost more than the call (the apply benchmark's profile).
    await runScript(connection, INDEX_JOBS, [keys.conversationJobs(conversationId)], [indexTtlMs(delayMs), ...entries]);
  }

  const partitions = keys.queuePartitions;
  const allPartitions = Array.from({ length: partitions }, (_, i) => i);
  /**
   * The partition of a job: its conversation's, or its id's when its payload names none. So one id is always
   * in one partition (de-duplication holds) and a conversation's jobs of a queue are in one FIFO list.
   */
  const partitionOfJob = (jobId: string, payload: object) => keys.partitionOf(conversationOfPayload(payload) ?? jobId);

  function bullQueue(name: string, partition = 0): Queue {
    if (closed) throw new Error('queues are closed');
    assertQueueName(name);
    const bullName = keys.bullQueueName(name, partition);
    let queue = bullQueues.get(bullName);
    if (!queue) {
      queue = new Queue(bullName, { connection, prefix: bullPrefix });
      queue.on('error', onError);
      bullQueues.set(bullName, queue);
    }
    return queue;
  }

  function jobKey(queue: string, encodedId: string, partition: number): string {
    return keys.bullKey(queue, encodedId, partition);
  }

  /**
   * A job by its id alone (jobStatus, remove): one id is in one partition, but without its
   * payload the partition is unknown, so every partition is asked (N lookups at once).
   */
  async function findJob(queue: string, encodedId: string): Promise<{ job: BullJob; partition: number } | undefined> {
    const found = await Promise.all(
      allPartitions.map(async (partition) => ({ job: await bullQueue(queue, partition).getJob(encodedId), partition })),
    );
    return found.find((f): f is { job: BullJob; partition: number } => f.job !== undefined);
  }

  class RedisConsumer implements Consumer {
    readonly queue: string;
    /** One Worker per partition. */
    private readonly workers: Worker[];
    /** The Workers' cluster connection, shared by the partitions' Workers (each duplicates it for its blocking reads) and closed with them; none on one Redis (BullMQ owns its connections). */
    private readonly clusterConnection: RedisClient | undefined;
    /** Shares `concurrency` between the partitions' Workers, first come first served (none with one partition). */
    private readonly gate: FairGate | undefined;
    /** Aborted when close() stops waiting: running jobs are handed back. */
    private readonly handBack = (() => {
      const controller = new AbortController();
      // One listener per running job (bounded by concurrency), so Node's default of 10 is no leak sign.
      setMaxListeners(0, controller.signal);
      return controller;
    })();
    private closing?: Promise<void>;

    constructor(
      queue: string,
      private readonly schema: DescMessage,
      private readonly handler: JobHandler<MessageShape<DescMessage>>,
      consumeOptions: ConsumeOptions,
    ) {
      this.queue = queue;
      const attempts = consumeOptions.attempts ?? DEFAULT_ATTEMPTS;
      const backoffMs = consumeOptions.backoffMs ?? DEFAULT_BACKOFF_MS;
      // Three declared parameters: BullMQ passes its signal only to such processors. It aborts
      // on Worker.cancelJob — not when a lock is lost: a consumer whose lock lapsed (a long
      // event-loop stall) keeps running its job while the job may be redelivered elsewhere.
      const processor = (job: BullJob, token?: string, signal?: AbortSignal) => this.process(job, token, signal);
      const lockDuration = options.lockDurationMs ?? DEFAULT_JOB_LOCK_MS;
      const concurrency = consumeOptions.concurrency ?? 1;
      // With N partitions each Worker may take up to `concurrency` jobs (one busy partition gets
      // all of it) and the gate lets `concurrency` run in all, first come first served. While
      // the gate is full the Workers are throttled to 1 (BullMQ reads `concurrency` before each
      // fetch), so what waits at the gate (held, its lock renewed) is about one job per
      // partition: each partition's next turn, after at most one job of each other partition.
      this.gate = partitions > 1 ? new FairGate(concurrency, (full) => this.throttle(full ? 1 : concurrency)) : undefined;
      // The limiter is queue-wide in BullMQ, so per partition: the same `max` over N times the
      // window, which adds up to the configured rate across the partitions.
      const limiter = consumeOptions.limiter
        ? { max: consumeOptions.limiter.max, duration: consumeOptions.limiter.durationMs * partitions }
        : undefined;
      // BullMQ workers wait for Redis indefinitely (maxRetriesPerRequest null), as BullMQ requires.
      this.clusterConnection = options.cluster
        ? createRedisClient(options.redisUrl, true, { connectionName: 'bedrock-worker', maxRetriesPerRequest: null })
        : undefined;
      this.clusterConnection?.on('error', onError);
      this.workers = allPartitions.map((partition) => {
        const worker = new Worker(keys.bullQueueName(queue, partition), processor, {
          connection: this.clusterConnection ?? { url: options.redisUrl },
          prefix: bullPrefix,
          concurrency,
          lockDuration,
          // Renewed every quarter of the lock (BullMQ: half), so an event loop may stall for about
          // three quarters of it before the lock lapses.
          lockRenewTime: Math.max(1, Math.round(lockDuration * JOB_LOCK_RENEW_FRACTION)),
          stalledInterval: options.stalledIntervalMs ?? DEFAULT_JOB_STALLED_INTERVAL_MS,
          limiter,
          settings: {
            // `failures` counts handler throws including this one.
            backoffStrategy: (failures: number) => (failures >= attempts ? -1 : backoffDelay(backoffMs, failures)),
          },
        });
        worker.on('error', onError);
        return worker;
      });
    }

    /** Sets every Worker's fetch limit (the gate's slots still bound what runs). */
    private throttle(limit: number): void {
      for (const worker of this.workers) worker.concurrency = limit;
    }

    private async process(bullJob: BullJob, token: string | undefined, lockLost: AbortSignal | undefined): Promise<void> {
      const handBack = this.handBack.signal;
      const admitted = this.gate ? await this.gate.enter(handBack) : !handBack.aborted;
      if (admitted) {
        try {
          if (await this.run(bullJob, handBack, lockLost)) return;
        } finally {
          this.gate?.leave();
        }
      }
      // Back to the front of the wait list for another consumer; WaitingError tells the Worker
      // the job was moved on purpose (neither completed nor failed).
      await bullJob.moveToWait(token);
      throw new WaitingError();
    }

    /** Runs the handler; true when it settled, false when the consumer handed the job back first. */
    private async run(bullJob: BullJob, handBack: AbortSignal, lockLost: AbortSignal | undefined): Promise<boolean> {
      const job: Job<MessageShape<DescMessage>> = {
        id: decodeJobId(bullJob.id ?? ''),
        // Unknown fields are ignored so a newer producer does not break an older consumer mid-deploy.
        data: fromJson(this.schema, bullJob.data, { ignoreUnknownFields: true }),
        attemptsMade: bullJob.attemptsStarted,
        readyAt: bullJob.timestamp + (bullJob.opts.delay ?? 0),
      };
      const signal = lockLost ? AbortSignal.any([handBack, lockLost]) : handBack;
      const outcome = await raceAbort(
        Promise.resolve().then(() => this.handler(job, signal)),
        handBack,
      );
      return outcome === 'done';
    }

    close(graceMs = DEFAULT_CLOSE_GRACE_MS): Promise<void> {
      this.closing ??= this.shutDown(graceMs);
      return this.closing;
    }

    private async shutDown(graceMs: number): Promise<void> {
      // Worker.close() stops fetching at once and resolves when running jobs are done.
      const closed = Promise.all(this.workers.map((worker) => worker.close()));
      let timer: NodeJS.Timeout | undefined;
      const finished = await Promise.race([
        closed.then(() => true),
        new Promise<boolean>((resolve) => {
          timer = setTimeout(() => resolve(false), graceMs);
        }),
      ]);
      clearTimeout(timer);
      if (!finished) this.handBack.abort(new Error(`consumer of ${this.queue} closed; job handed back`));
      await closed;
      if (this.clusterConnection) await quitOrDisconnect(this.clusterConnection);
      consumers.delete(this);
    }
  }

  return {
    producer<S extends DescMessage>(queue: string, schema: S): Producer<S> {
      bullQueue(queue);
      return {
        queue,
        async add(jobId: string, payload: MessageShape<S>, addOptions = {}): Promise<boolean> {
          const encoded = encodeJobId(jobId);
          // BullMQ returns the id whether it added the job or found it already there, so each
          // add carries a unique name and reading it back tells which happened.
          const name = `${schema.typeName}/${randomUUID()}`;
          const partition = partitionOfJob(jobId, payload);
          await bullQueue(queue, partition).add(name, toJson(schema, payload), {
            jobId: encoded,
            delay: Math.max(0, addOptions.delayMs ?? 0),
            ...jobOptions,
          });
          const owner = conversationOfPayload(payload);
          // The job's hash and the conversation's set are in different slots: two commands.
          const [stored] = await Promise.all([
            connection.hget(jobKey(queue, encoded, partition), 'name'),
            owner === null ? undefined : indexJobs(owner, [indexEntry(queue, encoded)], Math.max(0, addOptions.delayMs ?? 0)),
          ]);
          // null: the job is already gone (removed in between); it was ours to add, so true.
          return stored === null || stored === name;
        },

        async addBulk(jobs: readonly BulkJob<S>[]): Promise<void> {
          const bulk = jobs.map((job) => ({
            partition: partitionOfJob(job.jobId, job.payload),
            name: schema.typeName,
            data: toJson(schema, job.payload),
            opts: { jobId: encodeJobId(job.jobId), delay: Math.max(0, job.options?.delayMs ?? 0), ...jobOptions },
          }));
          // The conversations' sets first (one MULTI per conversation, concurrently: each set is
          // in its own slot on a cluster): a job is never queued unlisted.
          const byOwner = new Map<string, { entries: string[]; delayMs: number }>();
          for (const job of jobs) {
            const owner = conversationOfPayload(job.payload);
            if (owner === null) continue;
            let entry = byOwner.get(owner);
            if (!entry) byOwner.set(owner, (entry = { entries: [], delayMs: 0 }));
            entry.entries.push(indexEntry(queue, encodeJobId(job.jobId)));
            entry.delayMs = Math.max(entry.delayMs, job.options?.delayMs ?? 0);
          }
          const indexed = Promise.all([...byOwner].map(([owner, { entries, delayMs }]) => indexJobs(owner, entries, delayMs)));
          // On one Redis the jobs follow on the same connection, which Redis serves in order: no
          // need to wait for the sets' reply first (a round trip less on every publish). A failed
          // set fails the publish, which is then published again, sets and all.
          if (isCluster(connection)) await indexed;
          // BullMQ keeps a job whose id exists as it is (no second add). One job: one script
          // call (addBulk would build an ioredis MULTI pipeline, which costs more than the call).
          // Per partition (each its own slot on a cluster), in order within each.
          const byPartition = new Map<number, typeof bulk>();
          for (const job of bulk) {
            let list = byPartition.get(job.partition);
            if (!list) byPartition.set(job.partition, (list = []));
            list.push(job);
          }
          await Promise.all([
            indexed,
            ...[...byPartition].map(async ([partition, list]) => {
              const bull = bullQueue(queue, partition);
              if (list.length === 1) await bull.add(list[0]!.name, list[0]!.data, list[0]!.opts);
              else await bull.addBulk(list.map(({ name, data, opts }) => ({ name, data, opts })));
            }),
          ]);
        },

        async remove(jobId: string): Promise<boolean> {
          const encoded = encodeJobId(jobId);
          const found = await findJob(queue, encoded);
          if (!found || !NOT_STARTED.has(await found.job.getState())) return false;
          // BullMQ refuses (0) to remove a job locked by a worker, so a job that started
          // between the state check and here is left alone.
          return (await bullQueue(queue, found.partition).remove(encoded)) === 1;
        },
      };
    },

    consume<S extends DescMessage>(
      queue: string,
      schema: S,
      handler: JobHandler<MessageShape<S>>,
      consumeOptions: ConsumeOptions = {},
    ): Consumer {
      if (closed) throw new Error('queues are closed');
      assertQueueName(queue);
      const consumer = new RedisConsumer(queue, schema, handler as JobHandler<MessageShape<DescMessage>>, consumeOptions);
      consumers.add(consumer);
      return consumer;
    },

    async depth(queue: string): Promise<QueueDepth> {
      // Summed over the partitions (each its own call: its own slot on a cluster).
      const all = await Promise.all(
        allPartitions.map((p) => bullQueue(queue, p).getJobCounts('waiting', 'prioritized', 'active', 'delayed', 'failed')),
      );
      const sum = (state: string) => all.reduce((total, counts) => total + (counts[state] ?? 0), 0);
      return { waiting: sum('waiting') + sum('prioritized'), active: sum('active'), delayed: sum('delayed'), failed: sum('failed') };
    },

    async jobStatus(queue: string, jobId: string): Promise<JobStatus> {
      const job = (await findJob(queue, encodeJobId(jobId)))?.job;
      if (!job) return { state: 'unknown', finishedAt: null };
      const state = STATUS_OF[await job.getState()] ?? 'unknown';
      const finished = state === 'completed' || state === 'failed';
      return { state, finishedAt: finished ? (job.finishedOn ?? null) : null };
    },

    async removeConversation(conversationId: string): Promise<number> {
      const index = keys.conversationJobs(conversationId);
      const entries = await connection.smembers(index);
      // Every job listed names this conversation, so all are in its partition.
      const partition = keys.partitionOf(conversationId);
      let removed = 0;
      for (const entry of entries) {
        const at = entry.indexOf(':');
        const queue = entry.slice(0, at);
        const encoded = entry.slice(at + 1);
        // BullMQ's remove deletes the job's hash (its payload), its logs and its place in every
        // state list; it refuses (0) a job a worker holds the lock of: that one stays listed.
        const done = (await bullQueue(queue, partition).remove(encoded)) === 1;
        const gone = done || (await connection.exists(jobKey(queue, encoded, partition))) === 0;
        if (done) removed += 1;
        if (gone) await connection.srem(index, entry);
      }
      return removed;
    },

    async close(): Promise<void> {
      if (closed) return;
      closed = true;
      // Consumers still open lose their running jobs (handed back): close them first to let work finish.
      await Promise.all([...consumers].map((consumer) => consumer.close(0)));
      await Promise.all([...bullQueues.values()].map((queue) => queue.close()));
      bullQueues.clear();
    },
  };
}

/** Resolves 'done' when work settles first (rejecting if it rejects), 'aborted' when the signal fires first. */
async function raceAbort(work: Promise<void>, signal: AbortSignal): Promise<'done' | 'aborted'> {
  let onAbort: (() => void) | undefined;
  const aborted = new Promise<'aborted'>((resolve) => {
    onAbort = () => resolve('aborted');
    signal.addEventListener('abort', onAbort, { once: true });
  });
  try {
    return await Promise.race([work.then(() => 'done' as const), aborted]);
  } finally {
    signal.removeEventListener('abort', onAbort!);
  }
}

/**
 * At most `slots` holders at once; waiters enter in arrival order (FIFO), so the Workers of the
 * partitions take turns: the consumer's `concurrency` is shared between them, no partition waits behind
 * a flood in another, and one busy partition may still use all of it. Hand-written: p-limit and friends
 * queue functions, not waiters that can give up (an aborted waiter here leaves the line without taking a
 * slot).
 */
class FairGate {
  private used = 0;
  private readonly waiters: { resolve: (entered: boolean) => void; signal: AbortSignal; onAbort: () => void }[] = [];

  /** `onFull(true)` when the last slot is taken, `onFull(false)` when one is free again. */
  constructor(
    private readonly slots: number,
    private readonly onFull: (full: boolean) => void,
  ) {}

  /** Resolves true once a slot is taken, false if `signal` aborted first (no slot taken). */
  enter(signal: AbortSignal): Promise<boolean> {
    if (signal.aborted) return Promise.resolve(false);
    if (this.used < this.slots && this.waiters.length === 0) {
      this.used += 1;
      if (this.used === this.slots) this.onFull(true);
      return Promise.resolve(true);
    }
    return new Promise((resolve) => {
      const waiter = {
        resolve,
        signal,
        onAbort: () => {
          const at = this.waiters.indexOf(waiter);
          if (at !== -1) this.waiters.splice(at, 1);
          resolve(false);
        },
      };
      signal.addEventListener('abort', waiter.onAbort, { once: true });
      this.waiters.push(waiter);
    });
  }

  leave(): void {
    const next = this.waiters.shift();
    if (next) {
      // The slot passes straight to the next waiter.
      next.signal.removeEventListener('abort', next.onAbort);
      next.resolve(true);
    } else {
      this.used -= 1;
      if (this.used === this.slots - 1) this.onFull(false);
    }
  }
}
