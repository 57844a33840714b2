/**
 * The queue side of the runner, kept thin: consume `tool-exec` (and `tool-exec-restricted` when the
 * sandbox works here), run the job, stream live output, and send the result to `conversation-events`
 * under a deterministic event id, so a redelivered job produces a duplicate the queue drops rather
 * than a second event. Cancel signals kill the tool. A tool's side effect happens at most once
 * (`startToolExecWorker`; docs/tool-runner.md, "At most once").
 */
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { create, fromJsonString, toJsonString } from '@bufbuild/protobuf';
import {
  ConversationEventJobSchema,
  QUEUE_CONVERSATION_EVENTS,
  ToolCompleteEventSchema,
  ToolExecJobSchema,
  toolResultEventId,
  toolRunKey,
} from '@bedrock/contracts';
import type { ToolCompleteEvent, ToolExecJob } from '@bedrock/contracts';
import { createLiveOutput, followCancels } from '@bedrock/platform';
import type { Consumer, Transport } from '@bedrock/platform';
import { inSpan, instrumentJob, jobTraceLogFields, traceCarrier } from '@bedrock/platform/server';
import type { Logger, Metrics } from '@bedrock/platform/server';
import type { ToolExecutor } from '../tool-executor.ts';

export { toolResultEventId };

export interface ToolExecWorkerOptions {
  readonly transport: Transport;
  readonly executor: ToolExecutor;
  /** Unique per process among runners (the runner id); claims are made as `<runnerId>#<random>`. */
  readonly runnerId: string;
  /** The queues to consume. */
  readonly queues: readonly string[];
  readonly concurrency: number;
  readonly outputFlushMs: number;
  readonly outputStreamMaxBytes: number;
  readonly logger: Logger;
  /** The job metrics of each queue (platform's `instrumentJob`); none recorded without. */
  readonly metrics?: Metrics;
}

export interface ToolExecWorker {
  /**
   * Stops taking jobs; running tools get `graceMs` to finish, then are killed and reported
   * interrupted (never handed back to run again).
   */
  close(graceMs?: number): Promise<void>;
}

/** After the grace, killed tools have this long to report "interrupted" before their jobs are handed back anyway. */
const REPORT_AFTER_KILL_MS = 3000;

/** The result of a tool call whose run was cut off: what the model and the user see. */
export function interruptedResult(job: Pick<ToolExecJob, 'toolUseId' | 'toolName'>, runnerId: string): ToolCompleteEvent {
  const what = job.toolName === 'bash' ? 'command' : `${job.toolName || 'tool'} call`;
  return create(ToolCompleteEventSchema, {
    toolUseId: job.toolUseId,
    content: `The tool-runner stopped while this ${what} was running (it may have partly run); it was not run again.`,
    isError: true,
    cancelled: false,
    exitCode: -1,
    displayJson: JSON.stringify({ interrupted: true }),
    runnerId,
  });
}

const encode = (result: ToolCompleteEvent) => toJsonString(ToolCompleteEventSchema, result);
const decode = (json: string) => fromJsonString(ToolCompleteEventSchema, json, { ignoreUnknownFields: true });

/** `<runnerId>#<random>` → runnerId. */
const runnerOf = (owner: string) => owner.slice(0, owner.lastIndexOf('#'));

/**
 * A tool's side effect happens at most once (docs/design.md, "Side effects after a crash"): the
 * runner claims the call in the run ledger before starting it and records its result after. A
 * redelivered job whose call was claimed elsewhere is not run again: it gets the recorded result,
 * waits for the run when its owner is alive, or — the owner died — is answered with an
 * "interrupted, may have partly run" result. A shutdown lets running tools finish within the grace
 * and reports the ones it has to kill as interrupted; none is handed back to run again.
 */
export async function startToolExecWorker(options: ToolExecWorkerOptions): Promise<ToolExecWorker> {
  const { transport, executor, logger } = options;
  const ledger = transport.runs;
  const results = transport.queues.producer(QUEUE_CONVERSATION_EVENTS, ConversationEventJobSchema);
  // This process's identity in the ledger: a restarted runner with the same id is another owner.
  const owner = `${options.runnerId}#${randomBytes(6).toString('hex')}`;
  // Tool calls this process claimed and is running, and those it killed because it is shutting down.
  const claimedHere = new Set<string>();
  const killedForShutdown = new Set<string>();

  const unsubscribe = await followCancels(transport.cancels, 'toolUseId', executor, (signal, found) => {
    if (found > 0) logger.info({ conversation_id: signal.conversationId, tool_use_id: signal.target.value, found }, 'tool cancelled');
  });

  /** Records `interrupted` unless a result is recorded already (which then wins). */
  async function settleInterrupted(key: string, data: ToolExecJob): Promise<ToolCompleteEvent> {
    const record = await ledger.settle(key, encode(interruptedResult(data, options.runnerId)));
    return decode(record.result!);
  }

  /** Runs a call this process claimed, keeping the claim alive; the handler records its result (`ran`). */
  async function runClaimed(key: string, data: ToolExecJob, onOutput: (text: string) => void, log: Logger): Promise<ToolCompleteEvent> {
    claimedHere.add(data.toolUseId);
    const beat = setInterval(() => {
      ledger.heartbeat(key, owner).catch((err: unknown) => log.warn({ err }, 'run heartbeat failed'));
    }, ledger.heartbeatMs);
    let result: ToolCompleteEvent;
    try {
      result = await executor.execute(data, onOutput);
    } finally {
      clearInterval(beat);
      claimedHere.delete(data.toolUseId);
    }
    if (killedForShutdown.delete(data.toolUseId) && result.cancelled) result = interruptedResult(data, options.runnerId);
    return result;
  }

  /** Another live process runs the call: wait for its result, or for it to die. */
  async function waitForOwner(key: string, data: ToolExecJob, signal: AbortSignal): Promise<ToolCompleteEvent> {
    for (;;) {
      const record = await ledger.get(key);
      if (!record) return settleInterrupted(key, data);
      if (record.state === 'finished' && record.result) return decode(record.result);
      if (!record.alive) return settleInterrupted(key, data);
      // Four looks per heartbeat: a dead owner is noticed soon after its liveness lapses.
      await sleep(Math.max(50, ledger.heartbeatMs / 4), undefined, { signal });
    }
  }

  /** The result of the call, running it only if nobody started it before. */
  async function resultOf(
    data: ToolExecJob,
    signal: AbortSignal,
    onOutput: (text: string) => void,
    log: Logger,
  ): Promise<[ToolCompleteEvent, 'ran' | 'recorded' | 'interrupted' | 'waited']> {
    const key = toolRunKey(data.conversationId, data.toolUseId);
    const record = await ledger.claim(key, owner);
    if (record === null) return [await runClaimed(key, data, onOutput, log), 'ran'];
    if (record.state === 'finished' && record.result) return [decode(record.result), 'recorded'];
    if (record.owner === owner) {
      // Redelivered to this very process (its lock lapsed): join the run, or take its result.
      const existing = executor.existing(data.toolUseId, onOutput);
      if (existing) return [await existing, 'recorded'];
    } else if (runnerOf(record.owner) !== options.runnerId && record.alive) {
      log.warn({ owner: record.owner }, 'tool call is running on another runner: waiting for its result');
      return [await waitForOwner(key, data, signal), 'waited'];
    }
    // Its owner is gone (died, or an earlier process of this runner): never run it again.
    log.warn({ owner: record.owner }, 'tool call was started before by a runner that stopped: answering interrupted, not running it again');
    return [await settleInterrupted(key, data), 'interrupted'];
  }

  const consumers: Consumer[] = options.queues.map((queue) =>
    transport.queues.consume(
      queue,
      ToolExecJobSchema,
      // Jobs started, in flight and finished by outcome, their duration and queue wait.
      instrumentJob(options.metrics, queue, async (job, signal) => {
        const data = job.data;
        const log = logger.child({
          queue,
          job_id: job.id,
          conversation_id: data.conversationId,
          tool_use_id: data.toolUseId,
          tool: data.toolName,
          ...jobTraceLogFields(data.traceContext),
        });
        // Handed back (the shutdown could not report in time): kill what still runs here.
        const onHandBack = (): void => {
          if (claimedHere.has(data.toolUseId)) executor.cancel(data.toolUseId);
        };
        signal.addEventListener('abort', onHandBack, { once: true });
        // Live output (platform's live-output rules), throttled and capped per call.
        const streamer = createLiveOutput<null>({
          streams: transport.streams,
          conversationId: data.conversationId,
          sequence: data.notifySequence,
          kind: (text) => ({ case: 'toolOutput', value: { toolUseId: data.toolUseId, text } }),
          minIntervalMs: options.outputFlushMs,
          maxChars: options.outputStreamMaxBytes,
          onError: (err) => log.debug({ err }, 'live output append failed'),
        });
        try {
          // One tool run: the `execute_tool <name>` span of the GenAI conventions.
          const [result, how] = await inSpan(
            `execute_tool ${data.toolName}`,
            { attributes: executeToolAttributes(data.toolName, data.toolUseId) },
            async (span) => {
              const ran = await resultOf(data, signal, (text) => streamer.push(text, null), log);
              if (ran[0].isError) span.setAttribute('error.type', 'tool_error');
              return ran;
            },
          );
          await streamer.close();
          // A call run here is recorded in the ledger and sent at once, not one round trip after
          // the other: a redelivery after either finds the result recorded or answered (the same
          // event id), and if recording fails the job fails as before.
          await Promise.all([
            how === 'ran' ? ledger.finish(toolRunKey(data.conversationId, data.toolUseId), owner, encode(result)) : null,
            results.add(
              toolResultEventId(data.conversationId, data.toolUseId),
              create(ConversationEventJobSchema, {
                eventId: toolResultEventId(data.conversationId, data.toolUseId),
                conversationId: data.conversationId,
                event: { case: 'toolComplete', value: result },
                // Under the job's consumer span (the job's own context with tracing off).
                traceContext: traceCarrier(data.traceContext),
              }),
            ),
          ]);
          const interrupted = how === 'interrupted' || result.displayJson === interruptedDisplay;
          log.info(
            {
              is_error: result.isError,
              cancelled: result.cancelled,
              interrupted,
              how,
              exit_code: result.exitCode,
              ms: Number(result.durationMs),
            },
            'tool finished',
          );
          return interrupted ? 'interrupted' : result.cancelled ? 'cancelled' : 'completed';
        } catch (err) {
          await streamer.close();
          log.warn({ err }, 'tool job failed');
          throw err;
        } finally {
          signal.removeEventListener('abort', onHandBack);
        }
      }),
      { concurrency: options.concurrency },
    ),
  );

  return {
    async close(graceMs = 10_000) {
      // After the grace, kill what still runs: each job then reports its call interrupted
      // (recorded in the ledger and sent) and completes, instead of going back to the queue.
      const killer = setTimeout(() => {
        for (const toolUseId of claimedHere) {
          killedForShutdown.add(toolUseId);
          executor.cancel(toolUseId);
        }
      }, graceMs);
      try {
        await Promise.all(consumers.map((c) => c.close(graceMs + REPORT_AFTER_KILL_MS)));
      } finally {
        clearTimeout(killer);
      }
      await unsubscribe();
    },
  };
}

const interruptedDisplay = JSON.stringify({ interrupted: true });

/** Attributes of an `execute_tool <name>` span (OpenTelemetry GenAI tool spans). */
function executeToolAttributes(name: string, toolUseId: string): Record<string, string> {
  return { 'gen_ai.operation.name': 'execute_tool', 'gen_ai.tool.name': name, 'gen_ai.tool.call.id': toolUseId };
}
