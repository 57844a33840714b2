/**
 * Postgres state of conversations: plain data access, no decisions. Applying an event
 * (apply/applier.ts) reads a conversation with `readForApply` and writes what the transition
 * decided with `writeApplied`: one statement that checks the version it read, updates the
 * state and inserts the new messages and outbox rows, committed at once (docs/design.md, "the
 * life of an event"). State is always written before its effects are published (REQ-BED-007).
 */
import type { Pool, PoolClient } from 'pg';
import { RESTING_STATE_NAMES, type RestingStateName } from '@bedrock/contracts';
import type { ContentBlock, ConversationState, MessageType, PhaseKind, StopReason, Usage } from '../core/index.ts';
import { storedServerTools, storedThinking, type ServerToolName, type ThinkingSetting } from '../settings.ts';
import type { TitleSource } from '../titles.ts';
import { packOutboxRows, type OutboxRow } from './outbox-row.ts';
import { clientDetails, type AuditActor, type AuditRow } from '../mapping/audit-rows.ts';
import { auditJson, insertAuditRows } from './audit-store.ts';
import { RELAY_LOCK_SPACE } from '../outbox/relay.ts';
import {
  claimRequest,
  findOutcome,
  pruneOutcomes,
  storeOutcome,
  type PriorOutcome,
  type RequestKey,
  type RequestRecorder,
} from './request-outcomes.ts';

/**
 * `state_kind NOT IN (<the resting states>)`: the busy conversations, spelled as migration 001's
 * partial index `conversations_busy_idx` spells it, so that the planner uses the index (a test
 * keeps the two equal).
 */
export const BUSY_STATE_SQL = `state_kind NOT IN (${RESTING_STATE_NAMES.map((k) => `'${k}'`).join(', ')})`;
// Every resting state is a phase of the core (the column holds phase names).
true satisfies RestingStateName extends PhaseKind ? true : false;

/** A stored message. */
export interface MessageRow {
  readonly id: string;
  readonly conversationId: string;
  readonly sequence: number;
  readonly type: MessageType;
  readonly content: readonly ContentBlock[];
  readonly usage: Usage | null;
  /** Agent messages: why the response ended; null for other messages and those stored before it existed. */
  readonly stopReason: StopReason | null;
  readonly stopExplanation: string;
  readonly createdAt: Date;
}

export interface ConversationRecord {
  readonly id: string;
  readonly ownerId: string;
  readonly slug: string;
  readonly cwd: string;
  readonly model: string;
  readonly contextWindow: number;
  readonly sandboxAvailable: boolean;
  readonly parentId: string | null;
  readonly userInitiated: boolean;
  readonly continuedFromId: string | null;
  readonly state: ConversationState;
  readonly version: number;
  /** Bumped by every change of the row; the token of optimistic writes. */
  readonly revision: number;
  readonly notifySeq: number;
  readonly messageSeq: number;
  readonly createdAt: Date;
  readonly updatedAt: Date;
  readonly stateUpdatedAt: Date;
  readonly archived: boolean;
  /** Extended thinking of its LLM requests (stored resolved). */
  readonly thinking: ThinkingSetting;
  /** Provider-run tools turned on. */
  readonly serverTools: readonly ServerToolName[];
  /** Null until the first user message with words, or a rename. */
  readonly title: string | null;
  readonly titleSource: TitleSource | null;
  /** Set on a fork (ForkConversation): its source, the last message copied from it, and whether the source was deleted since. */
  readonly forkedFrom: { readonly conversationId: string; readonly messageSequence: number; readonly sourceDeleted: boolean } | null;
  /** What its responses cost, in micro-dollars (docs/conversation.md, "Costs and budgets"). */
  readonly costMicros: number;
  /** The workspace its tools run in, with the owner's tool uid; null for a host-path conversation. */
  readonly workspace: ConversationWorkspace | null;
}

/** A conversation's workspace as its tools need it (copied onto the row at creation). */
export interface ConversationWorkspace {
  readonly id: string;
  readonly name: string;
  /** The workspace's directory on the runners' storage. */
  readonly path: string;
  /** The owner's tool uid (and gid). */
  readonly toolUid: number;
}

/** What the caller decides before a conversation is created (see apply/applier.ts `newConversation`). */
export interface NewConversation {
  readonly id: string;
  readonly ownerId: string;
  readonly slug: string;
  readonly cwd: string;
  readonly model: string;
  readonly sandboxAvailable: boolean;
  readonly parentId?: string | null;
  readonly continuedFromId?: string | null;
  /** Absent: a sub-agent's parent's, else `high`. */
  readonly thinking?: ThinkingSetting;
  /** Absent: a sub-agent's parent's, else none. */
  readonly serverTools?: readonly ServerToolName[];
  /** The model's context window (from the model registry at creation). */
  readonly contextWindow: number;
  /** The state machine's initial state for this conversation. */
  readonly state: ConversationState;
  /** A title known at creation (a sub-agent's, from its task), as if from its first message. */
  readonly title?: string | null;
  /** Absent: a sub-agent's parent's, else none (a host-path conversation). */
  readonly workspace?: ConversationWorkspace | null;
}

/** What a fork copies from its source, besides what its row says (see store.fork). */
export interface ForkCopy {
  readonly sourceId: string;
  /** The last message copied: the source's messages 1 to this become the fork's, with the same sequences. */
  readonly through: number;
  readonly title: string;
  /** A system message appended after the copy (the Restricted mode notice), or null. */
  readonly notice: readonly ContentBlock[] | null;
}

/** A change of settings; an absent field stays as it is. */
export interface SettingsChange {
  readonly thinking?: ThinkingSetting;
  readonly serverTools?: readonly ServerToolName[];
}

/** A conversation as one moment saw it: its row, its messages, and its first sub-agents. */
export interface Snapshot {
  readonly record: ConversationRecord;
  readonly messages: MessageRow[];
  readonly subAgents: ConversationRecord[];
  /** More sub-agents exist than were read. */
  readonly moreSubAgents: boolean;
}

/** What DeleteConversation found: the tree's ids, or why it deleted nothing. */
export type DeleteResult =
  | {
      readonly kind: 'deleted';
      readonly ids: readonly string[];
      readonly record: ConversationRecord;
      readonly notifySeqs: ReadonlyMap<string, number>;
    }
  | { readonly kind: 'not_found' }
  | { readonly kind: 'sub_agent'; readonly parentId: string }
  | { readonly kind: 'busy'; readonly busy: readonly ConversationRecord[] }
  | Replayed;

/** What DeleteUser found: what it deleted, or why it deleted nothing. */
export type DeleteUserResult =
  | {
      readonly kind: 'deleted';
      /** The users row as it was; null when the user had none (known only by their conversations). */
      readonly user: DeletedUserRow | null;
      /** Every conversation deleted: each top-level one followed by its sub-agents. */
      readonly ids: readonly string[];
      readonly tokens: number;
      readonly notifySeqs: ReadonlyMap<string, number>;
      /** Their workspaces, whose records went with them: the caller removes the files. */
      readonly workspaceIds: readonly string[];
    }
  | { readonly kind: 'not_found' }
  | { readonly kind: 'busy'; readonly busy: readonly ConversationRecord[]; readonly rootOf: ReadonlyMap<string, string> }
  | Replayed;

/** The users row of a deleted user (migration 007's columns). */
export interface DeletedUserRow {
  readonly id: string;
  readonly display_name: string;
  readonly role: 'user' | 'admin';
  readonly created_at: Date;
  readonly disabled_at: Date | null;
}

/**
 * Tables with a row per user id and no foreign key to `users` (a tokens-file or OpenID Connect
 * user may have none), deleted with the user; `user_tokens` goes by its foreign key.
 */
const USER_TABLES = ['user_daily_spend', 'user_limits', 'user_message_rate'] as const;

/** Token counts of applied responses (each kind once: cache writes and reads are not in `input`). */
export interface TokenCounts {
  readonly input: number;
  readonly output: number;
  readonly cacheCreation: number;
  readonly cacheRead: number;
}

export const NO_TOKENS: TokenCounts = { input: 0, output: 0, cacheCreation: 0, cacheRead: 0 };

/** A request id used before: nothing was applied; the first outcome (or a mismatch) is in `prior`. */
export interface Replayed {
  readonly kind: 'replayed';
  readonly prior: PriorOutcome;
}

/** What applying an event reads: the row, and its outbox rows not yet marked sent (ids). */
export interface ApplyRead {
  readonly record: ConversationRecord;
  readonly unsentOutbox: readonly string[];
}

/** Everything one applied transition writes (see writeApplied). */
export interface AppliedWrite {
  readonly id: string;
  /** The row's revision the transition started from; the write happens only if it is still current. */
  readonly expectedRevision: number;
  readonly state: ConversationState;
  readonly notifySeq: number;
  readonly messageSeq: number;
  /** Whether state_updated_at moves (recovery measures staleness from it). */
  readonly touchState: boolean;
  /** New messages; ids and sequences are assigned by the applier. */
  readonly messages: readonly MessageRow[];
  readonly outbox: readonly OutboxRow[];
  /** The automatic title this event gives a conversation that has none (its first user message), else null. */
  readonly title: string | null;
  /** Audit rows of this transition (mapping/audit-rows.ts), written only if the state is. */
  readonly audit: readonly AuditRow[];
  /**
   * What the responses this transition applied cost (micro-dollars, 0 for most events), added
   * to the conversation and to its owner's spend of `spendDay` (UTC, YYYY-MM-DD) in the same
   * statement, so only if the state is written.
   */
  readonly costMicros: number;
  readonly spendDay: string;
  /** The tokens the same responses counted, added to the owner's day beside the spend (zeros for most events). */
  readonly tokens: TokenCounts;
  /**
   * No LLM request of the new state can still be answered: the conversation's budget reservation
   * (spend/limits.ts) is deleted in the same statement — settled by the cost above, or released.
   */
  readonly releaseReservation: boolean;
}

/** A title set by its owner, with the notification that tells watchers (written in one commit). */
export interface TitleWrite {
  readonly title: string;
  readonly notifySeq: number;
  readonly outbox: readonly OutboxRow[];
}

/** A conversation and the ids of its unsent outbox rows (the partial index outbox_unsent_idx). */
const READ_FOR_APPLY = `SELECT c.*, ARRAY(SELECT o.id::text FROM outbox o WHERE o.conversation_id = c.id AND o.sent_at IS NULL ORDER BY o.id) AS unsent
  FROM conversations c WHERE c.id = $1`;

/**
 * One statement, one commit: the conditional UPDATE decides; the inserts (messages, outbox
 * rows, audit rows) join on its result, so a stale version writes nothing. Outbox ids follow
 * the rows' order (ORDINALITY).
 */
const WRITE_APPLIED = `WITH c AS (
  UPDATE conversations
     SET state = $3::jsonb, state_kind = $4, mode = $5, version = $6, notify_seq = $7, message_seq = $8,
         revision = revision + 1, updated_at = now(), state_updated_at = CASE WHEN $9 THEN now() ELSE state_updated_at END,
         title = COALESCE($15, title), title_source = CASE WHEN $15::text IS NULL THEN title_source ELSE 'message' END,
         cost_micros = cost_micros + $17
   WHERE id = $1 AND revision = $2
   RETURNING revision, updated_at, state_updated_at, owner_id
), s AS (
  INSERT INTO user_daily_spend (user_id, day, cost_micros, input_tokens, output_tokens, cache_creation_tokens, cache_read_tokens)
  SELECT c.owner_id, $18::date, $17, ($20::bigint[])[1], ($20::bigint[])[2], ($20::bigint[])[3], ($20::bigint[])[4] FROM c WHERE $17::bigint > 0 OR ($20::bigint[])[1] + ($20::bigint[])[2] + ($20::bigint[])[3] + ($20::bigint[])[4] > 0
  ON CONFLICT (user_id, day) DO UPDATE
    SET cost_micros = user_daily_spend.cost_micros + EXCLUDED.cost_micros,
        input_tokens = user_daily_spend.input_tokens + EXCLUDED.input_tokens,
        output_tokens = user_daily_spend.output_tokens + EXCLUDED.output_tokens,
        cache_creation_tokens = user_daily_spend.cache_creation_tokens + EXCLUDED.cache_creation_tokens,
        cache_read_tokens = user_daily_spend.cache_read_tokens + EXCLUDED.cache_read_tokens
), m AS (
  INSERT INTO messages (id, conversation_id, sequence, message_type, actor_kind, content, display_data, usage_data,
                        stop_reason, stop_explanation, created_at)
  SELECT r.id, $1, r.sequence, r.message_type, r.actor_kind, r.content, r.display_data, r.usage_data,
         r.stop_reason, r.stop_explanation, r.created_at
    FROM c, jsonb_to_recordset($10::jsonb) AS r(id text, sequence bigint, message_type text, actor_kind text, content jsonb,
                                              display_data jsonb, usage_data jsonb, stop_reason text, stop_explanation text,
                                              created_at timestamptz)
), o AS (
  INSERT INTO outbox (effect_id, conversation_id, kind, payload)
  SELECT r.effect_id, r.conversation_id, r.kind, r.payload::jsonb
    FROM c, unnest($11::text[], $12::text[], $13::text[], $14::text[]) WITH ORDINALITY AS r(effect_id, conversation_id, kind, payload, n)
   ORDER BY r.n
  ON CONFLICT (effect_id) DO NOTHING
  RETURNING id
), a AS (
  INSERT INTO audit_events (user_id, action, conversation_id, details)
  SELECT r.user_id, r.action, r.conversation_id, r.details
    FROM c, jsonb_to_recordset($16::jsonb) AS r(user_id text, action text, conversation_id text, details jsonb)
), b AS (
  DELETE FROM budget_reservations USING c WHERE budget_reservations.conversation_id = $1 AND $19::boolean
)
SELECT c.revision, c.updated_at, c.state_updated_at, ARRAY(SELECT o.id::text FROM o ORDER BY o.id) AS outbox_ids FROM c`;

function messageValues(m: MessageRow) {
  return {
    id: m.id,
    sequence: m.sequence,
    message_type: m.type,
    actor_kind: ACTOR[m.type],
    content: m.content,
    display_data: displayOf(m.content),
    usage_data: m.usage,
    stop_reason: m.stopReason,
    stop_explanation: m.stopExplanation || null,
    created_at: m.createdAt.toISOString(),
  };
}

export interface StoreOptions {
  readonly pool: Pool;
  /**
   * Write one outbox row per effect, as before migration 025, instead of one per event and
   * conversation: only for the apply benchmark's side-by-side comparison (both are read alike).
   */
  readonly outboxRowPerEffect?: boolean;
}

export interface ListOptions {
  readonly ownerId: string;
  /** List the sub-agents of this conversation instead of user-initiated ones. */
  readonly parentId?: string;
  readonly includeArchived?: boolean;
  readonly limit: number;
  /** Opaque cursor from a previous page. */
  readonly after?: string;
  /** Only titles containing this text, ignoring case. */
  readonly query?: string;
}

const ACTOR: Record<MessageType, string> = {
  user: 'human',
  agent: 'llm_agent',
  tool: 'system',
  system: 'system',
  error: 'system',
  continuation: 'llm_agent',
};

interface ConversationRowDb {
  id: string;
  owner_id: string;
  slug: string;
  cwd: string;
  model: string;
  context_window: number;
  sandbox_available: boolean;
  parent_id: string | null;
  user_initiated: boolean;
  continued_from_id: string | null;
  state: ConversationState;
  version: string;
  revision: string;
  notify_seq: string;
  message_seq: string;
  created_at: Date;
  updated_at: Date;
  state_updated_at: Date;
  archived: boolean;
  thinking: string;
  server_tools: string[];
  title: string | null;
  title_source: TitleSource | null;
  forked_from_id: string | null;
  forked_from_seq: string | null;
  forked_from_deleted: boolean;
  state_kind: string;
  cost_micros: string;
  workspace_id: string | null;
  workspace_name: string | null;
  workspace_path: string | null;
  tool_uid: number | null;
}

function toRecord(row: ConversationRowDb): ConversationRecord {
  return {
    id: row.id,
    ownerId: row.owner_id,
    slug: row.slug,
    cwd: row.cwd,
    model: row.model,
    contextWindow: row.context_window,
    sandboxAvailable: row.sandbox_available,
    parentId: row.parent_id,
    userInitiated: row.user_initiated,
    continuedFromId: row.continued_from_id,
    state: row.state,
    version: Number(row.version),
    revision: Number(row.revision),
    notifySeq: Number(row.notify_seq),
    messageSeq: Number(row.message_seq),
    createdAt: row.created_at,
    updatedAt: row.updated_at,
    stateUpdatedAt: row.state_updated_at,
    archived: row.archived,
    thinking: storedThinking(row.thinking),
    serverTools: storedServerTools(row.server_tools),
    title: row.title,
    titleSource: row.title_source,
    forkedFrom:
      row.forked_from_id !== null && row.forked_from_seq !== null
        ? { conversationId: row.forked_from_id, messageSequence: Number(row.forked_from_seq), sourceDeleted: row.forked_from_deleted }
        : null,
    costMicros: Number(row.cost_micros),
    workspace:
      row.workspace_id !== null && row.workspace_path !== null && row.tool_uid !== null
        ? { id: row.workspace_id, name: row.workspace_name ?? '', path: row.workspace_path, toolUid: row.tool_uid }
        : null,
  };
}

interface MessageRowDb {
  id: string;
  conversation_id: string;
  sequence: string;
  message_type: MessageType;
  content: ContentBlock[];
  usage_data: Usage | null;
  stop_reason: StopReason | null;
  stop_explanation: string | null;
  created_at: Date;
}

function toMessage(row: MessageRowDb): MessageRow {
  return {
    id: row.id,
    conversationId: row.conversation_id,
    sequence: Number(row.sequence),
    type: row.message_type,
    content: row.content,
    usage: row.usage_data,
    stopReason: row.stop_reason,
    stopExplanation: row.stop_explanation ?? '',
    createdAt: row.created_at,
  };
}

export type ConversationStore = ReturnType<typeof createConversationStore>;

/**
 * Deletes one tree whose rows the caller's transaction has locked and found at rest: `root`
 * (a top-level conversation) and `tree` (its rows, sub-agents at every depth, root included).
 * Its rows (messages and sub-agents go by ON DELETE CASCADE), outbox rows and request outcomes
 * (scoped to them, and the CreateConversation/ForkConversation outcomes that created them:
 * `createdIdOf` reads the id from a stored response); forks of them keep their link, marked
 * `forked_from_deleted`; a `conversation_deleted` audit row. Returns the ids, root first.
 */
async function deleteLockedTree(
  client: PoolClient,
  root: ConversationRowDb,
  tree: readonly ConversationRowDb[],
  createdIdOf: (response: Uint8Array) => string | null,
  actor: AuditActor | undefined,
  extraDetails: Record<string, unknown> = {},
): Promise<string[]> {
  const ids = [root.id, ...tree.filter((r) => r.id !== root.id).map((r) => r.id)];
  // Wait for a relay publishing their rows (outbox/relay.ts holds this lock while it does).
  for (const treeId of ids) await client.query('SELECT pg_advisory_xact_lock($1, hashtext($2))', [RELAY_LOCK_SPACE, treeId]);
  await client.query('DELETE FROM outbox WHERE conversation_id = ANY($1::text[])', [ids]);
  await client.query('DELETE FROM request_outcomes WHERE owner_id = $1 AND scope = ANY($2::text[])', [root.owner_id, ids]);
  // The outcomes of the requests that created them (scope ''): a retry would name a deleted conversation.
  const created = await client.query<{ request_id: string; response: Buffer }>(
    `SELECT request_id, response FROM request_outcomes
        WHERE owner_id = $1 AND scope = '' AND method IN ('CreateConversation', 'ForkConversation') AND response IS NOT NULL
          AND position(convert_to($2, 'UTF8') IN response) > 0`,
    [root.owner_id, root.id],
  );
  const stale = created.rows.filter((r) => createdIdOf(r.response) === root.id).map((r) => r.request_id);
  if (stale.length > 0) {
    await client.query("DELETE FROM request_outcomes WHERE owner_id = $1 AND scope = '' AND request_id = ANY($2::text[])", [
      root.owner_id,
      stale,
    ]);
  }
  await client.query(
    'UPDATE conversations SET forked_from_deleted = true, revision = revision + 1, updated_at = now() WHERE forked_from_id = ANY($1::text[])',
    [ids],
  );
  await client.query('DELETE FROM conversations WHERE id = $1', [root.id]);
  // The conversations' own MCP servers and off-switches (keyed by id, no foreign key: '' means all).
  for (const table of ['mcp_servers', 'mcp_servers_off']) {
    await client.query(`DELETE FROM ${table} WHERE owner_id = $1 AND conversation_id = ANY($2::text[])`, [root.owner_id, ids]);
  }
  // The audit row commits with the deletion (ids only: the deleted content stays deleted).
  await insertAuditRows(client, [
    {
      userId: actor?.userId ?? root.owner_id,
      action: 'conversation_deleted',
      conversationId: root.id,
      details: { ...clientDetails(actor), sub_agent_ids: ids.slice(1), ...extraDetails },
    },
  ]);
  return ids;
}

export function createConversationStore(options: StoreOptions) {
  const { pool } = options;

  async function inTransaction<T>(work: (client: PoolClient) => Promise<T>): Promise<T> {
    const client = await pool.connect();
    try {
      await client.query('BEGIN');
      const result = await work(client);
      await client.query('COMMIT');
      return result;
    } catch (err) {
      await client.query('ROLLBACK').catch(() => undefined);
      throw err;
    } finally {
      client.release();
    }
  }

  async function insertConversation(client: PoolClient, input: NewConversation): Promise<ConversationRecord | null> {
    const { state } = input;
    // Settings not given: a sub-agent inherits its parent's; otherwise the defaults.
    const { rows } = await client.query<ConversationRowDb>(
      `INSERT INTO conversations (id, owner_id, slug, cwd, model, context_window, mode, sandbox_available,
                                  parent_id, user_initiated, continued_from_id, state_kind, state, thinking, server_tools,
                                  title, title_source, workspace_id, workspace_name, workspace_path, tool_uid)
       SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13,
               COALESCE($14, p.thinking, 'high'),
               COALESCE($15::text[], p.server_tools, '{}'),
               $16::text, CASE WHEN $16::text IS NULL THEN NULL ELSE 'message' END,
               CASE WHEN $17::text IS NULL THEN p.workspace_id ELSE $17 END,
               CASE WHEN $17::text IS NULL THEN p.workspace_name ELSE $18 END,
               CASE WHEN $17::text IS NULL THEN p.workspace_path ELSE $19 END,
               CASE WHEN $17::text IS NULL THEN p.tool_uid ELSE $20::integer END
       FROM (SELECT 1) AS one LEFT JOIN conversations p ON p.id = $9
       ON CONFLICT (id) DO NOTHING
       RETURNING *`,
      [
        input.id,
        input.ownerId,
        input.slug,
        input.cwd,
        input.model,
        input.contextWindow,
        state.mode,
        input.sandboxAvailable,
        input.parentId ?? null,
        !input.parentId,
        input.continuedFromId ?? null,
        state.phase.kind,
        JSON.stringify(state),
        input.thinking ?? null,
        input.serverTools ? [...input.serverTools] : null,
        input.title || null,
        input.workspace?.id ?? null,
        input.workspace?.name ?? null,
        input.workspace?.path ?? null,
        input.workspace?.toolUid ?? null,
      ],
    );
    return rows[0] ? toRecord(rows[0]) : null;
  }

  /**
   * A conversation as applying an event needs it, in one round trip: its row, and the ids of
   * its outbox rows not yet marked sent (apply/applier.ts decides from them who publishes).
   * With `client` (a transaction), the row stays locked until it ends.
   */
  async function readForApply(id: string, client?: PoolClient): Promise<ApplyRead | null> {
    const { rows } = await (client ?? pool).query<ConversationRowDb & { unsent: string[] }>(
      client
        ? { text: `${READ_FOR_APPLY} FOR UPDATE OF c`, values: [id] }
        : { name: 'bedrock-read-for-apply', text: READ_FOR_APPLY, values: [id] },
    );
    const row = rows[0];
    return row ? { record: toRecord(row), unsentOutbox: row.unsent } : null;
  }

  /** A conversation's sub-agents, oldest first (conversations_parent_idx), at most `limit`; `more` when there are others. */
  async function subAgentsOf(
    client: PoolClient,
    parentId: string,
    limit: number,
  ): Promise<{ records: ConversationRecord[]; more: boolean }> {
    const { rows } = await client.query<ConversationRowDb>(
      'SELECT * FROM conversations WHERE parent_id = $1 ORDER BY created_at, id LIMIT $2',
      [parentId, limit + 1],
    );
    return { records: rows.slice(0, limit).map(toRecord), more: rows.length > limit };
  }

  async function createIn(client: PoolClient, input: NewConversation, seed?: { summary: string }): Promise<ConversationRecord> {
    const record = await insertConversation(client, input);
    if (!record) throw new Error(`conversation ${input.id} already exists`);
    if (!seed) return record;
    // REQ-BED-021: the new conversation starts with the old one's summary, as context for the agent.
    const content: ContentBlock[] = [
      { type: 'text', text: `This conversation continues an earlier one. Its continuation summary:\n\n${seed.summary}` },
    ];
    await client.query(
      `INSERT INTO messages (id, conversation_id, sequence, message_type, actor_kind, content) VALUES ($1, $2, 1, 'system', 'system', $3)`,
      [`${record.id}/m/1`, record.id, JSON.stringify(content)],
    );
    const { rows } = await client.query<ConversationRowDb>(
      'UPDATE conversations SET message_seq = 1, revision = revision + 1 WHERE id = $1 RETURNING *',
      [record.id],
    );
    return toRecord(rows[0]!);
  }

  /**
   * Creates the fork's row (state from the applier), copies the source's messages 1 to
   * `through` under the fork's id (same sequences, content, usage and times: a copy, nothing
   * shared), appends the notice if there is one, and links the fork to its source; in the
   * transaction of `client`.
   */
  async function forkIn(client: PoolClient, input: NewConversation, copy: ForkCopy): Promise<ConversationRecord> {
    const record = await insertConversation(client, input);
    if (!record) throw new Error(`conversation ${input.id} already exists`);
    const copied = await client.query(
      `INSERT INTO messages (id, conversation_id, sequence, message_type, actor_kind, content, display_data, usage_data,
                             stop_reason, stop_explanation, created_at)
       SELECT $1 || '/m/' || m.sequence, $1, m.sequence, m.message_type, m.actor_kind, m.content, m.display_data, m.usage_data,
              m.stop_reason, m.stop_explanation, m.created_at
         FROM messages m WHERE m.conversation_id = $2 AND m.sequence <= $3
        ORDER BY m.sequence`,
      [record.id, copy.sourceId, copy.through],
    );
    // Sequences are consecutive from 1 (the applier numbers them): anything else is a broken source.
    if (copied.rowCount !== copy.through)
      throw new Error(`conversation ${copy.sourceId} has ${copied.rowCount} messages up to ${copy.through}, expected ${copy.through}`);
    let messageSeq = copy.through;
    if (copy.notice) {
      messageSeq += 1;
      await client.query(
        `INSERT INTO messages (id, conversation_id, sequence, message_type, actor_kind, content) VALUES ($1, $2, $3, 'system', 'system', $4)`,
        [`${record.id}/m/${messageSeq}`, record.id, messageSeq, JSON.stringify(copy.notice)],
      );
    }
    const { rows } = await client.query<ConversationRowDb>(
      `UPDATE conversations SET message_seq = $2, forked_from_id = $3, forked_from_seq = $4, title = $5, title_source = 'fork'
        WHERE id = $1 RETURNING *`,
      [record.id, messageSeq, copy.sourceId, copy.through, copy.title],
    );
    return toRecord(rows[0]!);
  }

  return {
    readForApply,

    /**
     * Forks a conversation in one transaction (forkIn). With a request recorder, the request id is
     * claimed first and the fork stored as its outcome; a retry finds the first one's.
     */
    async fork(
      input: NewConversation,
      copy: ForkCopy,
      request?: RequestRecorder<ConversationRecord>,
    ): Promise<{ kind: 'created'; record: ConversationRecord } | Replayed> {
      return inTransaction(async (client) => {
        if (request) {
          const prior = await claimRequest(client, request.key);
          if (prior) return { kind: 'replayed', prior } as const;
        }
        const record = await forkIn(client, input, copy);
        const outcome = request?.outcome(record);
        if (request && outcome) await storeOutcome(client, request.key, outcome);
        return { kind: 'created', record } as const;
      });
    },

    /** Creates a conversation; seeds it with a continuation summary when one is given. */
    async create(input: NewConversation, seed?: { summary: string }): Promise<ConversationRecord> {
      return inTransaction((client) => createIn(client, input, seed));
    },

    /** Creates a sub-agent's conversation on first delivery of its start event; later deliveries find it. */
    async ensureSubAgent(input: NewConversation): Promise<ConversationRecord> {
      return inTransaction(async (client) => {
        const created = await insertConversation(client, input);
        if (created) return created;
        const { rows } = await client.query<ConversationRowDb>('SELECT * FROM conversations WHERE id = $1', [input.id]);
        return toRecord(rows[0]!);
      });
    },

    async get(id: string): Promise<ConversationRecord | null> {
      const { rows } = await pool.query<ConversationRowDb>('SELECT * FROM conversations WHERE id = $1', [id]);
      return rows[0] ? toRecord(rows[0]) : null;
    },

    /** The conversation, its messages and its first `subAgentLimit` sub-agents as of one moment (one transaction). */
    async snapshot(id: string, subAgentLimit = 0): Promise<Snapshot | null> {
      return inTransaction(async (client) => {
        await client.query('SET TRANSACTION ISOLATION LEVEL REPEATABLE READ');
        const { rows } = await client.query<ConversationRowDb>('SELECT * FROM conversations WHERE id = $1', [id]);
        if (!rows[0]) return null;
        const messages = await client.query<MessageRowDb>('SELECT * FROM messages WHERE conversation_id = $1 ORDER BY sequence', [id]);
        const subAgents = subAgentLimit > 0 ? await subAgentsOf(client, id, subAgentLimit) : { records: [], more: false };
        return {
          record: toRecord(rows[0]),
          messages: messages.rows.map(toMessage),
          subAgents: subAgents.records,
          moreSubAgents: subAgents.more,
        };
      });
    },

    /** Newest first; keyset pagination on (created_at, id). */
    async list(opts: ListOptions): Promise<{ records: ConversationRecord[]; next: string | null }> {
      const params: unknown[] = [opts.ownerId];
      const where = ['owner_id = $1'];
      if (opts.parentId) {
        params.push(opts.parentId);
        where.push(`parent_id = $${params.length}`);
      } else {
        where.push('parent_id IS NULL');
      }
      if (!opts.includeArchived) where.push('NOT archived');
      if (opts.query) {
        // ILIKE with the pattern's own wildcards escaped: a substring, ignoring case (the trigram index serves it).
        params.push(`%${opts.query.replace(/[\\%_]/g, '\\$&')}%`);
        where.push(`title ILIKE $${params.length}`);
      }
      if (opts.after) {
        const [at, id] = decodeCursor(opts.after);
        params.push(at, id);
        where.push(`(created_at, id) < ($${params.length - 1}::timestamptz, $${params.length})`);
      }
      params.push(opts.limit + 1);
      const { rows } = await pool.query<ConversationRowDb>(
        `SELECT * FROM conversations WHERE ${where.join(' AND ')} ORDER BY created_at DESC, id DESC LIMIT $${params.length}`,
        params,
      );
      const records = rows.slice(0, opts.limit).map(toRecord);
      const last = records[records.length - 1];
      return { records, next: rows.length > opts.limit && last ? encodeCursor(last.createdAt, last.id) : null };
    },

    /** Busy conversations whose state has not changed for at least `olderThanMs`: candidates for recovery. */
    async staleBusy(olderThanMs: number, limit: number): Promise<ConversationRecord[]> {
      const { rows } = await pool.query<ConversationRowDb>(
        `SELECT * FROM conversations
          WHERE ${BUSY_STATE_SQL}
            AND state_updated_at < now() - ($1::double precision * interval '1 millisecond')
          ORDER BY state_updated_at LIMIT $2`,
        [olderThanMs, limit],
      );
      return rows.map(toRecord);
    },

    /**
     * Writes what one transition decided, in ONE statement (so one commit): the new state if
     * the row is still at `expectedRevision`, then its messages and outbox rows. Null, writing
     * nothing, when another writer moved the conversation on first (optimistic versioning).
     * `record` is the row as read; the updated record is built from it and `write`.
     */
    async writeApplied(
      record: ConversationRecord,
      write: AppliedWrite,
      client?: PoolClient,
    ): Promise<{ record: ConversationRecord; outboxIds: string[] } | null> {
      // The event's effects, one table row per conversation they belong to (outbox-row.ts).
      const { packed: outbox, holder } = options.outboxRowPerEffect
        ? { packed: write.outbox, holder: write.outbox.map((_, i) => i) }
        : packOutboxRows(write.outbox);
      const { rows } = await (client ?? pool).query<{ revision: string; updated_at: Date; state_updated_at: Date; outbox_ids: string[] }>({
        name: 'bedrock-write-applied',
        text: WRITE_APPLIED,
        values: [
          write.id,
          write.expectedRevision,
          JSON.stringify(write.state),
          write.state.phase.kind,
          write.state.mode,
          write.state.seq,
          write.notifySeq,
          write.messageSeq,
          write.touchState,
          JSON.stringify(write.messages.map(messageValues)),
          outbox.map((row) => row.effectId),
          outbox.map((row) => row.conversationId),
          outbox.map((row) => row.kind),
          outbox.map((row) => JSON.stringify(row.payload)),
          write.title,
          auditJson(write.audit),
          write.costMicros,
          write.spendDay,
          write.releaseReservation,
          [write.tokens.input, write.tokens.output, write.tokens.cacheCreation, write.tokens.cacheRead],
        ],
      });
      const row = rows[0];
      if (!row) return null;
      // Only what the statement changed comes back (not the state, which the caller has).
      const updated: ConversationRecord = {
        ...record,
        state: write.state,
        version: write.state.seq,
        revision: Number(row.revision),
        notifySeq: write.notifySeq,
        messageSeq: write.messageSeq,
        updatedAt: row.updated_at,
        stateUpdatedAt: row.state_updated_at,
        ...(write.title !== null ? { title: write.title, titleSource: 'message' as const } : {}),
        costMicros: record.costMicros + write.costMicros,
      };
      // One id per effect (the id of the table row holding it), as the publisher marks rows by id.
      const ids = row.outbox_ids;
      const outboxIds = ids.length === outbox.length ? holder.map((i) => ids[i]!) : ids;
      return { record: updated, outboxIds };
    },

    /**
     * Runs `work` in a transaction holding the conversation's row lock (user actions with a
     * client request id: the id is claimed and its outcome stored with the event's writes).
     * Null when the conversation does not exist.
     */
    async withLocked<T>(id: string, work: (client: PoolClient, read: ApplyRead) => Promise<T>): Promise<T | null> {
      return inTransaction(async (client) => {
        const read = await readForApply(id, client);
        return read ? work(client, read) : null;
      });
    },

    /** Creates a conversation for a request that carries a client request id; a retry finds the first one's outcome. */
    async createRequest(
      input: NewConversation,
      seed: { summary: string } | undefined,
      request: RequestRecorder<ConversationRecord>,
    ): Promise<{ kind: 'created'; record: ConversationRecord } | Replayed> {
      return inTransaction(async (client) => {
        const prior = await claimRequest(client, request.key);
        if (prior) return { kind: 'replayed', prior } as const;
        const record = await createIn(client, input, seed);
        const outcome = request.outcome(record);
        if (outcome) await storeOutcome(client, request.key, outcome);
        return { kind: 'created', record } as const;
      });
    },

    /** One message by id (a replayed SendMessage answers with the message it persisted). */
    async message(messageId: string): Promise<MessageRow | null> {
      const { rows } = await pool.query<MessageRowDb>('SELECT * FROM messages WHERE id = $1', [messageId]);
      return rows[0] ? toMessage(rows[0]) : null;
    },

    /** The stored outcome of a request id, if one was committed. */
    findRequest: (key: RequestKey) => findOutcome(pool, key),

    /** Deletes request outcomes older than `retentionMs` (BEDROCK_REQUEST_ID_RETENTION); returns how many. */
    pruneRequests: (retentionMs: number) => pruneOutcomes(pool, retentionMs),

    /** Whether the relay still has effects of this conversation to publish. */
    async hasUnsentOutbox(id: string): Promise<boolean> {
      const { rows } = await pool.query('SELECT 1 FROM outbox WHERE conversation_id = $1 AND sent_at IS NULL LIMIT 1', [id]);
      return rows.length > 0;
    },

    /**
     * Changes a conversation's settings and bumps its revision, so an event being applied at the
     * same time builds its LLM request wholly before or wholly after the change (a write that
     * started before it misses and is decided again). Null: not found.
     */
    async updateSettings(id: string, change: SettingsChange): Promise<ConversationRecord | null> {
      const { rows } = await pool.query<ConversationRowDb>(
        `UPDATE conversations
            SET thinking = COALESCE($2, thinking), server_tools = COALESCE($3::text[], server_tools),
                revision = revision + 1, updated_at = now()
          WHERE id = $1 RETURNING *`,
        [id, change.thinking ?? null, change.serverTools ? [...change.serverTools] : null],
      );
      return rows[0] ? toRecord(rows[0]) : null;
    },

    /**
     * Sets a title given by the owner (title_source 'user': the automatic title never replaces
     * it) and inserts the notification that tells watchers, in the transaction of `client`
     * (which holds the row lock, store.withLocked). Bumps the revision and notify_seq, so an
     * event decided from the row as it was writes nothing and is decided again.
     */
    async writeTitle(
      client: PoolClient,
      record: ConversationRecord,
      write: TitleWrite,
    ): Promise<{ record: ConversationRecord; outboxIds: string[] }> {
      const { rows } = await client.query<ConversationRowDb>(
        `UPDATE conversations SET title = $2, title_source = 'user', notify_seq = $3, revision = revision + 1, updated_at = now()
          WHERE id = $1 RETURNING *`,
        [record.id, write.title, write.notifySeq],
      );
      if (!rows[0]) throw new Error(`conversation ${record.id} vanished under its row lock`);
      const outboxIds: string[] = [];
      for (const row of write.outbox) {
        const inserted = await client.query<{ id: string }>(
          'INSERT INTO outbox (effect_id, conversation_id, kind, payload) VALUES ($1, $2, $3, $4) RETURNING id::text AS id',
          [row.effectId, row.conversationId, row.kind, JSON.stringify(row.payload)],
        );
        outboxIds.push(inserted.rows[0]!.id);
      }
      return { record: toRecord(rows[0]), outboxIds };
    },

    /**
     * Deletes a conversation and its sub-agents at every depth in one transaction, when all of
     * them are at rest: their rows (messages and sub-agents go by ON DELETE CASCADE), outbox rows
     * and request outcomes (scoped to them, and the CreateConversation/ForkConversation outcomes
     * that created them: `createdIdOf` reads the id from a stored response). Forks of them keep
     * their link, marked `forked_from_deleted`. Every row of the tree is locked first, so an event
     * applied at the same time either finishes before (and is seen here) or finds nothing.
     * With a request recorder, the request id (scope '') is claimed and its outcome stored here.
     */
    async deleteTree(
      id: string,
      ownerId: string,
      createdIdOf: (response: Uint8Array) => string | null,
      request?: RequestRecorder<{ ids: readonly string[] }>,
      actor?: AuditActor,
    ): Promise<DeleteResult> {
      return inTransaction(async (client) => {
        if (request) {
          const prior = await claimRequest(client, request.key);
          if (prior) return { kind: 'replayed', prior } as const;
        }
        const { rows } = await client.query<ConversationRowDb>(
          `WITH RECURSIVE tree AS (
             SELECT id FROM conversations WHERE id = $1 AND owner_id = $2
             UNION ALL
             SELECT c.id FROM conversations c JOIN tree t ON c.parent_id = t.id
           )
           SELECT c.* FROM conversations c WHERE c.id IN (SELECT id FROM tree) ORDER BY c.created_at, c.id FOR UPDATE`,
          [id, ownerId],
        );
        const root = rows.find((r) => r.id === id);
        // A refusal keeps nothing: the claimed request id is rolled back with the transaction.
        const refuse = async (result: DeleteResult): Promise<DeleteResult> => {
          await client.query('ROLLBACK');
          await client.query('BEGIN');
          return result;
        };
        if (!root) return refuse({ kind: 'not_found' });
        if (root.parent_id !== null) return refuse({ kind: 'sub_agent', parentId: root.parent_id });
        const busy = rows.filter((r) => !(RESTING_STATE_NAMES as readonly string[]).includes(r.state_kind));
        if (busy.length > 0) return refuse({ kind: 'busy', busy: busy.map(toRecord) });
        const ids = await deleteLockedTree(client, root, rows, createdIdOf, actor);
        if (request) {
          const outcome = request.outcome({ ids });
          if (outcome) await storeOutcome(client, request.key, outcome);
        }
        const notifySeqs = new Map(rows.map((r) => [r.id, Number(r.notify_seq)]));
        return { kind: 'deleted', ids, record: toRecord(root), notifySeqs } as const;
      });
    },

    /**
     * Deletes a user and their data in one transaction (DeleteUser): every conversation they own,
     * each tree as deleteTree deletes it (deleteLockedTree, with `with_user` in its audit row),
     * then the rest of their request outcomes, their rows in USER_TABLES, their tokens and the
     * users row, and a `user_deleted` audit row. Every row of every tree is locked first (in
     * deleteTree's order, so the two cannot deadlock), then the users row; a busy conversation
     * anywhere refuses it all. NOT_FOUND-like (`not_found`) when the user has neither a row nor
     * a conversation. With a request recorder, the admin's request id (scope '') is claimed and
     * its outcome stored here.
     */
    async deleteUser(
      userId: string,
      actor: AuditActor,
      createdIdOf: (response: Uint8Array) => string | null,
      request?: RequestRecorder<{ ids: readonly string[]; user: DeletedUserRow | null; tokens: number }>,
    ): Promise<DeleteUserResult> {
      return inTransaction(async (client) => {
        if (request) {
          const prior = await claimRequest(client, request.key);
          if (prior) return { kind: 'replayed', prior } as const;
        }
        const { rows } = await client.query<ConversationRowDb>(
          `WITH RECURSIVE tree AS (
             SELECT id FROM conversations WHERE owner_id = $1 AND parent_id IS NULL
             UNION ALL
             SELECT c.id FROM conversations c JOIN tree t ON c.parent_id = t.id
           )
           SELECT c.* FROM conversations c WHERE c.id IN (SELECT id FROM tree) ORDER BY c.created_at, c.id FOR UPDATE`,
          [userId],
        );
        const users = await client.query<DeletedUserRow>(
          'SELECT id, display_name, role, created_at, disabled_at FROM users WHERE id = $1 FOR UPDATE',
          [userId],
        );
        const user = users.rows[0] ?? null;
        const refuse = async (result: DeleteUserResult): Promise<DeleteUserResult> => {
          await client.query('ROLLBACK');
          await client.query('BEGIN');
          return result;
        };
        const owned = await client.query<{ id: string }>('SELECT id FROM workspaces WHERE owner_id = $1 FOR UPDATE', [userId]);
        if (!user && rows.length === 0 && owned.rows.length === 0) return refuse({ kind: 'not_found' });
        // Each row's top-level conversation.
        const parentOf = new Map(rows.map((r) => [r.id, r.parent_id]));
        const topOf = (id: string): string => {
          let at = id;
          for (let up = parentOf.get(at); up; up = parentOf.get(at)) at = up;
          return at;
        };
        const rootOf = new Map(rows.map((r) => [r.id, topOf(r.id)]));
        const busy = rows.filter((r) => !(RESTING_STATE_NAMES as readonly string[]).includes(r.state_kind));
        if (busy.length > 0) return refuse({ kind: 'busy', busy: busy.map(toRecord), rootOf });
        const ids: string[] = [];
        for (const root of rows.filter((r) => r.parent_id === null)) {
          const tree = rows.filter((r) => rootOf.get(r.id) === root.id);
          ids.push(...(await deleteLockedTree(client, root, tree, createdIdOf, actor, { with_user: userId })));
        }
        // What is left of theirs: request outcomes of other scopes (e.g. a refused CreateConversation), spend, limits, tokens.
        await client.query('DELETE FROM request_outcomes WHERE owner_id = $1', [userId]);
        for (const table of USER_TABLES) await client.query(`DELETE FROM ${table} WHERE user_id = $1`, [userId]);
        // Their MCP servers (whose env may hold their secrets), off-switches and OAuth logins.
        for (const table of ['mcp_servers', 'mcp_servers_off', 'mcp_oauth_logins', 'mcp_oauth_pending']) {
          await client.query(`DELETE FROM ${table} WHERE owner_id = $1`, [userId]);
        }
        const tokens = await client.query('DELETE FROM user_tokens WHERE user_id = $1', [userId]);
        if (user) await client.query('DELETE FROM users WHERE id = $1', [userId]);
        // Their workspaces' records; the caller removes the files after the commit.
        await client.query('DELETE FROM workspaces WHERE owner_id = $1', [userId]);
        const workspaceIds = owned.rows.map((r) => r.id);
        // The records of their checkpoints (no foreign key): the snapshots go with the workspaces' files.
        await client.query(
          'DELETE FROM conversation_checkpoints WHERE conversation_id = ANY($1::text[]) OR workspace_id = ANY($2::text[])',
          [ids, workspaceIds],
        );
        const roots = rows.filter((r) => r.parent_id === null).length;
        await insertAuditRows(client, [
          {
            userId: actor.userId,
            action: 'user_deleted',
            conversationId: null,
            details: {
              ...clientDetails(actor),
              user_id: userId,
              had_user_row: user !== null,
              conversations: roots,
              sub_agents: ids.length - roots,
              tokens: tokens.rowCount ?? 0,
              workspaces: workspaceIds.length,
            },
          },
        ]);
        if (request) {
          const outcome = request.outcome({ ids, user, tokens: tokens.rowCount ?? 0 });
          if (outcome) await storeOutcome(client, request.key, outcome);
        }
        const notifySeqs = new Map(rows.map((r) => [r.id, Number(r.notify_seq)]));
        return { kind: 'deleted', user, ids, tokens: tokens.rowCount ?? 0, notifySeqs, workspaceIds } as const;
      });
    },

    async archive(id: string, archived: boolean): Promise<void> {
      await pool.query('UPDATE conversations SET archived = $2, revision = revision + 1, updated_at = now() WHERE id = $1', [id, archived]);
    },
  };
}

/** display_data: the union of the tool results' rendering hints (e.g. a patch diff). */
function displayOf(content: readonly ContentBlock[]): unknown {
  const display = content.flatMap((b) => (b.type === 'tool_result' && b.display ? [b.display] : []));
  return display.length ? (display.length === 1 ? display[0] : display) : null;
}

function encodeCursor(at: Date, id: string): string {
  return Buffer.from(JSON.stringify([at.toISOString(), id])).toString('base64url');
}

export class InvalidCursorError extends Error {}

function decodeCursor(cursor: string): [string, string] {
  try {
    const value: unknown = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
    if (Array.isArray(value) && value.length === 2 && typeof value[0] === 'string' && typeof value[1] === 'string') {
      return [value[0], value[1]];
    }
  } catch {
    // fall through
  }
  throw new InvalidCursorError('invalid page_token: pass the next_page_token of a previous response');
}
