/** Settings of the Redis transport (config/common.ts reads them from the environment: `redisSection`). */

export interface RedisTransportOptions {
  /** Default redis://127.0.0.1:6379. */
  readonly redisUrl: string;
  /** Redis is a Redis Cluster and `redisUrl` one of its nodes (ioredis Cluster for every connection). Default false. */
  readonly cluster?: boolean;
  /** Prefix of every key and channel; see docs/transports.md. Default `bedrock`. */
  readonly prefix?: string;
  /**
   * Partitions of every queue, by conversation (each its own hash tag: spread over a cluster's
   * masters). Every producer and consumer of a deployment must use the same number. Default 1.
   */
  readonly queuePartitions?: number;
  /** Completed jobs (and so their ids, for de-duplication) are kept this long, ms. Default 24 h. */
  readonly completedRetentionMs?: number;
  /** Jobs that used up their attempts are kept this long, ms. Default 7 days. */
  readonly failedRetentionMs?: number;
  /** Approximate entries kept per notification stream. Default 10 000. */
  readonly streamMaxLen?: number;
  /** A notification stream expires this long after its last event, ms. Default 24 h. */
  readonly streamTtlMs?: number;
  /**
   * Lock on a running job, ms, renewed every quarter of it; a dead consumer's job is taken back
   * within about lock + stalled interval. Also the run ledger's liveness window. Default 4 s (docs/transports.md, "Finding dead consumers").
   */
  readonly lockDurationMs?: number;
  /** How often consumers look for jobs whose lock expired, ms. Default 1 s. */
  readonly stalledIntervalMs?: number;
  /** Idle dedicated connections kept for blocking stream reads. Default 4. */
  readonly maxIdleBlockingConnections?: number;
  /** Connection and background errors (Redis, BullMQ, cancel handlers). Default: a structured error line (logBackgroundErrors). */
  readonly onError?: (error: unknown) => void;
}

export const DEFAULT_REDIS_URL = 'redis://127.0.0.1:6379';
export const DEFAULT_REDIS_PREFIX = 'bedrock';
