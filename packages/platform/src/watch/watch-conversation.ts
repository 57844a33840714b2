/**
 * A conversation's watch stream (REQ-BED-011): a snapshot, then the notification stream live,
 * resumable from the last position a client saw with no gap and no duplicate among durable
 * events. Shared by every server of WatchConversation. A `deleted` event (DeleteConversation) is
 * the last one: the stream ends after it.
 */
import { create } from '@bufbuild/protobuf';
import {
  ConversationEventSchema,
  WatchConversationResponseSchema,
  type Conversation,
  type ConversationEvent,
  type Message,
  type WatchConversationResponse,
} from '@bedrock/contracts';
import type { NotificationStreams, StreamPosition } from '../interfaces.ts';

export interface WatchSnapshot {
  readonly conversation: Conversation;
  readonly messages: Message[];
  /** The notification sequence the snapshot reflects. */
  readonly sequence: bigint;
  /** The conversation's first sub-agents (Snapshot.sub_agents). */
  readonly subAgents?: Conversation[];
}

export interface WatchOptions {
  readonly conversationId: string;
  /** Resume after this position; (0, 0) starts with a snapshot. */
  readonly after: StreamPosition;
  readonly streams: NotificationStreams;
  readonly snapshot: () => Promise<WatchSnapshot>;
  /** A heartbeat is sent after this long without events, ms. */
  readonly heartbeatMs: number;
  readonly signal: AbortSignal;
  /** Events read per round. Default 500. */
  readonly batch?: number;
}

/**
 * Whether durable events between `after` and the first durable one of `batch` are gone (trimmed,
 * or lost with Redis): then a fresh snapshot covers them, and the stream goes on after it.
 */
export function durableGap<E>(after: StreamPosition, batch: readonly E[], position: (e: E) => StreamPosition): boolean {
  const first = batch.find((e) => position(e).deltaIndex === 0);
  return first !== undefined && position(first).sequence > after.sequence + 1n;
}

function response(event: ConversationEvent): WatchConversationResponse {
  return create(WatchConversationResponseSchema, { event });
}

export async function* watchConversation(options: WatchOptions): AsyncGenerator<WatchConversationResponse> {
  const { conversationId, streams, signal } = options;
  let after: StreamPosition = options.after;

  async function* snapshot(): AsyncGenerator<WatchConversationResponse> {
    const s = await options.snapshot();
    after = { sequence: s.sequence, deltaIndex: 0 };
    yield response(
      create(ConversationEventSchema, {
        conversationId,
        sequence: s.sequence,
        kind: { case: 'snapshot', value: { conversation: s.conversation, messages: s.messages, subAgents: s.subAgents ?? [] } },
      }),
    );
  }

  if (after.sequence === 0n && after.deltaIndex === 0) yield* snapshot();
  while (!signal.aborted) {
    const events = await streams.read(conversationId, after, { limit: options.batch ?? 500, blockMs: options.heartbeatMs, signal });
    if (signal.aborted) return;
    if (events.length === 0) {
      yield response(
        create(ConversationEventSchema, {
          conversationId,
          sequence: after.sequence,
          deltaIndex: after.deltaIndex,
          kind: { case: 'heartbeat', value: {} },
        }),
      );
      continue;
    }
    if (durableGap(after, events, (e) => e)) {
      yield* snapshot();
      continue;
    }
    for (const event of events) {
      yield response(event);
      after = { sequence: event.sequence, deltaIndex: event.deltaIndex };
      // The conversation was deleted: its last event; nothing follows.
      if (event.kind.case === 'deleted') return;
    }
  }
}
