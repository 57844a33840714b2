/**
 * The I/O interfaces between services. Each has two implementations with the same
 * semantics, checked by one contract test suite: BullMQ/Redis for the distributed mode and
 * in-process for the embedded default.
 */
import type { DescMessage, MessageShape } from '@bufbuild/protobuf';
import type { CancelSignal, ConversationEvent, RunnerCapabilities } from '@bedrock/contracts';

/** A job as a consumer sees it. */
export interface Job<T> {
  /** The producer's id; adding a job whose id is already known is a no-op (de-duplication). */
  readonly id: string;
  readonly data: T;
  /** 1 on first delivery; higher when redelivered after a consumer died or failed. */
  readonly attemptsMade: number;
  /** When the job became ready to run (after any delay), ms since epoch. */
  readonly readyAt: number;
}

export interface AddOptions {
  /** Run no earlier than this many milliseconds from now (timers, retry backoff). Default 0. */
  readonly delayMs?: number;
}

/** One job of `Producer.addBulk`. */
export interface BulkJob<S extends DescMessage> {
  readonly jobId: string;
  readonly payload: MessageShape<S>;
  readonly options?: AddOptions;
}

/** Produces jobs of one protobuf message type onto one named queue. */
export interface Producer<S extends DescMessage> {
  readonly queue: string;
  /** Resolves once the job is durably queued. Returns false when the id was already queued (duplicate). */
  add(jobId: string, payload: MessageShape<S>, options?: AddOptions): Promise<boolean>;
  /**
   * Adds several jobs in one round trip (in order); resolves once all are durably queued. A job
   * whose id is already known is left as it is, as with `add`.
   */
  addBulk(jobs: readonly BulkJob<S>[]): Promise<void>;
  /** Removes a job that has not started yet (e.g. a retry timer no longer needed). True if removed. */
  remove(jobId: string): Promise<boolean>;
}

export interface ConsumeOptions {
  /** Jobs processed at once by this consumer. Default 1. */
  readonly concurrency?: number;
  /** Queue-wide rate limit shared by every consumer of the queue (across replicas). */
  readonly limiter?: { readonly max: number; readonly durationMs: number };
  /**
   * A job whose handler throws is retried this many times in all, with exponential backoff
   * from `backoffMs`. Default 5 attempts, 500 ms.
   */
  readonly attempts?: number;
  readonly backoffMs?: number;
}

/**
 * The handler gets a signal that aborts when the consumer shuts down without finishing the
 * job; the job is then handed back to the queue for another consumer.
 */
export type JobHandler<T> = (job: Job<T>, signal: AbortSignal) => Promise<void>;

export interface Consumer {
  readonly queue: string;
  /** Stop taking jobs; wait up to `graceMs` for running ones, then hand them back. */
  close(graceMs?: number): Promise<void>;
}

export interface QueueDepth {
  readonly waiting: number;
  readonly active: number;
  readonly delayed: number;
  readonly failed: number;
}

/** Where a job is, for recovery: is the work a conversation waits on still there? */
export interface JobStatus {
  /** 'unknown': never added, removed, or forgotten after its retention period. */
  readonly state: 'waiting' | 'delayed' | 'active' | 'completed' | 'failed' | 'unknown';
  /** When it completed, or failed for good, ms since epoch; null in the other states. */
  readonly finishedAt: number | null;
}

export interface Queues {
  producer<S extends DescMessage>(queue: string, schema: S): Producer<S>;
  consume<S extends DescMessage>(queue: string, schema: S, handler: JobHandler<MessageShape<S>>, options?: ConsumeOptions): Consumer;
  depth(queue: string): Promise<QueueDepth>;
  /** The state of one job by its producer id (a handed-back or retrying job is 'waiting' or 'delayed'). */
  jobStatus(queue: string, jobId: string): Promise<JobStatus>;
  /**
   * Removes, from every queue, the jobs whose payload names `conversationId` (its
   * `conversation_id` field) and that are not running: waiting, delayed, completed and failed
   * ones, with their content and ids (DeleteConversation, DeleteUser: nothing of a deleted
   * conversation stays readable). A running job stays; call again once it has finished.
   * Resolves with the number of jobs removed.
   */
  removeConversation(conversationId: string): Promise<number>;
  close(): Promise<void>;
}

/** A position in a conversation's notification stream (see events.proto). */
export interface StreamPosition {
  readonly sequence: bigint;
  readonly deltaIndex: number;
}

export const STREAM_START: StreamPosition = { sequence: 0n, deltaIndex: 0 };

/** A durable event already encoded as protobuf JSON (`toJsonString(ConversationEventSchema, event)`). */
export interface EncodedEvent {
  readonly conversationId: string;
  readonly sequence: bigint;
  /** The event's oneof case, e.g. `stateChanged`. */
  readonly kind: string;
  readonly json: string;
}

/** Per-conversation ordered notification streams (Redis Streams in the distributed mode). */
export interface NotificationStreams {
  /**
   * Appends a durable event at exactly (event.sequence, 0). Returns false, changing nothing,
   * when the stream already holds that position or a later one (a re-publish after a crash).
   */
  appendDurable(event: ConversationEvent): Promise<boolean>;
  /**
   * Appends durable events of ONE conversation, in the order given, in one round trip. Each
   * event has the semantics of {@link appendDurable}: its result is false, changing nothing
   * for it, when the stream already holds its position or a later one (including a position
   * taken by an earlier event of the same call). Resolves with one result per event; an empty
   * list resolves [] without touching the store. Throws when the events name more than one
   * conversation. An event may come already encoded ({@link EncodedEvent}: the outbox stores
   * them so), which spares decoding it only to encode it again.
   */
  appendDurableMany(events: readonly (ConversationEvent | EncodedEvent)[]): Promise<boolean[]>;
  /**
   * Appends an ephemeral event (token delta, tool output) after durable event
   * `event.sequence`; the stream assigns the next delta index. Returns the position, or
   * null when a later durable event exists already (the delta is stale and dropped).
   */
  appendEphemeral(event: ConversationEvent): Promise<StreamPosition | null>;
  /**
   * Events strictly after `after`, in order, at most `limit`. Waits up to `blockMs` for the
   * first one when there is none yet (0: do not wait). Resolves early with [] on abort.
   */
  read(
    conversationId: string,
    after: StreamPosition,
    options?: { limit?: number; blockMs?: number; signal?: AbortSignal },
  ): Promise<ConversationEvent[]>;
  /** The last position, or STREAM_START for an empty stream. */
  last(conversationId: string): Promise<StreamPosition>;
  /**
   * Follows a stream live: `onEvents` gets every event strictly after `after`, in order, in
   * batches, until `stop()`. Meant for one process following many streams at once (a watch
   * fan-out): the Redis implementation reads every followed stream over a few connections
   * with multi-stream blocking reads, not one connection per stream. Read errors go to the
   * transport's error handler and are retried from the last position delivered.
   */
  follow(conversationId: string, after: StreamPosition, onEvents: (events: ConversationEvent[]) => void): StreamFollow;
  /**
   * Deletes a conversation's stream (DeleteConversation): its events are gone, `last` is
   * STREAM_START again and a later append starts a new stream. A blocking read or a follow of
   * it is not ended: it waits on, as for a stream that does not exist yet.
   */
  delete(conversationId: string): Promise<void>;
  close(): Promise<void>;
}

/** A live follow of one stream (NotificationStreams.follow). */
export interface StreamFollow {
  /** Stops delivery; no `onEvents` call after it returns. */
  stop(): void;
}

/** Broadcast of cancel signals to every gateway and runner (REQ-BED-005). */
export interface CancelBus {
  publish(signal: CancelSignal): Promise<void>;
  /** Resolves once subscribed; call the returned function to unsubscribe. */
  subscribe(handler: (signal: CancelSignal) => void): Promise<() => Promise<void>>;
  close(): Promise<void>;
}

/** Tool-runners report what they can do; the conversation service reads it. */
export interface RunnerRegistry {
  /** Records (or refreshes) a runner's capabilities; forgotten after `ttlMs` without a refresh. */
  report(capabilities: RunnerCapabilities, ttlMs: number): Promise<void>;
  /** Runners that reported within their ttl. */
  list(): Promise<RunnerCapabilities[]>;
  remove(runnerId: string): Promise<void>;
  close(): Promise<void>;
}

/** What the run ledger holds about one piece of work. */
export interface RunRecord {
  /** Who claimed it: an owner string unique to one process (e.g. `<runner id>#<random>`). */
  readonly owner: string;
  /** `started`: claimed and not finished (running, or its owner died). `finished`: `result` is set. */
  readonly state: 'started' | 'finished';
  /** Whether its owner's heartbeat is current (always false once finished). */
  readonly alive: boolean;
  /** The recorded result (opaque to the ledger; e.g. a ToolCompleteEvent as protobuf JSON). */
  readonly result: string | null;
}

/**
 * At-most-once side effects and liveness of running work, shared by every replica
 * (docs/architecture.md, "Side effects after a crash"). A tool-runner claims a tool call before running
 * it and records its result after; a redelivered job finds the claim and does not run the tool
 * again. Owners send heartbeats while they work, so others can tell running work from work
 * whose owner died, within `aliveTtlMs`.
 */
export interface RunLedger {
  /** An owner whose last heartbeat is older than this is taken for dead, ms. */
  readonly aliveTtlMs: number;
  /** How often owners should call `heartbeat`/`markAlive` (a quarter of `aliveTtlMs`), ms. */
  readonly heartbeatMs: number;
  /**
   * Records that `owner` starts `key`, unless it was claimed before. Returns null when this call
   * claimed it (the caller runs the work, and is alive from now on), else the existing record.
   */
  claim(key: string, owner: string): Promise<RunRecord | null>;
  /**
   * Keeps `owner`'s claim of `key` alive; re-creates the claim if the store lost it (a Redis
   * restart). False, changing nothing, when the claim is someone else's or already finished.
   */
  heartbeat(key: string, owner: string): Promise<boolean>;
  /** Liveness only, without a claim (work that may be repeated, like an LLM request). */
  markAlive(key: string, owner: string): Promise<void>;
  /** Whether someone's heartbeat for `key` (claim or markAlive) is current. */
  isAlive(key: string): Promise<boolean>;
  /** Records the result of `owner`'s run and ends its liveness. The result is kept even if someone settled the run meanwhile. */
  finish(key: string, owner: string, result: string): Promise<void>;
  /**
   * Records `result` for a run that is not finished (its owner died: an "interrupted" result),
   * and returns the record as it then is: a result recorded before wins.
   */
  settle(key: string, result: string): Promise<RunRecord>;
  /** The record, or null when nothing was claimed (or it was forgotten after the retention). */
  get(key: string): Promise<RunRecord | null>;
  /**
   * Forgets every record (and liveness) of the conversation's tool calls (`toolRunKey` keys of
   * @bedrock/contracts), results included: a deleted conversation's tool output stays nowhere.
   * Resolves with the number of records removed.
   */
  removeConversation(conversationId: string): Promise<number>;
  close(): Promise<void>;
}

/** Everything a service needs to talk to the others. */
export interface Transport {
  readonly queues: Queues;
  readonly streams: NotificationStreams;
  readonly cancels: CancelBus;
  readonly runners: RunnerRegistry;
  readonly runs: RunLedger;
  /**
   * Resolves when the shared store answers (readiness probes; see `redisCheck`), rejects
   * with the reason when not. Absent where nothing can be unreachable (in-process transports).
   */
  ping?(): Promise<void>;
  close(): Promise<void>;
}
