/**
 * Job queues on BullMQ. Payloads are stored as protobuf JSON (readable with redis-cli);
 * job ids go through encodeJobId because BullMQ refuses `:` and integer-looking ids.
 *
 * Attempts and backoff are consumer options in our interface but job options in BullMQ, so
 * every job is added with a very high `attempts` and a custom backoff type, and each Worker's
 * `backoffStrategy` applies its own consumer's `attempts`/`backoffMs` (returning -1, "do not
 * retry", once they are used up).
 *
 * Redis Cluster: a BullMQ queue's keys must share a slot; the queue's BullMQ name is `{<queue>}`
 * (redis-keys.ts), a hash tag. A job's conversation set is in another slot than the job, so the
 * two are written by separate commands (never one MULTI or pipeline).
 */
import { setMaxListeners } from 'node:events';
import { randomUUID } from 'node:crypto';
import { Queue, WaitingError, Worker } from 'bullmq';
import type { Job as BullJob } from 'bullmq';
import type { RedisClient } from './redis-connection.ts';
import { createRedisClient } from './redis-connection.ts';
import { quitOrDisconnect } from './quit.ts';
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

/** Ceiling for BullMQ's own attempt count; the consumer's backoffStrategy decides the real limit. */
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
  /** Lists jobs in their conversation's set and renews its expiry (one slot: one MULTI). */
  async function indexJobs(conversationId: string, entries: string[], delayMs: number): Promise<void> {
    const index = keys.conversationJobs(conversationId);
    const replies = await connection
      .multi()
      .sadd(index, ...entries)
      .pexpire(index, indexTtlMs(delayMs))
      .exec();
    if (!replies) throw new Error('job index write was aborted');
    for (const [err] of replies) if (err) throw err;
  }

  function bullQueue(name: string): Queue {
    if (closed) throw new Error('queues are closed');
    assertQueueName(name);
    let queue = bullQueues.get(name);
    if (!queue) {
      queue = new Queue(keys.bullQueueName(name), { connection, prefix: bullPrefix });
      queue.on('error', onError);
      bullQueues.set(name, queue);
    }
    return queue;
  }

  function jobKey(queue: string, encodedId: string): string {
    return keys.bullKey(queue, encodedId);
  }

  class RedisConsumer implements Consumer {
    readonly queue: string;
    private readonly worker: Worker;
    /** The Worker's own cluster connection (closed with it); none on one Redis (BullMQ owns its connection). */
    private readonly clusterConnection: RedisClient | undefined;
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
      // BullMQ workers wait for Redis indefinitely (maxRetriesPerRequest null), as BullMQ requires.
      this.clusterConnection = options.cluster
        ? createRedisClient(options.redisUrl, true, { connectionName: 'bedrock-worker', maxRetriesPerRequest: null })
        : undefined;
      this.clusterConnection?.on('error', onError);
      this.worker = new Worker(keys.bullQueueName(queue), processor, {
        connection: this.clusterConnection ?? { url: options.redisUrl },
        prefix: bullPrefix,
        concurrency: consumeOptions.concurrency ?? 1,
        lockDuration,
        // Renewed every quarter of the lock (BullMQ: half), so an event loop may stall for about
        // three quarters of it before the lock lapses.
        lockRenewTime: Math.max(1, Math.round(lockDuration * JOB_LOCK_RENEW_FRACTION)),
        stalledInterval: options.stalledIntervalMs ?? DEFAULT_JOB_STALLED_INTERVAL_MS,
        limiter: consumeOptions.limiter ? { max: consumeOptions.limiter.max, duration: consumeOptions.limiter.durationMs } : undefined,
        settings: {
          // `failures` counts handler throws including this one.
          backoffStrategy: (failures: number) => (failures >= attempts ? -1 : backoffDelay(backoffMs, failures)),
        },
      });
      this.worker.on('error', onError);
    }

    private async process(bullJob: BullJob, token: string | undefined, lockLost: AbortSignal | undefined): Promise<void> {
      const handBack = this.handBack.signal;
      if (!handBack.aborted) {
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
        if (outcome === 'done') return;
      }
      // Back to the front of the wait list for another consumer; WaitingError tells the Worker
      // the job was moved on purpose (neither completed nor failed).
      await bullJob.moveToWait(token);
      throw new WaitingError();
    }

    close(graceMs = DEFAULT_CLOSE_GRACE_MS): Promise<void> {
      this.closing ??= this.shutDown(graceMs);
      return this.closing;
    }

    private async shutDown(graceMs: number): Promise<void> {
      // Worker.close() stops fetching at once and resolves when running jobs are done.
      const closed = this.worker.close();
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
      const bull = bullQueue(queue);
      return {
        queue,
        async add(jobId: string, payload: MessageShape<S>, addOptions = {}): Promise<boolean> {
          const encoded = encodeJobId(jobId);
          // BullMQ returns the id whether it added the job or found it already there, so each
          // add carries a unique name and reading it back tells which happened.
          const name = `${schema.typeName}/${randomUUID()}`;
          await bull.add(name, toJson(schema, payload), {
            jobId: encoded,
            delay: Math.max(0, addOptions.delayMs ?? 0),
            ...jobOptions,
          });
          const owner = conversationOfPayload(payload);
          // The job's hash and the conversation's set are in different slots: two commands.
          const [stored] = await Promise.all([
            connection.hget(jobKey(queue, encoded), 'name'),
            owner === null ? undefined : indexJobs(owner, [indexEntry(queue, encoded)], Math.max(0, addOptions.delayMs ?? 0)),
          ]);
          // null: the job is already gone (removed in between); it was ours to add, so true.
          return stored === null || stored === name;
        },

        async addBulk(jobs: readonly BulkJob<S>[]): Promise<void> {
          const bulk = jobs.map((job) => ({
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
          await Promise.all([...byOwner].map(([owner, { entries, delayMs }]) => indexJobs(owner, entries, delayMs)));
          // BullMQ keeps a job whose id exists as it is (no second add). One job: one script
          // call (addBulk would build an ioredis MULTI pipeline, which costs more than the call).
          if (bulk.length === 1) await bull.add(bulk[0]!.name, bulk[0]!.data, bulk[0]!.opts);
          else if (bulk.length > 1) await bull.addBulk(bulk);
        },

        async remove(jobId: string): Promise<boolean> {
          const encoded = encodeJobId(jobId);
          const job = await bull.getJob(encoded);
          if (!job || !NOT_STARTED.has(await job.getState())) return false;
          // BullMQ refuses (0) to remove a job locked by a worker, so a job that started
          // between the state check and here is left alone.
          return (await bull.remove(encoded)) === 1;
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
      const counts = await bullQueue(queue).getJobCounts('waiting', 'prioritized', 'active', 'delayed', 'failed');
      return {
        waiting: (counts.waiting ?? 0) + (counts.prioritized ?? 0),
        active: counts.active ?? 0,
        delayed: counts.delayed ?? 0,
        failed: counts.failed ?? 0,
      };
    },

    async jobStatus(queue: string, jobId: string): Promise<JobStatus> {
      const job = await bullQueue(queue).getJob(encodeJobId(jobId));
      if (!job) return { state: 'unknown', finishedAt: null };
      const state = STATUS_OF[await job.getState()] ?? 'unknown';
      const finished = state === 'completed' || state === 'failed';
      return { state, finishedAt: finished ? (job.finishedOn ?? null) : null };
    },

    async removeConversation(conversationId: string): Promise<number> {
      const index = keys.conversationJobs(conversationId);
      const entries = await connection.smembers(index);
      let removed = 0;
      for (const entry of entries) {
        const at = entry.indexOf(':');
        const queue = entry.slice(0, at);
        const encoded = entry.slice(at + 1);
        // BullMQ's remove deletes the job's hash (its payload), its logs and its place in every
        // state list; it refuses (0) a job a worker holds the lock of: that one stays listed.
        const done = (await bullQueue(queue).remove(encoded)) === 1;
        const gone = done || (await connection.exists(jobKey(queue, encoded))) === 0;
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
