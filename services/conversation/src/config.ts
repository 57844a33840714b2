/** Settings of the conversation service, from the environment (docs/conversation.md lists them). */
import { bool, commonEnv, duration, int, oneOf, optional, port, readEnv, setting, str, type EnvParser } from '@bedrock/platform/server';
import { SERVER_TOOLS, THINKING_LEVELS, isServerToolName, type ServerToolName } from './settings.ts';

/** A comma-separated list of server tool names (blanks around commas ignored), each once. */
function serverToolList(): EnvParser<ServerToolName[]> {
  return {
    expected: `a comma-separated list of ${SERVER_TOOLS.join(', ')}`,
    parse(raw) {
      const names = raw
        .split(',')
        .map((p) => p.trim())
        .filter((p) => p !== '');
      const unknown = names.filter((n) => !isServerToolName(n));
      if (unknown.length > 0) throw new Error(`unknown: ${unknown.join(', ')}`);
      return SERVER_TOOLS.filter((t) => names.includes(t));
    },
    format: (value) => value.join(','),
  };
}

// The conversation service calls no internal server, so it holds no service token of its own;
// it serves one, so it reads the peers it accepts (BEDROCK_SERVICE_PEERS_FILE).
const { serviceTokenFile: _noOutgoingInternalCalls, ...common } = commonEnv;

export const conversationEnv = {
  ...common,
  databaseUrl: setting({
    name: 'DATABASE_URL',
    parse: str(),
    default: 'postgres://postgres@127.0.0.1:5432/bedrock',
    doc: 'PostgreSQL connection string; migrations run at start-up (safe with several replicas).',
  }),
  dbPoolSize: setting({
    name: 'BEDROCK_DB_POOL_SIZE',
    parse: int({ min: 1, max: 200 }),
    default: 10,
    doc: 'Connections in the Postgres pool of one replica.',
  }),
  transport: setting({
    name: 'BEDROCK_TRANSPORT',
    parse: oneOf(['redis', 'memory'] as const),
    default: 'redis',
    doc: 'Queues and streams: `redis` (BullMQ/Redis, distributed) or `memory` (in-process, single-process only).',
  }),
  grpcPort: setting({
    name: 'BEDROCK_GRPC_PORT',
    parse: port(),
    default: 50051,
    doc: 'Port of the internal gRPC API (h2c) used by web-bff, with grpc.health.v1 and reflection.',
  }),
  defaultModel: setting({
    name: 'BEDROCK_DEFAULT_MODEL',
    parse: str(),
    default: 'claude-sonnet-5-5',
    doc: 'Model of conversations created without one.',
  }),
  models: setting({
    name: 'BEDROCK_MODELS',
    parse: optional(str()),
    default: undefined,
    doc: 'JSON overriding the model registry: {"model-id": {"contextWindow": n, "maxOutputTokens": n}}.',
  }),
  defaultThinking: setting({
    name: 'BEDROCK_DEFAULT_THINKING',
    parse: oneOf(THINKING_LEVELS),
    default: 'high',
    doc: 'Extended thinking of conversations created without a level (a conversation can change its own): `off`, or the effort `low` to `max`; models that cannot think ignore it.',
  }),
  serverTools: setting({
    name: 'BEDROCK_SERVER_TOOLS',
    parse: optional(serverToolList()),
    default: undefined,
    doc: 'Provider-run tools conversations may turn on (each conversation chooses; all are off by default): a comma-separated list of `web_search`, `web_fetch`. Unset: none (they reach the web and are billed per use).',
  }),
  maxOutputTokens: setting({
    name: 'BEDROCK_MAX_OUTPUT_TOKENS',
    parse: int({ min: 1 }),
    default: 16_384,
    doc: "max_tokens asked for each response, capped by the model's own limit.",
  }),
  eventConcurrency: setting({
    name: 'BEDROCK_EVENT_CONCURRENCY',
    parse: int({ min: 1, max: 1000 }),
    default: 16,
    doc: 'Events one replica applies at once (different conversations in parallel).',
  }),
  sandbox: setting({
    name: 'BEDROCK_SANDBOX',
    parse: oneOf(['auto', 'available', 'unavailable'] as const),
    default: 'auto',
    doc: '`auto`: Restricted mode exists when a tool-runner reports a working sandbox; `available`/`unavailable` force it.',
  }),
  llmRetryBaseMs: setting({
    name: 'BEDROCK_LLM_RETRY_BASE',
    parse: duration(),
    default: 1000,
    doc: 'Backoff before the 2nd LLM attempt; doubled before the 3rd (REQ-BED-006).',
  }),
  cancelAckTimeoutMs: setting({
    name: 'BEDROCK_CANCEL_ACK_TIMEOUT',
    parse: duration(),
    default: 5000,
    doc: 'How long Cancelling waits for the gateway to acknowledge an abort before going idle anyway.',
  }),
  subAgentTimeoutMs: setting({
    name: 'BEDROCK_SUB_AGENT_TIMEOUT',
    parse: duration(),
    default: 600_000,
    doc: 'How long a parent waits for its sub-agents; late ones count as failed (timeout).',
  }),
  recoveryIntervalMs: setting({
    name: 'BEDROCK_RECOVERY_INTERVAL',
    parse: duration(),
    default: 1000,
    doc: 'How often the recovery sweeper looks for busy conversations whose work was lost (cost: see "Recovery" below).',
  }),
  recoveryStaleMs: setting({
    name: 'BEDROCK_RECOVERY_STALE_AFTER',
    parse: duration(),
    default: 3000,
    doc: 'A busy conversation is checked for lost work once its state has not changed for this long, and its work counts as lost only if it still looks gone this long after it was first seen gone.',
  }),
  outboxPollMs: setting({
    name: 'BEDROCK_OUTBOX_POLL',
    parse: duration(),
    default: 500,
    doc: 'How often the relay looks for unsent outbox rows (rows are also published right after each commit).',
  }),
  requestIdRetentionMs: setting({
    name: 'BEDROCK_REQUEST_ID_RETENTION',
    parse: duration(),
    default: 86_400_000,
    doc: 'How long the outcome of a request that carried a client request id is kept: a retry with the same id within this time is answered with the first outcome and applied once.',
  }),
  runMigrations: setting({ name: 'BEDROCK_MIGRATE', parse: bool(), default: true, doc: 'Run database migrations at start-up.' }),
  checkCwd: setting({
    name: 'BEDROCK_CHECK_CWD',
    parse: bool(),
    default: true,
    doc: "CreateConversation refuses a working directory that is not an existing directory on this host; turn off only where this service cannot see the tool-runners' paths.",
  }),
};

export type ConversationConfig = ReturnType<typeof readConversationConfig>;

export function readConversationConfig(env: Record<string, string | undefined> = process.env) {
  return readEnv(conversationEnv, env);
}
