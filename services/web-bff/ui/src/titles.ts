/**
 * What a conversation is called on screen. Today its slug (or its id); when the service keeps
 * titles (from the first message or asked of the model, renamable) this is the one place that
 * shows them, in the list, the header and the page title, and what the list's search matches.
 */
import type { Conversation } from '@bedrock/contracts';

export function conversationTitle(c: Pick<Conversation, 'id' | 'slug'>): string {
  return c.slug || c.id;
}

/** Whether a conversation matches the list's search (its title or its directory, any case). */
export function matchesSearch(c: Pick<Conversation, 'id' | 'slug' | 'cwd'>, query: string): boolean {
  const q = query.trim().toLowerCase();
  if (!q) return true;
  return conversationTitle(c).toLowerCase().includes(q) || c.cwd.toLowerCase().includes(q);
}
