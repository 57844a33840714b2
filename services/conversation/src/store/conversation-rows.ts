/** Rows of the conversations and messages tables as read, their records, and the store's transactions. */
import type { Pool, PoolClient } from 'pg';
import { RESTING_STATE_NAMES, type RestingStateName } from '@bedrock/contracts';
import type { ContentBlock, ConversationState, MessageType, PhaseKind, StopReason, Usage } from '../core/index.ts';
import { storedServerTools, storedThinking } from '../settings.ts';
import type { ConversationRecord, MessageRow, TitleSource } from './records.ts';

/**
 * `state_kind NOT IN (<the resting states>)`: the busy conversations, spelled as migration 001's
 * partial index `conversations_busy_idx` spells it, so that the planner uses the index (a test
 * keeps the two equal).
 */
export const BUSY_STATE_SQL = `state_kind NOT IN (${RESTING_STATE_NAMES.map((k) => `'${k}'`).join(', ')})`;
// Every resting state is a phase of the core (the column holds phase names).
true satisfies RestingStateName extends PhaseKind ? true : false;

export interface ConversationRowDb {
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

export function toRecord(row: ConversationRowDb): ConversationRecord {
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

export interface MessageRowDb {
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

export function toMessage(row: MessageRowDb): MessageRow {
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

/** Runs `work` in a transaction on a connection of its own: committed if it returns, rolled back if it throws. */
export async function inTransaction<T>(pool: Pool, work: (client: PoolClient) => Promise<T>): Promise<T> {
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
