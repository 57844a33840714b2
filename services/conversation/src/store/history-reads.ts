/**
 * Reads the history an LLM request names (LlmRequestJob.history_through): the messages of one
 * conversation up to a sequence, in order. Plain data access over a pool; messages are
 * append-only, so the same position always reads the same history.
 */
import type { Pool } from 'pg';
import type { ContentBlock, HistoryMessage, MessageType, StopReason } from '../core/index.ts';

export type HistoryRead =
  | { readonly kind: 'not_found' }
  /** `through` is beyond the conversation's last message (`messageSeq`). */
  | { readonly kind: 'beyond'; readonly messageSeq: number }
  | { readonly kind: 'ok'; readonly messages: HistoryMessage[] };

export interface HistoryReads {
  /** The messages with sequence <= `through`, ordered by sequence; one round trip. */
  historyThrough(conversationId: string, through: number): Promise<HistoryRead>;
}

interface Row {
  message_seq: string;
  message_type: MessageType | null;
  content: ContentBlock[] | null;
  stop_reason: StopReason | null;
}

export function createHistoryReads(pool: Pool): HistoryReads {
  return {
    async historyThrough(conversationId, through) {
      // The conversation row decides "not found" and "beyond"; a LEFT JOIN keeps it when
      // there are no messages. Served by the (conversation_id, sequence) unique index.
      const { rows } = await pool.query<Row>(
        `SELECT c.message_seq, m.message_type, m.content, m.stop_reason
           FROM conversations c
           LEFT JOIN messages m ON m.conversation_id = c.id AND m.sequence <= $2 AND $2 <= c.message_seq
          WHERE c.id = $1
          ORDER BY m.sequence`,
        [conversationId, through],
      );
      if (rows.length === 0) return { kind: 'not_found' };
      const messageSeq = Number(rows[0]!.message_seq);
      if (through > messageSeq) return { kind: 'beyond', messageSeq };
      const messages: HistoryMessage[] = [];
      for (const r of rows) {
        if (r.message_type === null || r.content === null) continue;
        messages.push(
          r.stop_reason
            ? { type: r.message_type, content: r.content, stopReason: r.stop_reason }
            : { type: r.message_type, content: r.content },
        );
      }
      return { kind: 'ok', messages };
    },
  };
}
