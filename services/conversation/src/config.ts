/**
 * Settings of the conversation service: one schema, nested per concern, read from the
 * environment (or given as typed overrides by the embedded mode). docs/conversation.md's
 * settings table is generated from it. Durations are milliseconds in code.
 */
import { z } from '@bedrock/platform/config';
import { createModelRegistry } from '@bedrock/contracts/models';
import {
  bool,
  configMarkdownTable,
  duration,
  filePath,
  int,
  list,
  loadConfig,
  logLevelSetting,
  oneOf,
  optionalSetting,
  port,
  secretKey,
  section,
  serverSection,
  servicePeersFileSetting,
  serviceTokenFileSetting,
  setting,
  size,
  toolUidRangeSetting,
  str,
  transportSection,
  url,
  type ConfigOverrides,
  type SettingType,
} from '@bedrock/platform/config';
import { SERVER_TOOLS, THINKING_LEVELS, isServerToolName, type ServerToolName } from './settings.ts';
import { parsePostgresUrl } from './db/pool.ts';
import { parseOperatorServers } from './mcp/servers.ts';

/**
 * A postgres URL as `url()` checks it, or one naming several hosts as libpq allows
 * (`postgres://u@h1:5432,h2:5433/db?target_session_attrs=read-write`, db/pool.ts).
 */
function postgresUrl(): SettingType<string> {
  const single = url({ protocols: ['postgres', 'postgresql'] });
  return {
    expected: 'a postgres/postgresql URL (several hosts: h1:port,h2:port)',
    schema: z.string().superRefine((raw, ctx) => {
      if (!/^postgres(ql)?:\/\/([^@/?#]*@)?[^/?#]*,/i.test(raw)) {
        const checked = single.schema.safeParse(raw);
        if (!checked.success) for (const issue of checked.error.issues) ctx.addIssue({ code: 'custom', message: issue.message });
        return;
      }
      try {
        parsePostgresUrl(raw);
      } catch (err) {
        ctx.addIssue({ code: 'custom', message: (err as Error).message });
      }
    }),
    format: (value) => value.replace(/^(postgres(?:ql)?:\/\/[^:@/]*:)[^@/]*@/i, '$1***@'),
  };
}

/** BEDROCK_MCP_SERVERS, kept as its text; refused at start-up when it does not parse. */
function mcpServersJson(): SettingType<string> {
  return {
    expected: 'a JSON object of MCP servers by name',
    schema: str().schema.superRefine((raw, ctx) => {
      try {
        parseOperatorServers(raw);
      } catch (err) {
        ctx.addIssue({ code: 'custom', message: (err as Error).message });
      }
    }),
  };
}

/** A comma-separated list of server tool names (blanks around commas ignored), each once, in SERVER_TOOLS order. */
function serverToolList(): SettingType<readonly ServerToolName[]> {
  const names = list(str());
  return {
    expected: `a comma-separated list of ${SERVER_TOOLS.join(', ')}`,
    schema: names.schema
      .superRefine((given, ctx) => {
        const unknown = given.filter((n) => !isServerToolName(n));
        if (unknown.length > 0) ctx.addIssue({ code: 'custom', message: `unknown: ${unknown.join(', ')}` });
      })
      .transform((given) => SERVER_TOOLS.filter((t) => given.includes(t))),
    format: (value) => value.join(','),
  };
}

/** JSON overriding the model registry, kept as its text; refused at start-up if the registry would refuse it. */
function modelRegistryJson(): SettingType<string> {
  return {
    expected: 'a JSON object of model limits',
    schema: str().schema.superRefine((raw, ctx) => {
      try {
        createModelRegistry(raw);
      } catch (err) {
        ctx.addIssue({ code: 'custom', message: (err as Error).message });
      }
    }),
  };
}

/** Dollars as written ("5", "2.50", "0.125"; at most six decimals), held as whole micro-dollars; 0 is no budget. */
function usdAmount(): SettingType<number> {
  return {
    expected: 'an amount in USD such as 5 or 2.50 (0: none)',
    schema: z
      .unknown()
      .transform((value, ctx) => {
        if (typeof value !== 'string') return value;
        const match = /^\$?(\d{1,12})(?:\.(\d{1,6}))?$/.exec(value.trim());
        if (match) return Number(match[1]) * 1_000_000 + Number((match[2] ?? '').padEnd(6, '0'));
        ctx.addIssue({ code: 'custom', message: 'not an amount in USD' });
        return z.NEVER;
      })
      .pipe(z.number().int().min(0)),
    format: (micros) => String(micros / 1_000_000),
  };
}

export const conversationConfigSchema = section({
  log: section({ level: logLevelSetting }),
  server: serverSection({
    grpcPort: setting('BEDROCK_GRPC_PORT', port(), {
      default: 50051,
      doc: 'Port of the internal gRPC API (h2c) used by web-bff, with grpc.health.v1 and reflection.',
    }),
    // It serves an internal API, so it reads the peers it accepts; it calls the tool-runners'
    // workspace storage with its own token.
    servicePeersFile: servicePeersFileSetting,
    serviceTokenFile: serviceTokenFileSetting,
  }),
  transport: transportSection,
  database: section({
    url: setting('DATABASE_URL', postgresUrl(), {
      default: 'postgres://postgres@127.0.0.1:5432/bedrock',
      doc: 'PostgreSQL connection string; migrations run at start-up (safe with several replicas). Several hosts (`postgres://u@h1:5432,h2:5432/db?target_session_attrs=read-write`): every connection goes to the one that is read-write, and follows it after a failover (see "Postgres failover").',
    }),
    poolSize: setting('BEDROCK_DB_POOL_SIZE', int({ min: 1, max: 200 }), {
      default: 10,
      doc: 'Connections in the Postgres pool of one replica.',
    }),
    migrate: setting('BEDROCK_MIGRATE', bool(), { default: true, doc: 'Run database migrations at start-up.' }),
  }),
  models: section({
    /** File holding the secret of the owner reference (metadata.user_id); read at start. */
    ownerRefSecretFile: optionalSetting('BEDROCK_OWNER_REF_SECRET_FILE', filePath(), {
      doc: 'File holding a deployment secret (one line): each request tells the provider its conversation owner as metadata.user_id = HMAC-SHA256(secret, user id), a stable opaque id (never a name or email). Unset: a secret this deployment makes once and keeps in Postgres (service_secrets).',
    }),
    default: setting('BEDROCK_DEFAULT_MODEL', str(), {
      default: 'claude-sonnet-5-5',
      doc: 'Model of conversations created without one.',
    }),
    /** JSON text, as given. */
    registry: optionalSetting('BEDROCK_MODELS', modelRegistryJson(), {
      doc: 'JSON overriding the model registry: {"model-id": {"contextWindow": n, "maxOutputTokens": n, "prices": {"input": usd, "output": usd, "cacheWrite": usd, "cacheRead": usd, "webSearch": usd, "webFetch": usd}}} (tokens per million, server tools per use; see "Costs and budgets").',
    }),
    maxOutputTokens: setting('BEDROCK_MAX_OUTPUT_TOKENS', int({ min: 1 }), {
      default: 16_384,
      doc: "max_tokens asked for each response, capped by the model's own limit.",
    }),
  }),
  /** What new conversations start with and what they may ask for. */
  conversations: section({
    defaultThinking: setting('BEDROCK_DEFAULT_THINKING', oneOf(THINKING_LEVELS), {
      default: 'high',
      doc: 'Extended thinking of conversations created without a level (a conversation can change its own): `off`, or the effort `low` to `max`; models that cannot think ignore it.',
    }),
    serverTools: optionalSetting('BEDROCK_SERVER_TOOLS', serverToolList(), {
      doc: 'Provider-run tools conversations may turn on (each conversation chooses; all are off by default): a comma-separated list of `web_search`, `web_fetch`. Unset: none (they reach the web and are billed per use).',
    }),
    sandbox: setting('BEDROCK_SANDBOX', oneOf(['auto', 'available', 'unavailable'] as const), {
      default: 'auto',
      doc: '`auto`: Restricted mode exists when a tool-runner reports a working sandbox; `available`/`unavailable` force it.',
    }),
    checkCwd: setting('BEDROCK_CHECK_CWD', bool(), {
      default: true,
      doc: "With host paths on: CreateConversation refuses a working directory that is not an existing directory on this host; turn off only where this service cannot see the tool-runners' paths.",
    }),
  }),
  /** MCP servers (docs/mcp.md). */
  mcp: section({
    servers: optionalSetting('BEDROCK_MCP_SERVERS', mcpServersJson(), {
      doc: 'The operator\'s MCP servers, offered to every conversation: {"NAME": {"command": "...", "args": ["..."], "env": {"K": "V"}, "trusted": false, "timeoutMs": 300000}}. Each stdio server runs in the tool sandbox as the user\'s tool user, in the conversation\'s workspace and mode; a remote server is {"url": "https://..."} (Streamable HTTP; http only to loopback), never sandboxed; `trusted` believes its readOnlyHint whatever the sandbox. Users add their own with McpService (`bedrock mcp add`).',
    }),
    timeout: setting('BEDROCK_MCP_TIMEOUT', duration({ min: 1000 }), {
      default: 300_000,
      doc: 'Timeout of one MCP tool call when its server sets none; each progress notification starts it again.',
    }),
    tokenKey: optionalSetting('BEDROCK_MCP_TOKEN_KEY', secretKey(), {
      doc: "Key of the users' OAuth tokens for remote MCP servers, stored encrypted (AES-256-GCM): 32 bytes as base64, or an absolute path of a file holding them; the tool-runners need the same key. Unset: remote servers are used without logins (the embedded product creates one in its data directory).",
    }),
    listTimeout: setting('BEDROCK_MCP_LIST_TIMEOUT', duration({ min: 1000 }), {
      default: 60_000,
      doc: "How long a request's MCP tool listing may take (servers are started for it); past it, the request goes without MCP tools.",
    }),
  }),
  /** Where conversations run (docs/workspaces.md). */
  workspaces: section({
    hostPaths: setting('BEDROCK_HOST_PATHS', oneOf(['on', 'off'] as const), {
      default: 'off',
      doc: "`on`: a conversation may also be created at an absolute host path, its tools running as the tool-runner's tool user (BEDROCK_TOOL_UID): for one person on their own machine only (the embedded product's default while it has one user). `off`: only in workspaces; a host path is PERMISSION_DENIED.",
    }),
    storageUrls: optionalSetting('BEDROCK_WORKSPACE_STORAGE_URL', list(url({ protocols: ['http', 'https'] }), { min: 1 }), {
      doc: "Base URLs of the tool-runners' gRPC ports (WorkspaceStorageService; a host name stands for all its addresses). Unset: no workspaces (only host paths, if on).",
    }),
    toolUids: toolUidRangeSetting,
    quota: setting('BEDROCK_WORKSPACE_QUOTA', size({ min: 1024 * 1024 }), {
      default: 10 * 1024 ** 3,
      doc: 'Disk quota of each workspace (where the storage enforces quotas).',
    }),
    maxFiles: setting('BEDROCK_WORKSPACE_MAX_FILES', int({ min: 0 }), {
      default: 1_000_000,
      doc: 'Files (inodes) of each workspace, where the storage enforces an inode quota (btrfs does not: its byte quota counts the metadata files take); 0: none.',
    }),
    maxPerUser: setting('BEDROCK_MAX_WORKSPACES', int({ min: 0 }), {
      default: 20,
      doc: 'Workspaces one user may have; 0: no limit.',
    }),
    checkpointMaxCount: setting('BEDROCK_CHECKPOINT_MAX_COUNT', int({ min: 0 }), {
      default: 50,
      doc: 'Checkpoints kept per workspace (one per user turn that ran tools, docs/workspaces.md "Checkpoints"); the oldest are removed first; 0: no limit.',
    }),
    checkpointMaxBytes: setting('BEDROCK_CHECKPOINT_MAX_BYTES', size({ min: 0 }), {
      default: 2 * 1024 ** 3,
      doc: 'Bytes a workspace\'s checkpoints may hold that the workspace itself no longer does (files since changed or deleted); the oldest are removed first, the newest always kept; 0: no limit (they still count toward the workspace quota). Under btrfs simple quotas, where those bytes cannot be read, the room kept free in the workspace\'s quota instead (docs/workspaces.md, "Settings and retention").',
    }),
    prepareTimeout: setting('BEDROCK_WORKSPACE_PREPARE_TIMEOUT', duration({ min: 1000 }), {
      default: 600_000,
      doc: 'How long CreateWorkspace waits for the storage to make a workspace (a git clone included).',
    }),
  }),
  /** Every user's limits unless an admin set theirs (SetUserLimits); 0 is unlimited. Budgets in micro-dollars in code. */
  limits: section({
    dailyBudget: setting('BEDROCK_DAILY_BUDGET', usdAmount(), {
      default: 0,
      doc: "Spend (USD, at the model registry's prices) a user may reach per UTC day before SendMessage is refused until midnight UTC; 0: none.",
    }),
    monthlyBudget: setting('BEDROCK_MONTHLY_BUDGET', usdAmount(), {
      default: 0,
      doc: 'Spend (USD) a user may reach per UTC calendar month before SendMessage is refused until the first of the next month; 0: none.',
    }),
    maxBusyConversations: setting('BEDROCK_MAX_BUSY_CONVERSATIONS', int({ min: 0 }), {
      default: 0,
      doc: 'Top-level conversations of one user working at once; a message that would start one more is refused; 0: no limit.',
    }),
    messagesPerMinute: setting('BEDROCK_MESSAGES_PER_MINUTE', int({ min: 0 }), {
      default: 0,
      doc: 'SendMessage and TriggerContinuation calls one user may make per UTC minute; 0: no limit.',
    }),
    maxConversations: setting('BEDROCK_MAX_CONVERSATIONS', int({ min: 0 }), {
      default: 0,
      doc: "Top-level conversations one user may own (created, forked or continued; sub-agents are their parent's); CreateConversation and ForkConversation over it are refused; 0: no limit.",
    }),
    imagePixelsPerMessage: setting('BEDROCK_IMAGE_PIXELS_PER_MESSAGE', int({ min: 1 }), {
      default: 50_000_000,
      doc: "Pixels (width × height, read from each image's header without decoding) all the images of one SendMessage may have together; a message over it is refused before it is admitted or decoded (decoding costs about 26 ms of CPU per million pixels).",
    }),
  }),
  /** Timing of a turn (the core's policy); all in ms. */
  turns: section({
    llmRetryBase: setting('BEDROCK_LLM_RETRY_BASE', duration(), {
      default: 1000,
      doc: 'Backoff before the 2nd LLM attempt; doubled before the 3rd (REQ-BED-006).',
    }),
    cancelAckTimeout: setting('BEDROCK_CANCEL_ACK_TIMEOUT', duration(), {
      default: 5000,
      doc: 'How long Cancelling waits for the gateway to acknowledge an abort before going idle anyway.',
    }),
    subAgentTimeout: setting('BEDROCK_SUB_AGENT_TIMEOUT', duration(), {
      default: 600_000,
      doc: 'How long a parent waits for its sub-agents; late ones count as failed (timeout).',
    }),
  }),
  events: section({
    concurrency: setting('BEDROCK_EVENT_CONCURRENCY', int({ min: 1, max: 1000 }), {
      default: 16,
      doc: 'Events one replica applies at once (different conversations in parallel).',
    }),
  }),
  outbox: section({
    /** ms. */
    pollInterval: setting('BEDROCK_OUTBOX_POLL', duration({ min: 1 }), {
      default: 500,
      doc: 'How often the relay looks for outbox rows left unsent (the committing replica publishes its rows itself; this is the safety net after a crash or a failed publish).',
    }),
  }),
  recovery: section({
    /** ms. */
    interval: setting('BEDROCK_RECOVERY_INTERVAL', duration({ min: 1 }), {
      default: 1000,
      doc: 'How often the recovery sweeper looks for busy conversations whose work was lost (cost: see "Recovery" below).',
    }),
    /** ms. */
    staleAfter: setting('BEDROCK_RECOVERY_STALE_AFTER', duration(), {
      default: 3000,
      doc: 'A busy conversation is checked for lost work once its state has not changed for this long, and its work counts as lost only if it still looks gone this long after it was first seen gone.',
    }),
  }),
  requestIds: section({
    /** ms. */
    retention: setting('BEDROCK_REQUEST_ID_RETENTION', duration(), {
      default: 86_400_000,
      doc: 'How long the outcome of a request that carried a client request id is kept: a retry with the same id within this time is answered with the first outcome and applied once.',
    }),
  }),
});

export type ConversationConfig = z.output<typeof conversationConfigSchema>;

/**
 * The service's config: `env` (default process.env), then `overrides` from code.
 * @throws ConfigError naming every bad variable.
 */
export function readConversationConfig(
  env: Record<string, string | undefined> = process.env,
  overrides: ConfigOverrides<ConversationConfig> = {},
): ConversationConfig {
  return loadConfig(conversationConfigSchema, env, overrides);
}

/** The settings table of docs/conversation.md: every setting but Redis's own (docs/transports.md lists those). */
export function conversationSettingsTable(): string {
  return configMarkdownTable(conversationConfigSchema.extend({ transport: section({ kind: transportSection.shape.kind }) }));
}
