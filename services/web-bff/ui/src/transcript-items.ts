/**
 * The transcript's items as data (transcript-model.ts builds them, transcript.tsx draws them):
 * your messages, the agent's answers with their parts and tool cards, notices, sub-agents.
 */
import type { ContentBlock, StopReason, SubAgentProgress } from '@bedrock/contracts';
import type { Source, SourceNumbers } from '@bedrock/agent-view/agent-content';

export type ToolStatus = 'waiting' | 'running' | 'ok' | 'error' | 'cancelled';

export interface ToolCard {
  readonly id: string;
  readonly name: string;
  readonly summary: string;
  /** The input, when it says more than the summary. */
  readonly input: string | undefined;
  status: ToolStatus;
  /** Output streamed while it runs (dropped when the result arrives). */
  live: string;
  result?: { readonly patch?: { diff: string; path: string; created: boolean }; readonly output?: string; readonly isError: boolean };
  rev: number;
}

export type ServerResult =
  | { readonly kind: 'search-results'; readonly line: string; readonly results: readonly Source[] }
  | { readonly kind: 'fetch-result'; readonly source: Source }
  | { readonly kind: 'error'; readonly line: string };

export interface ServerToolCard {
  readonly kind: 'search' | 'fetch' | 'other' | 'result';
  /** The head line; a fetch shows its address as a link instead. */
  readonly line: string;
  readonly fetched?: Source;
  readonly results: ServerResult[];
  rev: number;
}

/** A response streaming in: its thinking, the provider's compaction summary and its answer text, by block index. */
export interface Live {
  readonly requestId: string;
  readonly thinking: Map<number, string>;
  /** `COMPACTION` deltas: shown as progress, collapsed, never as answer text. */
  readonly compaction: Map<number, string>;
  readonly text: Map<number, string>;
  rev: number;
}

export type CitedPiece = string | { readonly n: number; readonly source: Source };

export type Part =
  | { readonly kind: 'text'; readonly key: string; readonly text: string }
  | { readonly kind: 'cited'; readonly key: string; readonly pieces: readonly CitedPiece[] }
  | { readonly kind: 'thinking'; readonly key: string; readonly summary: string; readonly text: string }
  | { readonly kind: 'thinking-note'; readonly key: string; readonly text: string }
  /** The provider's compaction of the context: a marked line, its summary collapsed under it. */
  | { readonly kind: 'compaction'; readonly key: string; readonly summary: string; readonly text: string }
  | { readonly kind: 'tool'; readonly key: string; readonly card: ToolCard }
  | { readonly kind: 'server-tool'; readonly key: string; readonly card: ServerToolCard }
  | { readonly kind: 'live'; readonly key: string; readonly live: Live };

export interface Marker {
  readonly text: string;
  readonly stop: 'max-tokens' | 'refusal' | 'cancelled' | '';
  readonly role?: 'note' | 'alert';
  /** The refusal's marker also says the error message that followed it. */
  readonly error: boolean;
}

/**
 * An agent answer keeps its thinking apart from the answer text, the provider's own tools (web
 * searches and fetches, with their results), numbered sources after text that cites them, and
 * how it ended when that matters: cut by the output limit, or declined by the model (together
 * with the error message that follows a refusal, said once). A response the provider paused
 * and the one that continues it are one answer.
 *
 * Your messages and the agent's answers at rest carry `forkAt`, the sequence of the last
 * message a fork "from here" copies: the user message itself; for an answer, the answer, or
 * once every tool it called has its result, the message with the last result (a history cannot
 * end between a tool call and its result). An answer still waiting for a result, or paused by
 * the provider, has none.
 */
export interface AgentItem {
  readonly kind: 'agent';
  readonly key: string;
  parts: Part[];
  readonly sources: SourceNumbers;
  stop: StopReason;
  explanation: string;
  marker?: Marker;
  usageText: string;
  readonly usage: { thinkingTokens: bigint; webSearchRequests: bigint; webFetchRequests: bigint };
  at?: number;
  /** Where a fork from this answer ends its copy (see above); unset while it is not at rest. */
  forkAt?: bigint;
  /**
   * Still streaming: its one part is the live response. The persisted message turns the same
   * item (same key, and its text part the live part's key) into the answer, so what streamed is
   * kept on screen as it is rather than drawn again.
   */
  streaming?: boolean;
  rev: number;
}

/**
 * Every item and card carries `rev`, bumped when it changes: the view re-renders an item only
 * when its rev moved, so a delta re-renders the streaming answer and nothing else.
 */
export type Item =
  | {
      readonly kind: 'user';
      readonly key: string;
      readonly blocks: readonly ContentBlock[];
      readonly at?: number;
      /** The message's sequence: a fork from here copies up to it. */
      readonly forkAt: bigint;
      rev: number;
    }
  | AgentItem
  | {
      readonly kind: 'notice';
      readonly key: string;
      readonly tone: 'info' | 'warn' | 'error';
      /** What it is: a system or error message, a retry, a context warning. */
      readonly type: 'system' | 'error' | 'retry' | 'context' | 'other';
      readonly text: string;
      readonly at?: number;
      rev: number;
    }
  | { readonly kind: 'continuation'; readonly key: string; readonly text: string; readonly at?: number; rev: number }
  | { readonly kind: 'subagent'; readonly key: string; progress: SubAgentProgress; rev: number };

/** A fresh key for an item or part that has no id of its own. */
let keys = 0;
export const nextKey = (prefix: string) => `${prefix}-${++keys}`;
