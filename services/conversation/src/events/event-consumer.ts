/**
 * Consumes `conversation-events` (LLM results, tool results, sub-agent results and starts,
 * timers) and applies each to its conversation. Duplicates and stale answers are no-ops in
 * the state machine, so redelivery is harmless.
 */
import { titleFromMessage } from '../titles.ts';
import { ConversationEventJobSchema, Mode as PMode, QUEUE_CONVERSATION_EVENTS } from '@bedrock/contracts';
import type { Consumer, Transport } from '@bedrock/platform';
import { instrumentJob, traceCarrier, type Metrics } from '@bedrock/platform/server';
import type { Logger } from '@bedrock/platform/server';
import { decodeEventJob } from '../mapping/proto.ts';
import type { ConversationStore } from '../store/conversation-store.ts';
import type { Applier } from '../apply/applier.ts';
import { removeLeftovers } from '../api/deleted-streams.ts';

/** How long after dropping an event of an unknown conversation its leftovers are removed (its job has completed by then), ms. */
const LATE_LEFTOVERS_MS = 2000;

export interface EventConsumerOptions {
  readonly transport: Transport;
  readonly store: ConversationStore;
  readonly applier: Applier;
  readonly logger: Logger;
  /** Job metrics of `conversation-events` (wait, duration, and arrival → effects published); none: unmeasured. */
  readonly metrics?: Metrics;
  /** Events applied at once by this replica (different conversations run in parallel). Default 16. */
  readonly concurrency?: number;
  /** Called after each event with the phase it found, the event type and the outcome (metrics). */
  readonly onApplied?: (from: string, event: string, outcome: string) => void;
}

/** Thrown so the queue retries the job later (with backoff). */
class RetryLater extends Error {}

export function startEventConsumer(options: EventConsumerOptions): Consumer {
  const { transport, store, applier, logger } = options;
  return transport.queues.consume(
    QUEUE_CONVERSATION_EVENTS,
    ConversationEventJobSchema,
    // The jobs an event causes are children of this job's consumer span (the job's own context with tracing off).
    instrumentJob(options.metrics, QUEUE_CONVERSATION_EVENTS, async (job) => {
      const data = job.data;
      const id = data.conversationId;
      const decoded = decodeEventJob(data);
      if (decoded.kind === 'empty') {
        logger.warn({ conversation_id: id, job_id: job.id }, 'conversation event without a payload; dropped');
        return;
      }
      let eventType: string;
      let result;
      if (decoded.kind === 'sub_agent_start') {
        const start = decoded.start;
        await store.ensureSubAgent(
          applier.newConversation({
            id,
            ownerId: start.ownerId,
            slug: id,
            cwd: start.cwd,
            model: start.model,
            // The parent asked for Restricted exactly when the sandbox exists (REQ-BED-018).
            sandboxAvailable: start.mode === PMode.RESTRICTED,
            parentId: start.parentId,
            // Titled by its task from the start, so that it is never listed untitled under its parent.
            title: titleFromMessage(start.task),
          }),
        );
        eventType = 'sub_agent_start';
        result = await applier.apply(id, { type: 'sub_agent_start', task: start.task }, traceCarrier(data.traceContext));
      } else {
        eventType = decoded.event.type;
        result = await applier.apply(id, decoded.event, traceCarrier(data.traceContext));
      }
      options.onApplied?.(result.kind === 'not_found' ? 'none' : result.from, eventType, result.kind);
      switch (result.kind) {
        case 'applied':
          // Its effects are published already (rows of other conversations too: a sub-agent's start, a parent's result).
          return;
        case 'not_found':
          // A stop can overtake the start of the sub-agent it stops: try again shortly.
          if (eventType === 'sub_agent_stop') throw new RetryLater(`sub-agent ${id} does not exist yet`);
          logger.warn({ conversation_id: id, event: eventType }, 'event for an unknown conversation; dropped');
          // A deleted conversation's late result (a cancelled tool that finished after the
          // deletion): once this job has completed, remove it, the tool's job and its record.
          setTimeout(() => void removeLeftovers({ leftovers: transport, logger }, [id]), LATE_LEFTOVERS_MS).unref();
          return;
        case 'rejected':
          logger.warn({ conversation_id: id, event: eventType, rejection: result.rejection.code }, 'event rejected');
          return;
        case 'noop':
          logger.debug({ conversation_id: id, event: eventType }, 'event answered nothing pending; ignored');
          return;
      }
    }),
    { concurrency: options.concurrency ?? 16 },
  );
}
