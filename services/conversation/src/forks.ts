/**
 * Where a conversation can be forked (docs/conversation.md, "Forks"): the messages after which
 * a copied history is a valid chain for the Messages API once a user message follows it. Pure:
 * the API reads the source's messages and asks this module, the store copies them.
 */
import {
  buildLlmHistory,
  checkToolChain,
  MODE_NOTICE_RESTRICTED,
  MODE_NOTICE_UNRESTRICTED,
  type ContentBlock,
  type HistoryMessage,
  type MessageType,
  type StopReason,
  UPGRADE_APPROVED,
} from './core/index.ts';
import { MAX_TITLE_CHARS } from './titles.ts';

/** A stored message as this module needs it. */
export interface ForkMessage {
  readonly sequence: number;
  readonly type: MessageType;
  readonly content: readonly ContentBlock[];
  readonly stopReason: StopReason | null;
}

/** Why a history cannot end after a message; null when it can. */
export type ForkBlocker = { readonly kind: 'open_tool_call'; readonly askedAt: number } | { readonly kind: 'paused_turn' } | null;

/**
 * For every message, in order, what keeps the history from ending right after it (null: a fork
 * point). A history may end after message N when
 * - every tool_use asked by message N or before is answered by a tool result by message N
 *   (never splitting a call from its result, which the API refuses), and
 * - message N is not a response the provider paused mid-turn with its own tool blocks (the model
 *   resumes such a turn in the next response, which a fork would never get).
 * Any other end is fine: the fork starts idle, so the next request ends with the user's next
 * message (a history ending in a user message merges with it; error and continuation messages
 * are for people and never sent).
 */
export function forkBlockers(messages: readonly ForkMessage[]): ForkBlocker[] {
  // tool_use id → the sequence of the message that asked for it
  const open = new Map<string, number>();
  return messages.map((m) => {
    if (m.type === 'agent') for (const b of m.content) if (b.type === 'tool_use') open.set(b.id, m.sequence);
    if (m.type === 'tool') for (const b of m.content) if (b.type === 'tool_result') open.delete(b.toolUseId);
    if (open.size > 0) return { kind: 'open_tool_call', askedAt: Math.min(...open.values()) };
    if (m.type === 'agent' && m.stopReason === 'pause_turn' && m.content.some((b) => b.type === 'server_tool')) {
      return { kind: 'paused_turn' };
    }
    return null;
  });
}

/** The result of choosing where to fork: the last message to copy, or why `at` cannot be. */
export type ForkPoint =
  | { readonly kind: 'ok'; readonly through: number }
  | { readonly kind: 'empty' }
  | { readonly kind: 'beyond'; readonly last: number }
  | { readonly kind: 'invalid'; readonly problem: string };

/** The text the model reads after a history that ends with the user's next message (any non-empty text). */
const PROBE: HistoryMessage = { type: 'user', content: [{ type: 'text', text: 'next message' }] };

/**
 * The last message to copy for a fork at `at` (a message sequence; 0: the latest point the
 * history can end, which is the whole history when the source is at rest). `messages` are all
 * of the source's, ordered by sequence (1, 2, …). The result is checked once more with the
 * history builder itself (core/history.ts), so a rule of the builder that {@link forkBlockers}
 * missed refuses the fork rather than making a conversation whose every request fails.
 */
export function chooseForkPoint(messages: readonly ForkMessage[], at: number): ForkPoint {
  if (messages.length === 0) return { kind: 'empty' };
  const last = messages[messages.length - 1]!.sequence;
  if (at > last) return { kind: 'beyond', last };
  const blockers = forkBlockers(messages);
  const valid = messages.filter((_, i) => blockers[i] === null).map((m) => m.sequence);
  let through = at;
  if (at === 0) {
    const latest = valid.at(-1);
    if (latest === undefined) return { kind: 'invalid', problem: 'no message of this conversation ends a complete exchange yet' };
    through = latest;
  }
  const index = messages.findIndex((m) => m.sequence === through);
  if (index < 0) return { kind: 'invalid', problem: `the conversation has no message ${through}` };
  const blocker = blockers[index]!;
  if (blocker) return { kind: 'invalid', problem: describe(through, blocker, valid) };
  const history = messages
    .slice(0, index + 1)
    .map((m): HistoryMessage =>
      m.stopReason ? { type: m.type, content: m.content, stopReason: m.stopReason } : { type: m.type, content: m.content },
    );
  const turns = buildLlmHistory([...history, PROBE]);
  const problems = checkToolChain(turns);
  if (problems.length > 0 || turns.at(-1)?.role !== 'user') {
    return { kind: 'invalid', problem: `the history up to message ${through} is not one the model accepts (${problems.join('; ')})` };
  }
  return { kind: 'ok', through };
}

function describe(at: number, blocker: NonNullable<ForkBlocker>, valid: readonly number[]): string {
  const before = [...valid].reverse().find((s) => s < at);
  const after = valid.find((s) => s > at);
  const why =
    blocker.kind === 'open_tool_call'
      ? `${
          blocker.askedAt === at
            ? `message ${at} asks for tools whose results would be left out`
            : `message ${at} falls between the tool call of message ${blocker.askedAt} and its last result`
        }, and a history cannot split a tool call from its result`
      : `message ${at} is a response the provider paused mid-turn (the model resumes it in the next response)`;
  const options = [
    before !== undefined ? `at message ${before}${blocker.kind === 'open_tool_call' ? ' (before the call)' : ''}` : null,
    after !== undefined
      ? `at message ${after}${blocker.kind === 'open_tool_call' ? ' (after its results)' : ''}`
      : 'later, once the turn has moved on',
  ].filter((o): o is string => o !== null);
  return `${why}: fork ${options.join(' or ')}`;
}

/**
 * Whether the copied history leaves the model believing it is Unrestricted — its last word on
 * the mode is the Unrestricted notice, or an approved upgrade whose notice was not copied (it
 * follows the turn's other results): a fork starts Restricted, so it needs the Restricted notice
 * after the copy.
 */
export function needsRestrictedNotice(copied: readonly ForkMessage[]): boolean {
  for (let i = copied.length - 1; i >= 0; i--) {
    const m = copied[i]!;
    if (m.type === 'system') {
      const text = m.content.map((b) => (b.type === 'text' ? b.text : '')).join('');
      if (text === MODE_NOTICE_UNRESTRICTED) return true;
      if (text === MODE_NOTICE_RESTRICTED) return false;
    }
    if (m.type === 'tool' && m.content.some((b) => b.type === 'tool_result' && b.content === UPGRADE_APPROVED)) return true;
  }
  return false;
}

/** The notice appended for {@link needsRestrictedNotice}: the one a downgrade persists. */
export const RESTRICTED_NOTICE: readonly ContentBlock[] = [{ type: 'text', text: MODE_NOTICE_RESTRICTED }];

/** A fork's title: "Fork of <the source's title, or its slug>", within the title limit. */
export function forkTitle(source: { readonly title: string | null; readonly slug: string }): string {
  const title = `Fork of ${source.title ?? source.slug}`;
  const chars = Array.from(title);
  return chars.length <= MAX_TITLE_CHARS ? title : `${chars.slice(0, MAX_TITLE_CHARS - 1).join('')}…`;
}
