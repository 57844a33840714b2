/**
 * What follows the commit of a deletion (DeleteConversation, DeleteUser): the end of the deleted
 * conversations' notification streams, and reading which conversation a stored
 * CreateConversation/ForkConversation outcome created (store.deleteTree deletes those outcomes).
 */
import { create, fromBinary } from '@bufbuild/protobuf';
import { ConversationEventSchema, CreateConversationResponseSchema } from '@bedrock/contracts';
import type { NotificationStreams } from '@bedrock/platform';
import type { Logger } from '@bedrock/platform/server';

export interface DeletedStreamsOptions {
  readonly streams: NotificationStreams;
  readonly logger: Logger;
  /** How long watchers have to read the final `deleted` event before the streams are deleted, ms. Default 1000. */
  readonly graceMs?: number;
}

/**
 * A final durable `deleted` event in each stream (after the last notification each had), then,
 * `graceMs` later, the streams themselves. Failures are logged, not answered: the rows are gone
 * already, and a stream left behind expires by its TTL.
 */
export async function endDeletedStreams(
  options: DeletedStreamsOptions,
  ids: readonly string[],
  notifySeqs: ReadonlyMap<string, number>,
): Promise<void> {
  const { streams, logger } = options;
  await Promise.all(
    ids.map((conversationId) =>
      streams
        .appendDurable(
          create(ConversationEventSchema, {
            conversationId,
            sequence: BigInt((notifySeqs.get(conversationId) ?? 0) + 1),
            kind: { case: 'deleted', value: {} },
          }),
        )
        .catch((err: unknown) => logger.warn({ err, conversation_id: conversationId }, 'could not tell watchers of a deletion')),
    ),
  );
  const graceMs = options.graceMs ?? 1000;
  if (graceMs > 0) await new Promise((resolve) => setTimeout(resolve, graceMs));
  await Promise.all(
    ids.map((conversationId) =>
      streams
        .delete(conversationId)
        .catch((err: unknown) =>
          logger.warn({ err, conversation_id: conversationId }, 'could not delete a notification stream; it expires by its TTL'),
        ),
    ),
  );
}

/** The conversation a stored CreateConversation or ForkConversation response names (both responses share the layout); null if none. */
export function createdConversationIdOf(response: Uint8Array): string | null {
  try {
    return fromBinary(CreateConversationResponseSchema, response).conversation?.id ?? null;
  } catch {
    return null;
  }
}
