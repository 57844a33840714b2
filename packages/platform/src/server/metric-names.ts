/**
 * The canonical Prometheus metric names of Bedrock, in one place so every service spells
 * them the same and dashboards work across services. Conventions (Prometheus naming
 * guide): `bedrock_` prefix, snake_case, base units (`_seconds`, `_bytes`), `_total` on
 * counters; every series also carries `service` (set by {@link createMetrics}).
 * docs/observability.md lists them with their labels and how to query them.
 */
export const METRIC = {
  /** Gauge `{queue, state}`: jobs in a queue by BullMQ state (waiting, active, delayed, failed). */
  queueDepth: 'bedrock_queue_depth',
  /** Histogram `{queue}`: seconds from enqueue to a worker picking the job up. */
  queueWaitSeconds: 'bedrock_queue_wait_seconds',
  /** Counter `{queue}`: jobs a worker started (recorded by `instrumentJob`). */
  jobsStartedTotal: 'bedrock_jobs_started_total',
  /** Counter `{queue, outcome}`: jobs finished by a worker, by {@link JobOutcome}. */
  jobsTotal: 'bedrock_jobs_total',
  /** Histogram `{queue, outcome}`: seconds a worker spent on one job. */
  jobDurationSeconds: 'bedrock_job_duration_seconds',
  /**
   * Histogram `{queue}`: seconds from a job being ready to its handler finishing (wait + work), in
   * fine buckets: on `conversation-events`, an event's arrival → its effects published.
   */
  jobLatencySeconds: 'bedrock_job_latency_seconds',
  /** Gauge `{queue}`: jobs a worker is running now (recorded by `instrumentJob`). */
  jobsInFlight: 'bedrock_jobs_in_flight',
  /** Counter `{state, event, result}`: state-machine transitions, by {@link TransitionResult}. */
  transitionsTotal: 'bedrock_transitions_total',
  /** Counter `{model, kind}`: LLM tokens, by {@link TokenKind}. */
  llmTokensTotal: 'bedrock_llm_tokens_total',
  /** Histogram `{model, outcome}`: seconds from sending an LLM request to its last byte, by {@link LlmOutcome}. */
  llmRequestSeconds: 'bedrock_llm_request_seconds',
  /** Histogram `{model}`: seconds from sending an LLM request to its first streamed token. */
  llmTimeToFirstTokenSeconds: 'bedrock_llm_time_to_first_token_seconds',
  /** Histogram `{tool, outcome}`: seconds one tool call ran, by {@link ToolOutcome}. */
  toolDurationSeconds: 'bedrock_tool_duration_seconds',
  /** Gauge `{kind}`: open long-lived streams, e.g. `watch` (client watches), `llm` (provider streams). */
  activeStreams: 'bedrock_active_streams',
  /** Histogram (no labels): applied events written per statement by the conversation service's group commit. */
  writeBatchSize: 'bedrock_write_batch_size',
  /** Histogram `{method, code}`: seconds a served RPC took (streams: until they end); `code` is the gRPC code name. */
  rpcServerSeconds: 'bedrock_rpc_server_seconds',
} as const;

/**
 * `outcome` of {@link METRIC.jobsTotal}: `duplicate` = already handled (idempotency key seen),
 * `stale` = answered nothing the state waits for, `interrupted` = a tool call whose runner stopped
 * mid-run, answered as interrupted instead of being run again.
 */
export type JobOutcome = 'completed' | 'failed' | 'retried' | 'duplicate' | 'stale' | 'cancelled' | 'interrupted';
/** `result` of {@link METRIC.transitionsTotal}: `ignored` = a late or duplicate result that changed nothing. */
export type TransitionResult = 'applied' | 'rejected' | 'ignored';
/** `kind` of {@link METRIC.llmTokensTotal}; cache kinds are Anthropic prompt-cache reads and writes. */
export type TokenKind = 'input' | 'output' | 'cache_read' | 'cache_creation';
/** `outcome` of {@link METRIC.llmRequestSeconds}: `ok` or the gateway's error class. */
export type LlmOutcome = 'ok' | 'cancelled' | 'auth' | 'rate_limit' | 'network' | 'server' | 'invalid_request' | 'unknown';
/** `outcome` of {@link METRIC.toolDurationSeconds}. */
export type ToolOutcome = 'ok' | 'error' | 'timeout' | 'cancelled' | 'denied';
