/**
 * Runs ToolExecJobs into ToolCompleteEvents: de-duplication by tool_use_id, cancel, timing
 * and the runner id. Shared by the queue worker and the gRPC service.
 */
import { create } from '@bufbuild/protobuf';
import { ToolCompleteEventSchema } from '@bedrock/contracts';
import type { ToolCompleteEvent, ToolExecJob } from '@bedrock/contracts';
import { createRunRegistry } from '@bedrock/platform';
import { executeTool } from './tools/execute-tool.ts';
import type { ExecuteContext } from './tools/job-context.ts';
import { CANCELLED_OUTCOME, errorOutcome } from './tools/tool-types.ts';
import type { ToolOutcome } from './tools/tool-types.ts';

export interface ToolExecutor {
  /**
   * Runs the job (or joins the run of the same tool_use_id already in progress, or returns
   * its result if it finished in the last 10 minutes) and returns its result. `onOutput`
   * receives live output of this call's run.
   */
  execute(job: ToolExecJob, onOutput?: (text: string) => void): Promise<ToolCompleteEvent>;
  /**
   * The run of this tool_use_id in progress here (joined, with `onOutput`), or its result if it
   * finished here in the last 10 minutes; undefined otherwise. Never starts a run.
   */
  existing(toolUseId: string, onOutput?: (text: string) => void): Promise<ToolCompleteEvent> | undefined;
  /**
   * Kills the tool's process group. False when it is not running here; the cancel is remembered
   * either way (10 minutes), so a job of this tool_use_id arriving later is answered cancelled.
   */
  cancel(toolUseId: string): boolean;
  /** Kills every tool of the conversation running here; returns how many. */
  cancelConversation(conversationId: string): number;
  /** Tools running now. */
  readonly active: number;
  /** Cancels everything and waits for it to end (shutdown). */
  abortAll(): Promise<void>;
}

export interface ToolExecutorOptions {
  readonly runnerId: string;
  readonly context: Omit<ExecuteContext, 'signal' | 'onOutput'>;
  /** Called after each run with its tool, outcome and duration (metrics, logs). */
  readonly onComplete?: (job: ToolExecJob, outcome: ToolOutcome, durationMs: number) => void;
}

/** Finished results are kept this long, ms, so a retried or redelivered job is answered again without running twice. */
const RECENT_TTL_MS = 10 * 60_000;
/** At most this many finished results are kept (oldest dropped first). */
const RECENT_MAX = 2000;

export function createToolExecutor(options: ToolExecutorOptions): ToolExecutor {
  // The tool calls running here, by tool_use_id (platform's run registry: joins, cancels, early cancels).
  const running = createRunRegistry<ToolCompleteEvent>();
  const listeners = new Map<string, Set<(text: string) => void>>();
  // A job is retried when publishing its result failed (Redis hiccup) and redelivered when a
  // consumer stalled: the command must not run again on this runner for either.
  const recent = new Map<string, { result: ToolCompleteEvent; expires: number }>();
  const remember = (toolUseId: string, result: ToolCompleteEvent): void => {
    recent.delete(toolUseId);
    recent.set(toolUseId, { result, expires: Date.now() + RECENT_TTL_MS });
    while (recent.size > RECENT_MAX) recent.delete(recent.keys().next().value as string);
  };

  async function run(job: ToolExecJob, signal: AbortSignal): Promise<ToolCompleteEvent> {
    const started = performance.now();
    let outcome: ToolOutcome;
    if (signal.aborted) {
      outcome = CANCELLED_OUTCOME;
    } else {
      try {
        outcome = await executeTool(job, {
          ...options.context,
          signal,
          onOutput: (text) => {
            for (const listener of listeners.get(job.toolUseId) ?? []) listener(text);
          },
        });
      } catch (err) {
        // A bug or an I/O failure of the runner itself: still an answer the model can read.
        outcome = errorOutcome(`The tool-runner failed to run ${job.toolName}: ${(err as Error).message}`);
      }
    }
    const durationMs = Math.round(performance.now() - started);
    options.onComplete?.(job, outcome, durationMs);
    return create(ToolCompleteEventSchema, {
      toolUseId: job.toolUseId,
      content: outcome.content,
      isError: outcome.isError,
      displayJson: outcome.display ? JSON.stringify(outcome.display) : '',
      cancelled: outcome.cancelled,
      exitCode: outcome.exitCode,
      durationMs: BigInt(durationMs),
      runnerId: options.runnerId,
    });
  }

  /** Runs `work` with `onOutput` receiving the live output of `toolUseId` meanwhile. */
  async function listening<T>(toolUseId: string, onOutput: ((text: string) => void) | undefined, work: () => Promise<T>): Promise<T> {
    if (!onOutput) return work();
    const set = listeners.get(toolUseId) ?? new Set();
    listeners.set(toolUseId, set);
    set.add(onOutput);
    try {
      return await work();
    } finally {
      set.delete(onOutput);
      if (set.size === 0) listeners.delete(toolUseId);
    }
  }

  function known(toolUseId: string): ToolCompleteEvent | undefined {
    const entry = recent.get(toolUseId);
    return entry && entry.expires > Date.now() ? entry.result : undefined;
  }

  return {
    execute(job, onOutput) {
      return listening(job.toolUseId, onOutput, async () => {
        const result =
          known(job.toolUseId) ?? (await running.run({ id: job.toolUseId, conversationId: job.conversationId }, (r) => run(job, r.signal)));
        remember(job.toolUseId, result);
        return result;
      });
    },
    existing(toolUseId, onOutput) {
      const finished = known(toolUseId);
      if (finished) return Promise.resolve(finished);
      const inProgress = running.get(toolUseId);
      return inProgress && listening(toolUseId, onOutput, () => inProgress);
    },
    cancel: (toolUseId) => running.cancel(toolUseId),
    cancelConversation: (conversationId) => running.cancelConversation(conversationId),
    get active() {
      return running.size;
    },
    async abortAll() {
      running.abortAll('the tool-runner is stopping');
      await running.idle();
    },
  };
}
