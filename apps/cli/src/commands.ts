/**
 * What the scriptable subcommands (docs/cli.md) share: their context (Ctx), following a
 * conversation's events, and the exit code of the state a turn rests in. The subcommands are in
 * commands-*.ts beside it (and workspaces.ts, checkpoints.ts); each returns its exit code.
 */
import { StateKind, type ConversationEvent, type ConversationState } from '@bedrock/contracts';
import type { ApiClient, WorkspacesClient } from './connection.ts';
import { EXIT } from './exit-codes.ts';
import type { Retry } from './retry.ts';
import { createEventRenderer, ndjson, type EventRenderer, type Output } from './render.ts';
import { describeState } from './render-conversation.ts';
import type { RenderOptions } from './render-style.ts';
import type { ResumeOptions } from './turn.ts';

export interface Ctx {
  readonly client: ApiClient;
  /** WorkspaceService, on the same connection. */
  readonly workspaces: WorkspacesClient;
  readonly output: Output;
  readonly json: boolean;
  readonly signal: AbortSignal;
  /** Runs a change with a fresh request id, retried with the same id on UNAVAILABLE / ABORTED (retry.ts). */
  readonly retry: Retry;
  /** How people's output looks (--hide-thinking, --full; colour on a terminal). */
  readonly render?: RenderOptions;
  /** How watches resume after a disconnect (BEDROCK_RETRY_FOR), and how that is announced. */
  readonly resume?: ResumeOptions;
  /** The terminal's width in columns (undefined: not a terminal), which `ls` fits its table to. */
  readonly width?: number | undefined;
  /** What the command follows now, so that Ctrl-C can say what is still running (dispatch.ts). */
  readonly following: Following;
}

/** The conversation a command follows and its last known state. */
export interface Following {
  id?: string;
  state?: ConversationState;
}

/**
 * What Ctrl-C leaves behind, in one line: the tool still running in the conversation, or the
 * agent still working (and how to stop it); undefined when it rests.
 */
export function stillRunning(following: Following): string | undefined {
  const { id, state } = following;
  if (!id || !state) return undefined;
  const stop = `\`bedrock cancel ${id}\` stops it`;
  if (state.kind === StateKind.TOOL_EXECUTING)
    return `the tool ${state.currentToolName || '(unnamed)'} is still running in conversation ${id} (${stop})`;
  if (state.kind === StateKind.IDLE || state.kind === StateKind.UNSPECIFIED || isAtRest(state.kind)) return undefined;
  return `the agent is still working in conversation ${id} (${describeState(state)}; ${stop})`;
}

function isAtRest(kind: StateKind): boolean {
  return [StateKind.COMPLETED, StateKind.FAILED, StateKind.ERROR, StateKind.CONTEXT_EXHAUSTED, StateKind.AWAITING_MODE_APPROVAL].includes(
    kind,
  );
}

/** The renderer of people's output, keeping `ctx.following` up to date. */
export function followingRenderer(ctx: Ctx, id: string, initial?: ConversationState): (event: ConversationEvent) => void {
  ctx.following.id = id;
  if (initial) ctx.following.state = initial;
  const render: EventRenderer | undefined = ctx.json ? undefined : createEventRenderer(ctx.output, ctx.render);
  return (event) => {
    if (event.kind.case === 'stateChanged' && event.kind.value.state) ctx.following.state = event.kind.value.state;
    if (event.kind.case === 'snapshot' && event.kind.value.conversation?.state) ctx.following.state = event.kind.value.conversation.state;
    if (render) render(event);
    else ctx.output.out(ndjson(event));
  };
}

/** The `· state` line at the end of a turn, unless the live output just said it. */
export function restLine(ctx: Ctx, rest: ConversationState): void {
  const said = describeState(rest);
  const last = ctx.following.state ? describeState(ctx.following.state) : undefined;
  if (said !== last) ctx.output.err(`· ${said}\n`);
}

export const json = (value: unknown) => `${JSON.stringify(value)}\n`;

/** Exit code for the state a turn came to rest in. */
export function restExit(state: ConversationState | undefined): number {
  switch (state?.kind) {
    case StateKind.IDLE:
    case StateKind.COMPLETED:
      return EXIT.ok;
    case StateKind.AWAITING_MODE_APPROVAL:
      return EXIT.awaitingApproval;
    case StateKind.CONTEXT_EXHAUSTED:
      return EXIT.exhausted;
    case undefined:
      return EXIT.interrupted;
    default:
      return EXIT.turnError;
  }
}
