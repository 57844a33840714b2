/** Settings of the Redis transport and how they are read from the environment. */

export interface RedisTransportOptions {
  /** Env REDIS_URL. Default redis://127.0.0.1:6379. */
  readonly redisUrl: string;
  /** Prefix of every key and channel; see docs/transports.md. Env BEDROCK_REDIS_PREFIX. Default `bedrock`. */
  readonly prefix?: string;
  /** Completed jobs (and so their ids, for de-duplication) are kept this long, ms. Env BEDROCK_COMPLETED_JOB_RETENTION_MS. Default 24 h. */
  readonly completedRetentionMs?: number;
  /** Jobs that used up their attempts are kept this long, ms. Env BEDROCK_FAILED_JOB_RETENTION_MS. Default 7 days. */
  readonly failedRetentionMs?: number;
  /** Approximate entries kept per notification stream. Env BEDROCK_STREAM_MAXLEN. Default 10 000. */
  readonly streamMaxLen?: number;
  /** A notification stream expires this long after its last event, ms. Env BEDROCK_STREAM_TTL_MS. Default 24 h. */
  readonly streamTtlMs?: number;
  /**
   * Lock on a running job, ms, renewed every quarter of it; a dead consumer's job is taken back
   * within about lock + stalled interval. Also the run ledger's liveness window. Env
   * BEDROCK_JOB_LOCK_MS. Default 4 s (docs/transports.md, "Finding dead consumers").
   */
  readonly lockDurationMs?: number;
  /** How often consumers look for jobs whose lock expired, ms. Env BEDROCK_JOB_STALLED_INTERVAL_MS. Default 1 s. */
  readonly stalledIntervalMs?: number;
  /** Idle dedicated connections kept for blocking stream reads. Env BEDROCK_REDIS_IDLE_BLOCKING_CONNECTIONS. Default 4. */
  readonly maxIdleBlockingConnections?: number;
  /** Connection and background errors (Redis, BullMQ, cancel handlers). Default: a structured error line (logBackgroundErrors). */
  readonly onError?: (error: unknown) => void;
}

export const DEFAULT_REDIS_URL = 'redis://127.0.0.1:6379';
export const DEFAULT_REDIS_PREFIX = 'bedrock';

function positiveInt(env: NodeJS.ProcessEnv, name: string): number | undefined {
  const raw = env[name];
  if (raw === undefined || raw === '') return undefined;
  const value = Number(raw);
  if (!Number.isSafeInteger(value) || value <= 0) throw new Error(`${name} must be a positive integer, got ${JSON.stringify(raw)}`);
  return value;
}

/** Reads the settings above from the environment; unset ones keep their defaults. */
export function redisTransportOptionsFromEnv(env: NodeJS.ProcessEnv = process.env): RedisTransportOptions {
  return {
    redisUrl: env.REDIS_URL || DEFAULT_REDIS_URL,
    prefix: env.BEDROCK_REDIS_PREFIX || DEFAULT_REDIS_PREFIX,
    completedRetentionMs: positiveInt(env, 'BEDROCK_COMPLETED_JOB_RETENTION_MS'),
    failedRetentionMs: positiveInt(env, 'BEDROCK_FAILED_JOB_RETENTION_MS'),
    streamMaxLen: positiveInt(env, 'BEDROCK_STREAM_MAXLEN'),
    streamTtlMs: positiveInt(env, 'BEDROCK_STREAM_TTL_MS'),
    maxIdleBlockingConnections: positiveInt(env, 'BEDROCK_REDIS_IDLE_BLOCKING_CONNECTIONS'),
    lockDurationMs: positiveInt(env, 'BEDROCK_JOB_LOCK_MS'),
    stalledIntervalMs: positiveInt(env, 'BEDROCK_JOB_STALLED_INTERVAL_MS'),
  };
}
