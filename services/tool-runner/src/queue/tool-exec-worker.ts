/**
 * The queue side of the runner, kept thin: consume `tool-exec` (and `tool-exec-restricted`
 * when the sandbox works here), run the job, stream live output, and send the result to
 * `conversation-events` under a deterministic event id, so a redelivered job produces a
 * duplicate the queue drops rather than a second event. Cancel signals kill the tool.
 */
import { create } from '@bufbuild/protobuf';
import { ConversationEventJobSchema, QUEUE_CONVERSATION_EVENTS, ToolExecJobSchema } from '@bedrock/contracts';
import type { Consumer, Transport } from '@bedrock/platform';
import { traceLogFieldsOf } from '@bedrock/platform/server';
import type { Logger } from '@bedrock/platform/server';
import type { ToolExecutor } from '../tool-executor.ts';
import { createOutputStreamer } from './output-streamer.ts';

export interface ToolExecWorkerOptions {
  readonly transport: Transport;
  readonly executor: ToolExecutor;
  /** The queues to consume. */
  readonly queues: readonly string[];
  readonly concurrency: number;
  readonly outputFlushMs: number;
  readonly outputStreamMaxBytes: number;
  readonly logger: Logger;
  /** Counts each finished job by queue and outcome (metrics). */
  readonly onJob?: (queue: string, outcome: 'completed' | 'failed' | 'cancelled', seconds: number, waitSeconds: number) => void;
}

export interface ToolExecWorker {
  close(graceMs?: number): Promise<void>;
}

/** The id of the result event: one per tool call, whatever runs it and however often. */
export function toolResultEventId(conversationId: string, toolUseId: string): string {
  return `tool-result/${conversationId}/${toolUseId}`;
}

export async function startToolExecWorker(options: ToolExecWorkerOptions): Promise<ToolExecWorker> {
  const { transport, executor, logger } = options;
  const results = transport.queues.producer(QUEUE_CONVERSATION_EVENTS, ConversationEventJobSchema);

  const unsubscribe = await transport.cancels.subscribe((signal) => {
    if (signal.target.case !== 'toolUseId') return;
    const found = executor.cancel(signal.target.value);
    if (found) logger.info({ conversationId: signal.conversationId, toolUseId: signal.target.value }, 'tool cancelled');
  });

  const consumers: Consumer[] = options.queues.map((queue) =>
    transport.queues.consume(
      queue,
      ToolExecJobSchema,
      async (job, signal) => {
        const data = job.data;
        const started = Date.now();
        const log = logger.child({ queue, jobId: job.id, conversationId: data.conversationId, toolUseId: data.toolUseId, tool: data.toolName, ...traceLogFieldsOf(data.traceContext) });
        // Shutting down without finishing: kill the tool and hand the job back for another runner.
        const onShutdown = (): void => {
          executor.cancel(data.toolUseId);
        };
        signal.addEventListener('abort', onShutdown, { once: true });
        const streamer = createOutputStreamer({
          streams: transport.streams,
          conversationId: data.conversationId,
          toolUseId: data.toolUseId,
          notifySequence: data.notifySequence,
          flushMs: options.outputFlushMs,
          maxChars: options.outputStreamMaxBytes,
          onError: (err) => log.debug({ err }, 'live output append failed'),
        });
        try {
          const result = await executor.execute(data, (text) => streamer.push(text));
          await streamer.close();
          if (signal.aborted) throw new Error('runner shutting down: job handed back');
          await results.add(toolResultEventId(data.conversationId, data.toolUseId), create(ConversationEventJobSchema, {
            eventId: toolResultEventId(data.conversationId, data.toolUseId),
            conversationId: data.conversationId,
            event: { case: 'toolComplete', value: result },
            traceContext: data.traceContext,
          }));
          const seconds = (Date.now() - started) / 1000;
          options.onJob?.(queue, result.cancelled ? 'cancelled' : 'completed', seconds, Math.max(0, started - job.readyAt) / 1000);
          log.info({ isError: result.isError, cancelled: result.cancelled, exitCode: result.exitCode, ms: Number(result.durationMs) }, 'tool finished');
        } catch (err) {
          await streamer.close();
          options.onJob?.(queue, 'failed', (Date.now() - started) / 1000, 0);
          log.warn({ err }, 'tool job failed');
          throw err;
        } finally {
          signal.removeEventListener('abort', onShutdown);
        }
      },
      { concurrency: options.concurrency },
    ),
  );

  return {
    async close(graceMs) {
      await Promise.all(consumers.map((c) => c.close(graceMs)));
      await unsubscribe();
    },
  };
}
