/**
 * What follows the commit of a deletion (DeleteConversation, DeleteUser): the end of the deleted
 * conversations' notification streams, the removal of what the transport still holds of them
 * (queue jobs and run-ledger records, which carry tool output and model text), and reading which conversation a stored
 * CreateConversation/ForkConversation outcome created (store.deleteTree deletes those outcomes).
 */
import { create, fromBinary } from '@bufbuild/protobuf';
import { ConversationEventSchema, CreateConversationResponseSchema } from '@bedrock/contracts';
import type { NotificationStreams, Queues, RunLedger } from '@bedrock/platform';
import type { Logger } from '@bedrock/platform/server';

/** Where a deleted conversation's jobs and tool results still are (the transport's queues and run ledger). */
export interface ConversationLeftovers {
  readonly queues: Pick<Queues, 'removeConversation'>;
  readonly runs: Pick<RunLedger, 'removeConversation'>;
}

export interface DeletedStreamsOptions {
  readonly streams: NotificationStreams;
  /** The transport's queues and run ledger, emptied of the deleted conversations' jobs and records. */
  readonly leftovers?: ConversationLeftovers;
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
  // Jobs and records at once; a job that was running then (an event being applied, a cancelled
  // tool finishing) is removed by the second pass, after the grace.
  await removeLeftovers(options, ids);
  const graceMs = options.graceMs ?? 1000;
  if (graceMs > 0) await new Promise((resolve) => setTimeout(resolve, graceMs));
  await removeLeftovers(options, ids);
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

/**
 * Removes every queue job (waiting, delayed, completed, failed: their payloads, tool output and
 * model text included) and run-ledger record of the conversations. Failures are logged: the rows
 * are gone already, and what is left expires by its retention.
 */
export async function removeLeftovers(options: Pick<DeletedStreamsOptions, 'leftovers' | 'logger'>, ids: readonly string[]): Promise<void> {
  const { leftovers, logger } = options;
  if (!leftovers) return;
  await Promise.all(
    ids.map((conversationId) =>
      Promise.all([leftovers.queues.removeConversation(conversationId), leftovers.runs.removeConversation(conversationId)]).catch(
        (err: unknown) =>
          logger.warn(
            { err, conversation_id: conversationId },
            "could not remove a deleted conversation's jobs; they expire by their retention",
          ),
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
