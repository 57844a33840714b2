/**
 * Postgres state of conversations. `applyEvent` is the one way state changes (DESIGN.md,
 * "the life of an event"): lock the row, run the pure transition, write the new state, the
 * new messages and one outbox row per effect, commit. The relay publishes the outbox after
 * commit, so state is always written before effects run (REQ-BED-007).
 */
import type { Pool, PoolClient } from 'pg';
import type { ModelRegistry } from '@bedrock/contracts/models';
import {
  initialState,
  makeContext,
  transition,
  type ContentBlock,
  type ConversationContext,
  type ConversationEvent,
  type ConversationState,
  type Effect,
  type HistoryMessage,
  type MessageType,
  type PhaseKind,
  type Policy,
  type Rejection,
  type StopReason,
  type Usage,
} from '../core/index.ts';
import type { MessageRow } from '../mapping/proto.ts';
import { storedServerTools, storedThinking, type ServerToolName, type ThinkingSetting } from '../settings.ts';
import { effectsToOutbox, type OutboxRow } from '../outbox/effects-to-outbox.ts';
import {
  claimRequest,
  findOutcome,
  pruneOutcomes,
  releaseRequest,
  storeOutcome,
  type PriorOutcome,
  type RequestKey,
  type RequestRecorder,
} from './request-outcomes.ts';

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
}

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
}

/** A change of settings; an absent field stays as it is. */
export interface SettingsChange {
  readonly thinking?: ThinkingSetting;
  readonly serverTools?: readonly ServerToolName[];
}

/** What applying an event did; `from` is the phase the conversation was in (for metrics). */
export type ApplyResult =
  | {
      readonly kind: 'applied';
      readonly from: PhaseKind;
      readonly record: ConversationRecord;
      readonly effects: readonly Effect[];
      /** Messages this event persisted, with their ids and sequences. */
      readonly persisted: readonly MessageRow[];
      readonly outbox: number;
      /**
       * Conversations the new outbox rows belong to: this one, and others it affects (a
       * sub-agent's start, a parent's result). The caller kicks the relay for each.
       */
      readonly outboxConversations: readonly string[];
    }
  | { readonly kind: 'noop'; readonly from: PhaseKind; readonly record: ConversationRecord }
  | { readonly kind: 'rejected'; readonly from: PhaseKind; readonly record: ConversationRecord; readonly rejection: Rejection }
  | { readonly kind: 'not_found' };

/** A request id used before: nothing was applied; the first outcome (or a mismatch) is in `prior`. */
export interface Replayed {
  readonly kind: 'replayed';
  readonly prior: PriorOutcome;
}

export interface StoreOptions {
  readonly pool: Pool;
  readonly models: ModelRegistry;
  readonly policy?: Partial<Policy>;
  /** Output limit asked for each response, capped by the model's own limit. Default 16384 tokens. */
  readonly maxOutputTokens?: number;
}

export interface ListOptions {
  readonly ownerId: string;
  /** List the sub-agents of this conversation instead of user-initiated ones. */
  readonly parentId?: string;
  readonly includeArchived?: boolean;
  readonly limit: number;
  /** Opaque cursor from a previous page. */
  readonly after?: string;
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
  notify_seq: string;
  message_seq: string;
  created_at: Date;
  updated_at: Date;
  state_updated_at: Date;
  archived: boolean;
  thinking: string;
  server_tools: string[];
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
    notifySeq: Number(row.notify_seq),
    messageSeq: Number(row.message_seq),
    createdAt: row.created_at,
    updatedAt: row.updated_at,
    stateUpdatedAt: row.state_updated_at,
    archived: row.archived,
    thinking: storedThinking(row.thinking),
    serverTools: storedServerTools(row.server_tools),
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

export function createConversationStore(options: StoreOptions) {
  const { pool, models } = options;
  const maxOutputTokens = options.maxOutputTokens ?? 16_384;

  function contextFor(record: ConversationRecord): ConversationContext {
    return makeContext({
      conversationId: record.id,
      cwd: record.cwd,
      model: record.model,
      contextWindow: record.contextWindow,
      maxOutputTokens: models.lookup(record.model).maxOutputTokens,
      isSubAgent: record.parentId !== null,
      parentId: record.parentId,
      sandboxAvailable: record.sandboxAvailable,
      ...(options.policy ? { policy: options.policy } : {}),
    });
  }

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
    const isSubAgent = Boolean(input.parentId);
    const limits = models.lookup(input.model);
    const ctx = makeContext({
      conversationId: input.id,
      isSubAgent,
      sandboxAvailable: input.sandboxAvailable,
      contextWindow: limits.contextWindow,
    });
    const state = initialState(ctx);
    // Settings not given: a sub-agent inherits its parent's; otherwise the defaults.
    const { rows } = await client.query<ConversationRowDb>(
      `INSERT INTO conversations (id, owner_id, slug, cwd, model, context_window, mode, sandbox_available,
                                  parent_id, user_initiated, continued_from_id, state_kind, state, thinking, server_tools)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13,
               COALESCE($14, (SELECT thinking FROM conversations WHERE id = $9), 'high'),
               COALESCE($15::text[], (SELECT server_tools FROM conversations WHERE id = $9), '{}'))
       ON CONFLICT (id) DO NOTHING
       RETURNING *`,
      [
        input.id,
        input.ownerId,
        input.slug,
        input.cwd,
        input.model,
        limits.contextWindow,
        state.mode,
        input.sandboxAvailable,
        input.parentId ?? null,
        !isSubAgent,
        input.continuedFromId ?? null,
        state.phase.kind,
        JSON.stringify(state),
        input.thinking ?? null,
        input.serverTools ? [...input.serverTools] : null,
      ],
    );
    return rows[0] ? toRecord(rows[0]) : null;
  }

  async function historyOf(client: PoolClient, id: string): Promise<HistoryMessage[]> {
    const { rows } = await client.query<{ message_type: MessageType; content: ContentBlock[]; stop_reason: StopReason | null }>(
      'SELECT message_type, content, stop_reason FROM messages WHERE conversation_id = $1 ORDER BY sequence',
      [id],
    );
    return rows.map((r) => (r.stop_reason ? { type: r.message_type, content: r.content, stopReason: r.stop_reason } : { type: r.message_type, content: r.content }));
  }

  async function insertOutbox(client: PoolClient, rows: readonly OutboxRow[]): Promise<void> {
    if (rows.length === 0) return;
    const values: unknown[] = [];
    const tuples = rows.map((row, i) => {
      values.push(row.effectId, row.conversationId, row.kind, JSON.stringify(row.payload));
      return `($${i * 4 + 1}, $${i * 4 + 2}, $${i * 4 + 3}, $${i * 4 + 4})`;
    });
    // ON CONFLICT: an effect id is decided once; a duplicate can only be the same row again.
    await client.query(
      `INSERT INTO outbox (effect_id, conversation_id, kind, payload) VALUES ${tuples.join(', ')} ON CONFLICT (effect_id) DO NOTHING`,
      values,
    );
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
    const { rows } = await client.query<ConversationRowDb>('UPDATE conversations SET message_seq = 1 WHERE id = $1 RETURNING *', [record.id]);
    return toRecord(rows[0]!);
  }

  /** The body of applyEvent, in the caller's transaction; `locked` is the row if the caller locked it already. */
  async function applyIn(
    client: PoolClient,
    id: string,
    event: ConversationEvent,
    traceContext: Record<string, string> | undefined,
    locked?: ConversationRecord,
  ): Promise<ApplyResult> {
    let record = locked;
    if (!record) {
      const { rows } = await client.query<ConversationRowDb>('SELECT * FROM conversations WHERE id = $1 FOR UPDATE', [id]);
      if (!rows[0]) return { kind: 'not_found' } as const;
      record = toRecord(rows[0]);
    }
    const ctx = contextFor(record);
    const result = transition(record.state, ctx, event);
    const from = record.state.phase.kind;
    if (!result.ok) return { kind: 'rejected', from, record, rejection: result.rejection } as const;
    if (result.state === record.state) return { kind: 'noop', from, record } as const;

    // Messages first: their sequence numbers and ids go into notifications and jobs.
    let messageSeq = record.messageSeq;
    const persisted: MessageRow[] = [];
    for (const effect of result.effects) {
      if (effect.type !== 'persist_message') continue;
      messageSeq += 1;
      const row = await client.query<MessageRowDb>(
        `INSERT INTO messages (id, conversation_id, sequence, message_type, actor_kind, content, display_data, usage_data,
                               stop_reason, stop_explanation)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) RETURNING *`,
        [
          `${id}/m/${messageSeq}`,
          id,
          messageSeq,
          effect.message.type,
          ACTOR[effect.message.type],
          JSON.stringify(effect.message.content),
          displayOf(effect.message.content),
          effect.message.usage ? JSON.stringify(effect.message.usage) : null,
          effect.message.stopReason ?? null,
          effect.message.stopExplanation ?? null,
        ],
      );
      persisted.push(toMessage(row.rows[0]!));
    }

    const needsHistory = result.effects.some((e) => e.type === 'request_llm');
    const { rows: outboxRows, notifySeq } = effectsToOutbox({
      record,
      context: ctx,
      previous: record.state,
      next: result.state,
      effects: result.effects,
      persisted,
      history: needsHistory ? await historyOf(client, id) : [],
      maxTokens: Math.min(maxOutputTokens, models.lookup(record.model).maxOutputTokens),
      traceContext: traceContext ?? {},
    });
    await insertOutbox(client, outboxRows);

    const phaseChanged = result.state.phase.kind !== record.state.phase.kind || result.state.mode !== record.state.mode;
    const updated = await client.query<ConversationRowDb>(
      `UPDATE conversations
          SET state = $2, state_kind = $3, mode = $4, version = $5, notify_seq = $6, message_seq = $7,
              updated_at = now(), state_updated_at = CASE WHEN $8 THEN now() ELSE state_updated_at END
        WHERE id = $1 RETURNING *`,
      [
        id,
        JSON.stringify(result.state),
        result.state.phase.kind,
        result.state.mode,
        result.state.seq,
        notifySeq,
        messageSeq,
        phaseChanged || result.effects.some((e) => e.type === 'request_llm' || e.type === 'execute_tool'),
      ],
    );
    return {
      kind: 'applied',
      from,
      record: toRecord(updated.rows[0]!),
      effects: result.effects,
      persisted,
      outbox: outboxRows.length,
      outboxConversations: [...new Set([id, ...outboxRows.map((row) => row.conversationId)])],
    } as const;
  }

  return {
    contextFor,

    /** Creates a conversation; seeds it with a continuation summary when one is given. */
    async create(input: NewConversation, seed?: { summary: string }): Promise<ConversationRecord> {
      return inTransaction((client) => createIn(client, input, seed));
    },

    /** Creates a sub-agent's conversation on first delivery of its start event; later deliveries find it. */
    async ensureSubAgent(input: NewConversation & { parentId: string }): Promise<ConversationRecord> {
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

    /** The conversation and its messages as of one moment (one transaction). */
    async snapshot(id: string): Promise<{ record: ConversationRecord; messages: MessageRow[] } | null> {
      return inTransaction(async (client) => {
        await client.query('SET TRANSACTION ISOLATION LEVEL REPEATABLE READ');
        const { rows } = await client.query<ConversationRowDb>('SELECT * FROM conversations WHERE id = $1', [id]);
        if (!rows[0]) return null;
        const messages = await client.query<MessageRowDb>(
          'SELECT * FROM messages WHERE conversation_id = $1 ORDER BY sequence',
          [id],
        );
        return { record: toRecord(rows[0]), messages: messages.rows.map(toMessage) };
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
          WHERE state_kind NOT IN ('idle', 'error', 'context_exhausted', 'completed', 'failed')
            AND state_updated_at < now() - ($1::double precision * interval '1 millisecond')
          ORDER BY state_updated_at LIMIT $2`,
        [olderThanMs, limit],
      );
      return rows.map(toRecord);
    },

    /**
     * Applies one event in one transaction. Rejections and no-ops write nothing. Concurrent
     * calls for one conversation serialise on its row lock, so two replicas never interleave
     * two events of one conversation.
     */
    async applyEvent(id: string, event: ConversationEvent, traceContext?: Record<string, string>): Promise<ApplyResult> {
      return inTransaction((client) => applyIn(client, id, event, traceContext));
    },

    /**
     * Applies a user action that carries a client request id (request-outcomes.ts): after the
     * conversation's row lock, the id is claimed; if it was used before, nothing is applied
     * and the stored outcome is returned (`replayed`). Otherwise the event is applied and its
     * outcome stored in the same transaction.
     */
    async applyRequest(
      id: string,
      event: ConversationEvent,
      traceContext: Record<string, string> | undefined,
      request: RequestRecorder<ApplyResult>,
    ): Promise<ApplyResult | Replayed> {
      return inTransaction(async (client) => {
        const { rows } = await client.query<ConversationRowDb>('SELECT * FROM conversations WHERE id = $1 FOR UPDATE', [id]);
        if (!rows[0]) return { kind: 'not_found' } as const;
        const prior = await claimRequest(client, request.key);
        if (prior) return { kind: 'replayed', prior } as const;
        const result = await applyIn(client, id, event, traceContext, toRecord(rows[0]));
        const outcome = request.outcome(result);
        if (outcome) await storeOutcome(client, request.key, outcome);
        else await releaseRequest(client, request.key);
        return result;
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
     * Changes a conversation's settings under its row lock, so an event being applied at the
     * same time builds its LLM request wholly before or wholly after the change. Null: not found.
     */
    async updateSettings(id: string, change: SettingsChange): Promise<ConversationRecord | null> {
      const { rows } = await pool.query<ConversationRowDb>(
        `UPDATE conversations
            SET thinking = COALESCE($2, thinking), server_tools = COALESCE($3::text[], server_tools), updated_at = now()
          WHERE id = $1 RETURNING *`,
        [id, change.thinking ?? null, change.serverTools ? [...change.serverTools] : null],
      );
      return rows[0] ? toRecord(rows[0]) : null;
    },

    async archive(id: string, archived: boolean): Promise<void> {
      await pool.query('UPDATE conversations SET archived = $2, updated_at = now() WHERE id = $1', [id, archived]);
    },
  };
}

/** display_data: the union of the tool results' rendering hints (e.g. a patch diff). */
function displayOf(content: readonly ContentBlock[]): string | null {
  const display = content.flatMap((b) => (b.type === 'tool_result' && b.display ? [b.display] : []));
  return display.length ? JSON.stringify(display.length === 1 ? display[0] : display) : null;
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
