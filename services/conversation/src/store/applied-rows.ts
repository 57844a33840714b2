/**
 * What writing an applied event sends and gets back, shared by the one-event statement
 * (apply-writes.ts) and the group commit (group-commit.ts): the messages' column values and
 * the record after the write.
 */
import type { ContentBlock, MessageType } from '../core/index.ts';
import type { AppliedWrite, ConversationRecord, MessageRow } from './records.ts';

/** The end of an `INSERT INTO user_daily_spend`: a day that has a row already adds to it. */
export const ADD_TO_DAILY_SPEND = `ON CONFLICT (user_id, day) DO UPDATE
    SET cost_micros = user_daily_spend.cost_micros + EXCLUDED.cost_micros,
        input_tokens = user_daily_spend.input_tokens + EXCLUDED.input_tokens,
        output_tokens = user_daily_spend.output_tokens + EXCLUDED.output_tokens,
        cache_creation_tokens = user_daily_spend.cache_creation_tokens + EXCLUDED.cache_creation_tokens,
        cache_read_tokens = user_daily_spend.cache_read_tokens + EXCLUDED.cache_read_tokens`;

/**
 * True when the owner whose id `owner` names has no budget of their own: no `user_limits` row
 * with a daily or monthly budget above 0 (the write's guard for `onlyWithoutBudget`; the
 * service's default budgets are none when it is used).
 */
export const noBudgetOf = (owner: string) =>
  `NOT EXISTS (SELECT 1 FROM user_limits l WHERE l.user_id = ${owner} AND (l.daily_budget_micros > 0 OR l.monthly_budget_micros > 0))`;

/** A message's columns, as `jsonb_to_recordset` reads them. */
export function messageValues(m: MessageRow) {
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

const ACTOR: Record<MessageType, string> = {
  user: 'human',
  agent: 'llm_agent',
  tool: 'system',
  system: 'system',
  error: 'system',
  continuation: 'llm_agent',
};

/** display_data: the union of the tool results' rendering hints (e.g. a patch diff). */
function displayOf(content: readonly ContentBlock[]): unknown {
  const display = content.flatMap((b) => (b.type === 'tool_result' && b.display ? [b.display] : []));
  return display.length ? (display.length === 1 ? display[0] : display) : null;
}

/** What the statement returns for one written conversation (not the state, which the caller has). */
export interface WrittenRow {
  readonly revision: string;
  readonly updated_at: Date;
  readonly state_updated_at: Date;
  /** The ids of the inserted table rows, in insertion order. */
  readonly outbox_ids: string[];
}

/** The record after the write, built from the record read, the write and what the statement returned. */
export function afterWrite(
  record: ConversationRecord,
  write: AppliedWrite,
  row: WrittenRow,
  holder: readonly number[],
  rowCount: number,
): { record: ConversationRecord; outboxIds: string[] } {
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
  const outboxIds = ids.length === rowCount ? holder.map((i) => ids[i]!) : ids;
  return { record: updated, outboxIds };
}
