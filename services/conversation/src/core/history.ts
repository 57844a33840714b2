/**
 * Persisted messages → Messages API turns. Pure, so the chain rules can be property-tested
 * and the shell has one place that makes a history valid.
 */
import { MODE_NOTICE_RESTRICTED, MODE_NOTICE_UNRESTRICTED } from './constants.ts';
import type { ContentBlock, MessageType, StopReason } from './types.ts';

export interface LlmTurn {
  readonly role: 'user' | 'assistant';
  readonly content: ContentBlock[];
}

export interface HistoryMessage {
  readonly type: MessageType;
  readonly content: readonly ContentBlock[];
  /** Agent messages: why the response ended (a refusal leaves its turn out). */
  readonly stopReason?: StopReason;
}

export const SYSTEM_NOTICE_PREFIX = '[System notice] ';

function isEmptyText(block: ContentBlock): boolean {
  return block.type === 'text' && block.text.trim() === '';
}

/** The model's own blocks, sent back verbatim; a thinking block without a signature cannot be. */
function isModelBlock(block: ContentBlock): boolean {
  switch (block.type) {
    case 'text':
    case 'tool_use':
    case 'redacted_thinking':
    case 'server_tool':
    case 'compaction':
      return true;
    case 'thinking':
      return block.signature !== '';
    default:
      return false;
  }
}

const MODE_NOTICES = new Set([MODE_NOTICE_RESTRICTED, MODE_NOTICE_UNRESTRICTED]);

/**
 * Indexes of messages left out because their turn was refused: from the last user message
 * before each refused agent message up to it (the provider asks not to send a refused turn
 * again). Mode-change notices in that span stay: the mode did change.
 */
function refusedSpans(messages: readonly HistoryMessage[]): Set<number> {
  const out = new Set<number>();
  let turnStart = 0;
  messages.forEach((message, i) => {
    if (message.type === 'user') turnStart = i;
    if (message.type !== 'agent' || message.stopReason !== 'refusal') return;
    for (let k = turnStart; k <= i; k++) {
      const m = messages[k]!;
      const modeNotice = m.type === 'system' && m.content.some((b) => b.type === 'text' && MODE_NOTICES.has(b.text));
      if (!modeNotice) out.add(k);
    }
    turnStart = i + 1;
  });
  return out;
}

/**
 * user → user turn; agent → assistant turn (text with its citations, tool_use, thinking,
 * redacted thinking and server-tool blocks, in their order); tool → tool_result blocks in a user turn;
 * system → a user-turn notice, held back until the tool_use blocks of the preceding assistant
 * turn are all answered (a notice may be persisted mid-chain, e.g. a downgrade while tools
 * run); error and continuation messages are for people, not the model; a refused turn is left
 * out. Consecutive turns of one role merge (a paused turn and its resumption become one
 * assistant turn), and tool_result blocks come first in a user turn, as the API requires.
 */
export function buildLlmHistory(messages: readonly HistoryMessage[]): LlmTurn[] {
  const turns: { role: 'user' | 'assistant'; content: ContentBlock[] }[] = [];
  const open = new Set<string>();
  let heldNotices: ContentBlock[] = [];

  const push = (role: 'user' | 'assistant', blocks: readonly ContentBlock[]) => {
    const kept = blocks.filter((b) => !isEmptyText(b));
    if (kept.length === 0) return;
    const last = turns[turns.length - 1];
    if (last && last.role === role) last.content.push(...kept);
    else turns.push({ role, content: [...kept] });
  };
  const releaseNotices = () => {
    if (open.size > 0 || heldNotices.length === 0) return;
    push('user', heldNotices);
    heldNotices = [];
  };

  const refused = refusedSpans(messages);
  for (const [i, message] of messages.entries()) {
    if (refused.has(i)) continue;
    switch (message.type) {
      case 'user':
        push(
          'user',
          message.content.filter((b) => b.type === 'text' || b.type === 'image'),
        );
        break;
      case 'agent': {
        const blocks = message.content.filter(isModelBlock);
        push('assistant', blocks);
        for (const b of blocks) if (b.type === 'tool_use') open.add(b.id);
        break;
      }
      case 'tool':
        push(
          'user',
          message.content.filter((b) => b.type === 'tool_result'),
        );
        for (const b of message.content) if (b.type === 'tool_result') open.delete(b.toolUseId);
        releaseNotices();
        break;
      case 'system': {
        const text = message.content.map((b) => (b.type === 'text' ? b.text : '')).join('\n');
        heldNotices.push({ type: 'text', text: SYSTEM_NOTICE_PREFIX + text });
        releaseNotices();
        break;
      }
      case 'error':
      case 'continuation':
        break;
    }
  }
  if (heldNotices.length > 0) push('user', heldNotices);

  for (const turn of turns) {
    if (turn.role !== 'user') continue;
    const results = turn.content.filter((b) => b.type === 'tool_result');
    if (results.length === 0) continue;
    const rest = turn.content.filter((b) => b.type !== 'tool_result');
    turn.content.splice(0, turn.content.length, ...results, ...rest);
  }
  return turns;
}

/**
 * Problems that would make the Messages API reject the history: roles must alternate from a
 * user turn, and every tool_use must be answered by exactly one tool_result, in request order,
 * in the next user turn — and nowhere else. Empty when valid.
 */
export function checkToolChain(turns: readonly LlmTurn[]): string[] {
  const problems: string[] = [];
  if (turns.length > 0 && turns[0]!.role !== 'user') problems.push('the first turn is not a user turn');
  turns.forEach((turn, i) => {
    const prev = turns[i - 1];
    if (prev && prev.role === turn.role) problems.push(`turns ${i - 1} and ${i} are both ${turn.role} turns`);
    if (turn.role === 'user') {
      const answered = turn.content.flatMap((b) => (b.type === 'tool_result' ? [b.toolUseId] : []));
      const asked = prev ? prev.content.flatMap((b) => (b.type === 'tool_use' ? [b.id] : [])) : [];
      if (answered.join('\u0000') !== asked.join('\u0000')) {
        problems.push(`turn ${i} answers [${answered.join(', ')}] but turn ${i - 1} asked [${asked.join(', ')}]`);
      }
    } else {
      const asked = turn.content.filter((b) => b.type === 'tool_use');
      const next = turns[i + 1];
      if (asked.length > 0 && !next) problems.push(`turn ${i} has tool_use blocks that are not answered`);
    }
  });
  return problems;
}
