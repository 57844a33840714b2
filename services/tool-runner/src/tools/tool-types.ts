import type { SandboxSettings, RunMode } from '../sandbox/sandbox-settings.ts';
import type { OutputCaptureOptions } from '../process/output-capture.ts';

/** What a tool gets to run with. */
export interface ToolContext {
  /** The conversation's fixed working directory. */
  readonly cwd: string;
  readonly mode: RunMode;
  /** Aborts on cancel: the tool kills what it started and returns promptly. */
  readonly signal: AbortSignal;
  /** Live output (bash), best effort. */
  readonly onOutput?: (text: string) => void;
  readonly sandbox: SandboxSettings;
  /** How much command output a result keeps (head and tail). */
  readonly capture: OutputCaptureOptions;
  /** The job's own tool user (the conversation owner's uid and gid), overriding the runner's tool user. */
  readonly user?: { readonly uid: number; readonly gid: number };
  /** The job's workspace (a real path, containing cwd): what the tool sees and may write. */
  readonly workspace?: string;
}

/** A tool's answer; the runner adds the ids, runner id and duration. */
export interface ToolOutcome {
  /** What the model sees. */
  readonly content: string;
  readonly isError: boolean;
  /** For user interfaces (e.g. `{ diff }` for patch). */
  readonly display?: Record<string, unknown>;
  /** bash: the exit code; -1 when killed or not applicable. */
  readonly exitCode: number;
  readonly cancelled: boolean;
}

export function errorOutcome(content: string, display?: Record<string, unknown>): ToolOutcome {
  return { content, isError: true, exitCode: -1, cancelled: false, ...(display ? { display } : {}) };
}

export const CANCELLED_OUTCOME: ToolOutcome = {
  content: 'Cancelled by the user.',
  isError: true,
  exitCode: -1,
  cancelled: true,
};
