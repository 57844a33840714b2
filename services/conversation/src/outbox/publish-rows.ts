/**
 * Publishes committed outbox rows to Redis (or the in-process transport) in bulk: rows are
 * taken in runs of one kind, in order, each run in as few round trips as the transport allows
 * (docs/conversation.md, "What it does", item 2). A job never overtakes the notification before it
 * (its live output follows that position) and a timer's removal never overtakes its scheduling.
 */
import type { DescMessage } from '@bufbuild/protobuf';
import type { BulkJob, EncodedEvent, Producer, Transport } from '@bedrock/platform';
import { cancelMessage, JOB_SCHEMAS, jobMessage, notificationMessage } from '../mapping/outbox-messages.ts';
import type { JobSchemaName, OutboxRow, StoredOutboxRow } from '../store/outbox-row.ts';

/**
 * Publishes a batch of rows. Throws when anything fails: the caller marks none of the batch sent,
 * so it is published again; every publish is idempotent (job ids, stream positions, cancels).
 */
export type PublishRows = (rows: readonly StoredOutboxRow[]) => Promise<void>;

export function createRowPublisher(
  transport: Transport,
  /** Called for each row once its run is out (metrics: lag from commit to publish). */
  onPublished?: (kind: OutboxRow['kind'], lagMs: number) => void,
): PublishRows {
  const producers = new Map<string, Producer<DescMessage>>();
  function producer(queue: string, schema: JobSchemaName): Producer<DescMessage> {
    const key = `${queue}\u0000${schema}`;
    let p = producers.get(key);
    if (!p) {
      p = transport.queues.producer(queue, JOB_SCHEMAS[schema]);
      producers.set(key, p);
    }
    return p;
  }

  /** One run of one kind: a conversation's notifications in one call, jobs with `addBulk` per queue, all queues at once. */
  async function publishRun(run: readonly StoredOutboxRow[]): Promise<void> {
    const kind = run[0]!.row.kind;
    switch (kind) {
      case 'notification': {
        // Appended as stored (protobuf JSON): no decoding only to encode again.
        const byConversation = new Map<string, EncodedEvent[]>();
        for (const { row } of run) {
          if (row.kind !== 'notification') continue;
          const list = byConversation.get(row.conversationId) ?? [];
          list.push({
            conversationId: row.conversationId,
            sequence: BigInt(row.payload.sequence),
            kind: row.payload.kind ?? notificationMessage(row).kind.case ?? '',
            json: JSON.stringify(row.payload.message),
          });
          byConversation.set(row.conversationId, list);
        }
        await Promise.all([...byConversation.values()].map((events) => transport.streams.appendDurableMany(events)));
        return;
      }
      case 'job': {
        const byQueue = new Map<string, { producer: Producer<DescMessage>; jobs: BulkJob<DescMessage>[] }>();
        const now = Date.now();
        for (const { row, createdAt } of run) {
          if (row.kind !== 'job') continue;
          const key = `${row.payload.queue}\u0000${row.payload.schema}`;
          let entry = byQueue.get(key);
          if (!entry) byQueue.set(key, (entry = { producer: producer(row.payload.queue, row.payload.schema), jobs: [] }));
          // A row published late keeps its original due time.
          const delayMs = Math.max(0, row.payload.delayMs - (now - createdAt));
          entry.jobs.push({ jobId: row.payload.jobId, payload: jobMessage(row), options: { delayMs } });
        }
        await Promise.all([...byQueue.values()].map(({ producer: p, jobs }) => p.addBulk(jobs)));
        return;
      }
      case 'remove_job':
        await Promise.all(
          run.map(({ row }) =>
            row.kind === 'remove_job' ? producer(row.payload.queue, 'ConversationEventJob').remove(row.payload.jobId) : null,
          ),
        );
        return;
      case 'cancel':
        await Promise.all(run.map(({ row }) => (row.kind === 'cancel' ? transport.cancels.publish(cancelMessage(row)) : null)));
        return;
    }
  }

  return async (rows) => {
    // Notification and job runs are sent without waiting for each other: on one Redis
    // connection the server runs commands in the order they were sent, so a job still lands
    // after the notification before it, and the batch costs one round trip, not one per run.
    // A removal or a cancel waits for everything before it.
    const sent: Promise<void>[] = [];
    let start = 0;
    while (start < rows.length) {
      let end = start + 1;
      while (end < rows.length && rows[end]!.row.kind === rows[start]!.row.kind) end++;
      const run = rows.slice(start, end);
      const kind = run[0]!.row.kind;
      if (kind === 'notification' || kind === 'job') sent.push(publishRun(run));
      else {
        await Promise.all(sent.splice(0));
        await publishRun(run);
      }
      start = end;
    }
    await Promise.all(sent);
    if (onPublished) {
      const now = Date.now();
      for (const { row, createdAt } of rows) onPublished(row.kind, now - createdAt);
    }
  };
}
