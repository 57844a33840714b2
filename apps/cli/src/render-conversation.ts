/**
 * Conversations for people: states in words (`describeState`), the mode and where write access
 * writes, thinking and web tools, `ls`'s table and `show`'s list of sub-agents.
 */
import { Mode, StateKind, type Conversation, type ConversationState } from '@bedrock/contracts';
import { SERVER_TOOLS, serverToolLabel, thinkingName } from '@bedrock/agent-view/agent-content';
import { modeLine, relativeTime, writePlace, writeWarning } from '@bedrock/agent-view/format';
import { cleanStrings, stripControls } from './terminal-text.ts';

const STATE_WORDS: Record<StateKind, string> = {
  [StateKind.UNSPECIFIED]: 'unknown',
  [StateKind.IDLE]: 'idle',
  [StateKind.AWAITING_LLM]: 'waiting for the model',
  [StateKind.LLM_REQUESTING]: 'thinking',
  [StateKind.TOOL_EXECUTING]: 'running a tool',
  [StateKind.CANCELLING]: 'cancelling',
  [StateKind.AWAITING_SUB_AGENTS]: 'waiting for sub-agents',
  [StateKind.AWAITING_MODE_APPROVAL]: 'waiting for approval',
  [StateKind.AWAITING_CONTINUATION]: 'writing a continuation',
  [StateKind.CONTEXT_EXHAUSTED]: 'context full',
  [StateKind.ERROR]: 'error',
  [StateKind.COMPLETED]: 'completed',
  [StateKind.FAILED]: 'failed',
};

/** A state in words: "idle", "waiting for approval", "running a tool" (never the enum's name). */
export function stateName(kind: StateKind | undefined): string {
  return STATE_WORDS[kind ?? StateKind.UNSPECIFIED] ?? 'unknown';
}

export function modeName(mode: Mode): string {
  return (Mode[mode] ?? 'UNSPECIFIED').toLowerCase();
}

/** "running tool 2 of 3: bash", "retrying in 4s (attempt 2 of 3)", ... */
export function describeState(state: ConversationState | undefined): string {
  if (!state) return 'unknown';
  switch (state.kind) {
    case StateKind.LLM_REQUESTING:
      return state.attempt > 1 ? `thinking (attempt ${state.attempt} of ${state.maxAttempts})` : 'thinking';
    case StateKind.AWAITING_LLM:
      return state.retryDelayMs > 0n
        ? `retrying in ${Number(state.retryDelayMs) / 1000}s (attempt ${state.attempt} of ${state.maxAttempts})`
        : 'waiting for the model';
    case StateKind.TOOL_EXECUTING:
      return `running tool ${state.toolIndex} of ${state.toolCount}: ${state.currentToolName}`;
    case StateKind.AWAITING_SUB_AGENTS:
      return `waiting for ${state.pendingSubAgentIds.length} of ${state.subAgentCount} sub-agents`;
    case StateKind.AWAITING_MODE_APPROVAL:
      return `waiting for approval: the agent asks for write access (${state.upgradeReason})`;
    case StateKind.ERROR:
    case StateKind.FAILED:
      return `${stateName(state.kind)}: ${state.errorMessage}`;
    default:
      return stateName(state.kind);
  }
}

/**
 * "restricted (read-only, sandboxed)", "unrestricted (writes files in the workspace api (as its
 * tool user may) and uses the network)", "unrestricted only (no tool runner has the kernel sandbox)".
 */
export function renderMode(
  c: Pick<Conversation, 'mode' | 'sandboxAvailable'> & Partial<Pick<Conversation, 'workspaceName' | 'cwd' | 'writeAccess'>>,
): string {
  const line = modeLine(c.mode, c.sandboxAvailable, { workspaceName: c.workspaceName, cwd: c.cwd, access: c.writeAccess });
  return line.tone === 'unavailable'
    ? 'unrestricted only (no tool runner has the kernel sandbox)'
    : `${line.label.toLowerCase()} (${line.detail})`;
}

/**
 * What approving write access means, for `chat`'s prompt and the ACP permission request: where
 * and as whom Unrestricted tools write, and the warning when that user cannot write there.
 */
export function renderWriteAccess(c: Partial<Pick<Conversation, 'workspaceName' | 'cwd' | 'writeAccess'>>): {
  place: string;
  warning: string | null;
} {
  const where = { workspaceName: c.workspaceName, cwd: c.cwd, access: c.writeAccess };
  return { place: writePlace(where), warning: writeWarning(where) };
}

/** "thinking: high · web tools: web search, web fetch" ("none" when off) for `show`, `chat` and `settings`. */
export function renderSettings(c: Pick<Conversation, 'thinking' | 'serverTools'>): string {
  const tools = SERVER_TOOLS.filter((t) => c.serverTools.includes(t)).map((t) => serverToolLabel(t).toLowerCase());
  return `thinking: ${thinkingName(c.thinking)} · web tools: ${tools.length ? tools.join(', ') : 'none'}\n`;
}

/** Titles in listings: at most this many characters (with "…"), fewer when the terminal is narrow. */
const LIST_TITLE_CHARS = 60;

const chars = (s: string) => Array.from(s).length;
/** `s` in at most `n` characters: cut at the end ("Speed up th…"), or for a directory at the start ("…/src/app"). */
function fit(s: string, n: number, from: 'end' | 'start' = 'end'): string {
  const a = Array.from(s);
  if (a.length <= n) return s;
  if (n <= 1) return '…'.slice(0, n);
  return from === 'end' ? `${a.slice(0, n - 1).join('')}…` : `…${a.slice(a.length - n + 1).join('')}`;
}
const pad = (s: string, n: number) => s + ' '.repeat(Math.max(0, n - chars(s)));

/**
 * `ls` as a table with a header: id, state, mode, when it last changed ("3 min ago"), title and
 * directory, within `width` columns (the terminal's; none given: titles cut at 60 characters,
 * directories whole). Titles, then directories, give way to a narrow terminal.
 */
export function renderConversationTable(raw: readonly Conversation[], layout: { width?: number; now: number }): string {
  if (raw.length === 0) return '';
  const rows = raw.map((r) => {
    const c = cleanStrings(r);
    return [
      c.id,
      stateName(c.state?.kind),
      modeName(c.mode),
      c.updatedAt ? relativeTime(Number(c.updatedAt.seconds) * 1000, layout.now) : '',
      c.title || '(no title yet)',
      c.cwd,
    ];
  });
  const header = ['ID', 'STATE', 'MODE', 'CHANGED', 'TITLE', 'DIRECTORY'];
  const widths = header.map((h, i) => Math.max(chars(h), ...rows.map((r) => chars(r[i]!))));
  widths[4] = Math.min(widths[4]!, LIST_TITLE_CHARS);
  if (layout.width !== undefined) {
    // What the first four columns leave (two spaces between columns), shared by title and directory.
    const room = layout.width - 1 - (widths[0]! + widths[1]! + widths[2]! + widths[3]! + 5 * 2);
    if (widths[4]! + widths[5]! > room) {
      widths[5] = Math.max(chars('DIRECTORY'), Math.min(widths[5]!, Math.floor(room * 0.4)));
      widths[4] = Math.max(chars('TITLE'), room - widths[5]!);
    }
  }
  const line = (cells: string[]) =>
    `${cells
      .map((cell, i) => (i === 5 ? fit(cell, widths[5]!, 'start') : pad(fit(cell, widths[i]!), widths[i]!)))
      .join('  ')
      .trimEnd()}\n`;
  return line(header) + rows.map(line).join('');
}

/** `show`'s list of a conversation's sub-agents: each one's id (to open it), state in words and title. */
export function renderSubAgents(parentId: string, subAgents: readonly Conversation[], more: boolean): string {
  if (subAgents.length === 0) return '';
  const lines = subAgents.map((a) => `  ${a.id}  ${stateName(a.state?.kind).padEnd(22)} ${stripControls(a.title) || '(no title yet)'}\n`);
  const rest = more ? `  … more: bedrock ls --parent ${parentId}\n` : '';
  return `sub-agents (bedrock show ID opens one):\n${lines.join('')}${rest}`;
}
