/**
 * Runs ToolExecJobs into ToolCompleteEvents: de-duplication by tool_use_id, cancel, timing
 * and the runner id. Shared by the queue worker and the gRPC service.
 */
import { create } from '@bufbuild/protobuf';
import { ToolCompleteEventSchema } from '@bedrock/contracts';
import type { ToolCompleteEvent, ToolExecJob } from '@bedrock/contracts';
import { RunningTools } from './running-tools.ts';
import { executeTool } from './tools/execute-tool.ts';
import type { ExecuteContext } from './tools/execute-tool.ts';
import { CANCELLED_OUTCOME, errorOutcome } from './tools/tool-types.ts';
import type { ToolOutcome } from './tools/tool-types.ts';

export interface ToolExecutor {
  /**
   * Runs the job (or joins the run of the same tool_use_id already in progress) and returns
   * its result. `onOutput` receives live output of this call's run.
   */
  execute(job: ToolExecJob, onOutput?: (text: string) => void): Promise<ToolCompleteEvent>;
  /** Kills the tool's process group. False when it is not running here. */
  cancel(toolUseId: string): boolean;
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

export function createToolExecutor(options: ToolExecutorOptions): ToolExecutor {
  const running = new RunningTools<ToolCompleteEvent>();
  const listeners = new Map<string, Set<(text: string) => void>>();

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

  return {
    async execute(job, onOutput) {
      let set: Set<(text: string) => void> | undefined;
      if (onOutput) {
        set = listeners.get(job.toolUseId) ?? new Set();
        listeners.set(job.toolUseId, set);
        set.add(onOutput);
      }
      try {
        return await running.run(job.toolUseId, (signal) => run(job, signal));
      } finally {
        if (set && onOutput) {
          set.delete(onOutput);
          if (set.size === 0) listeners.delete(job.toolUseId);
        }
      }
    },
    cancel: (toolUseId) => running.cancel(toolUseId),
    get active() {
      return running.size;
    },
    async abortAll() {
      running.cancelAll();
      await running.idle();
    },
  };
}
