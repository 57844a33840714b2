/** Conversations' rows: creating (new, continued, sub-agent, fork), reading, listing, settings and archiving. */
import type { Pool, PoolClient } from 'pg';
import type { ContentBlock } from '../core/index.ts';
import type {
  ConversationRecord,
  ForkCopy,
  ListOptions,
  MessageRow,
  NewConversation,
  Replayed,
  SettingsChange,
  Snapshot,
} from './records.ts';
import { BUSY_STATE_SQL, inTransaction, toMessage, toRecord, type ConversationRowDb, type MessageRowDb } from './conversation-rows.ts';
import { claimRequest, storeOutcome, type RequestRecorder } from './request-outcomes.ts';

export interface ConversationsStore {
  /**
   * Forks a conversation in one transaction (forkIn). With a request recorder, the request id is
   * claimed first and the fork stored as its outcome; a retry finds the first one's.
   */
  fork(
    input: NewConversation,
    copy: ForkCopy,
    request?: RequestRecorder<ConversationRecord>,
  ): Promise<{ kind: 'created'; record: ConversationRecord } | Replayed>;
  /** Creates a conversation; seeds it with a continuation summary when one is given. */
  create(input: NewConversation, seed?: { summary: string }): Promise<ConversationRecord>;
  /** Creates a conversation for a request that carries a client request id; a retry finds the first one's outcome. */
  createRequest(
    input: NewConversation,
    seed: { summary: string } | undefined,
    request: RequestRecorder<ConversationRecord>,
  ): Promise<{ kind: 'created'; record: ConversationRecord } | Replayed>;
  /** Creates a sub-agent's conversation on first delivery of its start event; later deliveries find it. */
  ensureSubAgent(input: NewConversation): Promise<ConversationRecord>;
  get(id: string): Promise<ConversationRecord | null>;
  /** The conversation, its messages and its first `subAgentLimit` sub-agents as of one moment (one transaction). */
  snapshot(id: string, subAgentLimit?: number): Promise<Snapshot | null>;
  /** Newest first; keyset pagination on (created_at, id). */
  list(opts: ListOptions): Promise<{ records: ConversationRecord[]; next: string | null }>;
  /** Busy conversations whose state has not changed for at least `olderThanMs`: candidates for recovery. */
  staleBusy(olderThanMs: number, limit: number): Promise<ConversationRecord[]>;
  /** One message by id (a replayed SendMessage answers with the message it persisted). */
  message(messageId: string): Promise<MessageRow | null>;
  /**
   * Changes a conversation's settings and bumps its revision, so an event being applied at the
   * same time builds its LLM request wholly before or wholly after the change (a write that
   * started before it misses and is decided again). Null: not found.
   */
  updateSettings(id: string, change: SettingsChange): Promise<ConversationRecord | null>;
  archive(id: string, archived: boolean): Promise<void>;
}

export function createConversationsStore(pool: Pool): ConversationsStore {
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
    async fork(
      input: NewConversation,
      copy: ForkCopy,
      request?: RequestRecorder<ConversationRecord>,
    ): Promise<{ kind: 'created'; record: ConversationRecord } | Replayed> {
      return inTransaction(pool, async (client) => {
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

    async create(input: NewConversation, seed?: { summary: string }): Promise<ConversationRecord> {
      return inTransaction(pool, (client) => createIn(client, input, seed));
    },

    async createRequest(
      input: NewConversation,
      seed: { summary: string } | undefined,
      request: RequestRecorder<ConversationRecord>,
    ): Promise<{ kind: 'created'; record: ConversationRecord } | Replayed> {
      return inTransaction(pool, async (client) => {
        const prior = await claimRequest(client, request.key);
        if (prior) return { kind: 'replayed', prior } as const;
        const record = await createIn(client, input, seed);
        const outcome = request.outcome(record);
        if (outcome) await storeOutcome(client, request.key, outcome);
        return { kind: 'created', record } as const;
      });
    },

    async ensureSubAgent(input: NewConversation): Promise<ConversationRecord> {
      return inTransaction(pool, async (client) => {
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

    async snapshot(id: string, subAgentLimit = 0): Promise<Snapshot | null> {
      return inTransaction(pool, async (client) => {
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

    async message(messageId: string): Promise<MessageRow | null> {
      const { rows } = await pool.query<MessageRowDb>('SELECT * FROM messages WHERE id = $1', [messageId]);
      return rows[0] ? toMessage(rows[0]) : null;
    },

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

    async archive(id: string, archived: boolean): Promise<void> {
      await pool.query('UPDATE conversations SET archived = $2, revision = revision + 1, updated_at = now() WHERE id = $1', [id, archived]);
    },
  };
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
