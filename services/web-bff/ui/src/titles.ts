/**
 * What a conversation is called on screen: its title (`Conversation.title`, set by the service
 * from the first message or by a rename), in the list, the header, the page title and wherever a
 * sub-agent is named. Also what the list's search sends, and how a sub-agent's id in a text
 * (the spawn_agents result names each agent by its 68-character id) becomes its title.
 * Pure functions, tested in Node (test/ui-titles.test.ts).
 */
import type { Conversation } from '@bedrock/contracts';

/** A conversation without a title yet (no message with words). */
export const UNTITLED = 'New conversation';
/** A sub-agent without a title yet (its task gives it one as it starts). */
export const UNTITLED_SUB_AGENT = 'Sub-agent';
/** How long the search waits after the last keystroke before it asks the server. */
export const SEARCH_DELAY_MS = 200;
/** The service refuses longer queries (INVALID_ARGUMENT). */
export const SEARCH_MAX = 200;

export function conversationTitle(c: Pick<Conversation, 'title' | 'parentId'>): string {
  return c.title.trim() || (c.parentId ? UNTITLED_SUB_AGENT : UNTITLED);
}

/** What `ListConversations.query` gets for what is typed in the search box ('' lists everything). */
export function searchQuery(typed: string): string {
  return typed.trim().slice(0, SEARCH_MAX);
}

/** A piece of text: as written, or a sub-agent's id to show by its title. */
export type Piece = string | { readonly id: string; readonly title: string };

/**
 * Splits `text` where it names a sub-agent of conversation `parentId` by id (a sub-agent's id is
 * `<parent id>--<tool use id>--<index>`), so each can be shown by its title (from `titles`, else
 * "sub-agent N", N counted from 1) and link to its transcript.
 */
export function subAgentPieces(text: string, parentId: string, titles: ReadonlyMap<string, string>): Piece[] {
  if (!parentId || !text.includes(`${parentId}--`)) return [text];
  const re = new RegExp(`${escapeRegExp(parentId)}--[A-Za-z0-9_-]+?--(\\d+)(?![\\w-])`, 'g');
  const pieces: Piece[] = [];
  let last = 0;
  for (const m of text.matchAll(re)) {
    const id = m[0];
    if (m.index > last) pieces.push(text.slice(last, m.index));
    pieces.push({ id, title: titles.get(id) || `sub-agent ${Number(m[1]) + 1}` });
    last = m.index + id.length;
  }
  if (last < text.length) pieces.push(text.slice(last));
  return pieces;
}

/** `text` with every sub-agent id of `parentId` replaced by its title in quotes (for text drawn as Markdown). */
export function withSubAgentTitles(text: string, parentId: string, titles: ReadonlyMap<string, string>): string {
  const pieces = subAgentPieces(text, parentId, titles);
  if (pieces.length === 1 && typeof pieces[0] === 'string') return text;
  return pieces.map((p) => (typeof p === 'string' ? p : `“${escapeMarkdown(p.title)}”`)).join('');
}

function escapeRegExp(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

function escapeMarkdown(s: string): string {
  return s.replace(/[\\`*_{}[\]()#+!<>|~]/g, '\\$&');
}

/** A sub-agent's place among its parent's: the spawn_agents call that made it and its index in that call. */
function spawnOf(id: string): { call: string; index: number } {
  const m = /--((?:(?!--).)+)--(\d+)$/.exec(id);
  return m ? { call: m[1]!, index: Number(m[2]) } : { call: id, index: 0 };
}

/**
 * Sub-agents in the order they were asked for: by spawn call (its first creation time), then by
 * their index in the call (the agents of one call are created in parallel, in any order).
 */
export function inSpawnOrder<T extends { readonly id: string; readonly createdMs: number }>(agents: readonly T[]): T[] {
  const firstOfCall = new Map<string, number>();
  for (const a of agents) {
    const { call } = spawnOf(a.id);
    firstOfCall.set(call, Math.min(firstOfCall.get(call) ?? Infinity, a.createdMs));
  }
  return [...agents].sort((a, b) => {
    const sa = spawnOf(a.id);
    const sb = spawnOf(b.id);
    if (sa.call !== sb.call) return firstOfCall.get(sa.call)! - firstOfCall.get(sb.call)! || (sa.call < sb.call ? -1 : 1);
    return sa.index - sb.index;
  });
}
