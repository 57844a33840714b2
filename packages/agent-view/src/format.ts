/**
 * Pure wording and arithmetic of the web UI and the CLI (no DOM, no Node APIs): the state line, the mode line, token
 * counts, tool input summaries and diff lines. Tested in Node by test/format.test.ts.
 */
import {
  ErrorKind,
  isResting,
  MCP_TOOL_PREFIX,
  mcpServerOf,
  MessageType,
  Mode,
  StateKind,
  type ContextUsage,
  type ConversationState,
  type Usage,
} from '@bedrock/contracts';
import { isToolName, type ToolName } from '@bedrock/contracts/tools';

export type Tone = 'idle' | 'busy' | 'attention' | 'error' | 'done';

/** A retry waiting for its backoff, as last announced by retry_scheduled or state_changed. */
export interface PendingRetry {
  readonly attempt: number;
  readonly maxAttempts: number;
  /** When the next attempt starts, in the clock passed as `now` (ms). */
  readonly at: number;
  readonly errorKind: ErrorKind;
  readonly errorMessage: string;
}

const ERROR_KINDS: Record<ErrorKind, string> = {
  [ErrorKind.UNSPECIFIED]: 'error',
  [ErrorKind.AUTH]: 'authentication error',
  [ErrorKind.RATE_LIMIT]: 'rate limited',
  [ErrorKind.NETWORK]: 'network error',
  [ErrorKind.SERVER]: 'server error',
  [ErrorKind.INVALID_REQUEST]: 'invalid request',
  [ErrorKind.UNKNOWN]: 'unknown error',
  [ErrorKind.CONTEXT_EXHAUSTED]: 'context exhausted',
  [ErrorKind.TIMEOUT]: 'timed out',
  [ErrorKind.CANCELLED]: 'cancelled',
  [ErrorKind.REFUSED]: 'declined by the model',
  [ErrorKind.BUDGET_EXHAUSTED]: 'budget spent',
};

export function errorKindLabel(kind: ErrorKind): string {
  return ERROR_KINDS[kind] ?? 'error';
}

/** States in which the agent is working, i.e. not at rest (a message is refused; cancel is offered). */
export function isBusy(kind: StateKind): boolean {
  return kind !== StateKind.UNSPECIFIED && !isResting(kind);
}

/** Whether Cancel means something now (cancelling is already under way). */
export function canCancel(kind: StateKind): boolean {
  return isBusy(kind) && kind !== StateKind.CANCELLING;
}

/** Whole seconds left until `at`, rounded up (a countdown never shows 0 before the time). */
export function secondsLeft(at: number, now: number): number {
  return Math.max(0, Math.ceil((at - now) / 1000));
}

/** "Retrying: attempt 2 of 3 in 4s (server error)"; the provider's message is in the transcript notice. */
export function retryText(retry: PendingRetry, now: number): string {
  const s = secondsLeft(retry.at, now);
  const when = s > 0 ? `in ${s}s` : 'now';
  return `Retrying: attempt ${retry.attempt} of ${retry.maxAttempts} ${when} (${errorKindLabel(retry.errorKind)})`;
}

/** The live state line: "Thinking…", "Running tool 2 of 3: bash", "Retrying: attempt 2 of 3 in 4s", "Error (server error): …". */
export function stateLine(
  state: ConversationState | undefined,
  retry: PendingRetry | undefined,
  now: number,
): { text: string; tone: Tone } {
  const kind = state?.kind ?? StateKind.UNSPECIFIED;
  switch (kind) {
    case StateKind.IDLE:
      return { text: 'Ready', tone: 'idle' };
    case StateKind.AWAITING_LLM:
    case StateKind.LLM_REQUESTING: {
      if (retry) return { text: retryText(retry, now), tone: 'attention' };
      const attempt = state!.attempt > 1 ? ` (attempt ${state!.attempt} of ${state!.maxAttempts})` : '';
      return { text: `Thinking…${attempt}`, tone: 'busy' };
    }
    case StateKind.TOOL_EXECUTING: {
      const s = state!;
      const pos = s.toolCount > 0 ? ` ${s.toolIndex} of ${s.toolCount}` : '';
      return { text: `Running tool${pos}${s.currentToolName ? `: ${s.currentToolName}` : ''}`, tone: 'busy' };
    }
    case StateKind.CANCELLING:
      return { text: 'Cancelling…', tone: 'busy' };
    case StateKind.AWAITING_SUB_AGENTS: {
      const s = state!;
      const done = s.subAgentCount - s.pendingSubAgentIds.length;
      return { text: `Waiting for sub-agents: ${done} of ${s.subAgentCount} finished`, tone: 'busy' };
    }
    case StateKind.AWAITING_MODE_APPROVAL:
      return { text: 'Waiting for your approval: the agent asks for Unrestricted mode', tone: 'attention' };
    case StateKind.AWAITING_CONTINUATION:
      if (retry) return { text: retryText(retry, now), tone: 'attention' };
      return { text: 'Writing the continuation summary…', tone: 'busy' };
    case StateKind.CONTEXT_EXHAUSTED:
      return { text: 'Context window full: this conversation is read-only', tone: 'done' };
    case StateKind.ERROR: {
      const s = state!;
      // The full message is the error message in the transcript (and this line's tooltip).
      return {
        text: `Error (${errorKindLabel(s.errorKind)}): ${shorten(s.errorMessage || 'the request failed', 120)} Send a message to try again.`,
        tone: 'error',
      };
    }
    case StateKind.COMPLETED:
      return { text: 'Completed', tone: 'done' };
    case StateKind.FAILED:
      return { text: `Failed (${errorKindLabel(state!.errorKind)}): ${state!.errorMessage}`, tone: 'error' };
    default:
      return { text: 'Connecting…', tone: 'busy' };
  }
}

const SHORT_STATES: Partial<Record<StateKind, string>> = {
  [StateKind.IDLE]: 'idle',
  [StateKind.AWAITING_LLM]: 'thinking',
  [StateKind.LLM_REQUESTING]: 'thinking',
  [StateKind.TOOL_EXECUTING]: 'running tool',
  [StateKind.CANCELLING]: 'cancelling',
  [StateKind.AWAITING_SUB_AGENTS]: 'sub-agents',
  [StateKind.AWAITING_MODE_APPROVAL]: 'needs approval',
  [StateKind.AWAITING_CONTINUATION]: 'summarising',
  [StateKind.CONTEXT_EXHAUSTED]: 'context full',
  [StateKind.ERROR]: 'error',
  [StateKind.COMPLETED]: 'completed',
  [StateKind.FAILED]: 'failed',
};

/** One or two words for the conversation list. */
export function stateShort(kind: StateKind): string {
  return SHORT_STATES[kind] ?? '';
}

/** At most `max` characters: a full stop when whole, an ellipsis when cut. */
function shorten(text: string, max: number): string {
  const t = text.trim().replace(/\.+$/, '');
  return t.length <= max ? `${t}.` : `${t.slice(0, max - 1).trimEnd()}…`;
}

export type ModeTone = 'restricted' | 'unrestricted' | 'unavailable';

/** Where Unrestricted tools write and whether they can, as the tool-runner reported it (Conversation.write_access). */
export interface WriteAccessView {
  readonly path: string;
  readonly toolUser: string;
  readonly writable: boolean;
  readonly problem: string;
}

export interface WherePlace {
  readonly workspaceName?: string;
  readonly cwd?: string;
  /** Unset (or undefined) when no tool-runner answered: then only the place is named. */
  readonly access?: WriteAccessView | undefined;
}

/**
 * Where Unrestricted tools write: "the workspace api (/var/…/ws-…) as uid 200001" or the host
 * directory "/srv/app as nobody (uid 65534)". They run as their tool user, so they can change
 * only what that user may — said rather than "full access".
 */
export function writePlace(where: WherePlace): string {
  const path = where.access?.path || where.cwd;
  const place = where.workspaceName
    ? `the workspace ${where.workspaceName}${where.access?.path ? ` (${where.access.path})` : ''}`
    : path || 'the working directory';
  return where.access?.toolUser ? `${place} as ${where.access.toolUser}` : `${place} (as its tool user may)`;
}

/**
 * The warning to show before Unrestricted mode is approved (and while it is on) when the tool
 * user cannot write the working directory; null when it can, or when nobody could tell.
 */
export function writeWarning(where: WherePlace): string | null {
  const a = where.access;
  if (!a || a.writable) return null;
  return (
    `${a.toolUser || 'The tool user'} cannot write ${a.path || where.cwd || 'the working directory'}` +
    `${a.problem ? `: it ${a.problem}` : ''}. In Unrestricted mode its writes there will fail ("Permission denied"); ` +
    'give the directory to that user, or start the conversation in a directory it can write.'
  );
}

/** The mode line (REQ-BED-014): what the agent may do right now, and a warning when writes would fail. */
export function modeLine(
  mode: Mode,
  sandboxAvailable: boolean,
  where: WherePlace = {},
): { label: string; detail: string; tone: ModeTone; warning: string | null } {
  const writes = `writes files in ${writePlace(where)} and uses the network`;
  const warning = writeWarning(where);
  if (!sandboxAvailable) {
    return {
      label: 'Sandbox unavailable',
      detail: `Unrestricted only (no tool runner has the kernel sandbox): ${writes}`,
      tone: 'unavailable',
      warning,
    };
  }
  if (mode === Mode.UNRESTRICTED) return { label: 'Unrestricted', detail: writes, tone: 'unrestricted', warning };
  return {
    label: 'Restricted',
    detail: where.access ? `read-only, sandboxed; Unrestricted would write in ${writePlace(where)}` : 'read-only, sandboxed',
    tone: 'restricted',
    warning,
  };
}

/** "950", "12.3k", "1.2M". */
export function formatTokens(n: number): string {
  if (n < 1000) return String(n);
  if (n < 1_000_000) return `${trim(n / 1000)}k`;
  return `${trim(n / 1_000_000)}M`;
}

function trim(x: number): string {
  return (x >= 100 ? x.toFixed(0) : x.toFixed(1)).replace(/\.0$/, '');
}

export interface UsageView {
  readonly used: number;
  readonly window: number;
  /** 0..1 */
  readonly fraction: number;
  readonly warning: boolean;
  readonly text: string;
}

/** The figures of a context usage (a ContextUsage message or one made up from several). */
export type UsageFigures = Pick<ContextUsage, 'usedTokens' | 'contextWindow' | 'warning'>;

export function usageView(usage: UsageFigures | undefined): UsageView {
  const used = Number(usage?.usedTokens ?? 0n);
  const window = Number(usage?.contextWindow ?? 0n);
  const fraction = window > 0 ? Math.min(1, used / window) : 0;
  // The server's flag is the truth; the ratio covers a usage that arrived without it.
  const warning = Boolean(usage?.warning) || fraction >= 0.8;
  const pct = Math.round(fraction * 100);
  const text = window > 0 ? `${formatTokens(used)} / ${formatTokens(window)} tokens (${pct}%)` : 'no usage yet';
  return { used, window, fraction, warning, text };
}

/** Tokens a response occupies in the context window: all input (cached or not) plus its output. */
export function contextTokensOf(
  usage: Pick<Usage, 'inputTokens' | 'outputTokens' | 'cacheCreationInputTokens' | 'cacheReadInputTokens'> | undefined,
): bigint {
  if (!usage) return 0n;
  return usage.inputTokens + usage.cacheReadInputTokens + usage.cacheCreationInputTokens + usage.outputTokens;
}

/**
 * The context figure to show: the peak of the conversation, not only its last response. The
 * service reports the last response's usage, so after a continuation (whose summary is a short
 * request) it falls back to a few percent although the window was full; the peak of the reported
 * figures (`seen`) and of the agent messages' own usage is what filled the window.
 */
export function peakUsage(
  current: UsageFigures | undefined,
  messages: readonly { readonly type: MessageType; readonly usage?: Usage | undefined }[],
  seen = 0n,
): UsageFigures | undefined {
  if (!current) return undefined;
  let used = current.usedTokens > seen ? current.usedTokens : seen;
  for (const m of messages) {
    if (m.type !== MessageType.AGENT) continue;
    const t = contextTokensOf(m.usage);
    if (t > used) used = t;
  }
  const window = current.contextWindow;
  return { usedTokens: used, contextWindow: window, warning: current.warning || (window > 0n && used * 10n >= window * 8n) };
}

const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];

/**
 * When something happened, as people say it: "just now", "2 min ago", "3 h ago", "yesterday",
 * "4 days ago", then the date ("12 Mar", with the year when it is not this one). Both times in
 * ms; a time in the future (clocks a little apart) is "just now". Local calendar days.
 */
export function relativeTime(then: number, now: number): string {
  const s = Math.floor((now - then) / 1000);
  if (s < 45) return 'just now';
  const min = Math.round(s / 60);
  if (min < 60) return `${min} min ago`;
  const hours = Math.floor(s / 3600);
  if (hours < 24) return `${hours} h ago`;
  const a = new Date(then);
  const b = new Date(now);
  const days = Math.round((startOfDay(b) - startOfDay(a)) / 86_400_000);
  if (days <= 1) return 'yesterday';
  if (days < 7) return `${days} days ago`;
  const date = `${a.getDate()} ${MONTHS[a.getMonth()]}`;
  return a.getFullYear() === b.getFullYear() ? date : `${date} ${a.getFullYear()}`;
}

function startOfDay(d: Date): number {
  return new Date(d.getFullYear(), d.getMonth(), d.getDate()).getTime();
}

export function parseJsonObject(text: string): Record<string, unknown> | undefined {
  if (!text) return undefined;
  try {
    const v: unknown = JSON.parse(text);
    return v && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

/**
 * A tool's name as the user reads it: an MCP tool's `mcp__fs__read_file` is "fs › read_file"
 * (its server, then its tool, as the model was offered it); a built-in tool's name as is.
 */
export function toolLabel(name: string): string {
  const server = mcpServerOf(name);
  if (!server) return name;
  return `${server} › ${name.slice(MCP_TOOL_PREFIX.length + server.length + 2)}`;
}

/** How long an MCP call's one-line summary of its arguments may be. */
const MCP_SUMMARY_CHARS = 80;

/**
 * An MCP call's arguments on one line, e.g. `path: "/w/a.txt", tail: 5` (cut with "…"), since
 * a server's tools have no fixed wording here; "" without arguments.
 */
function mcpSummary(input: Record<string, unknown>): string {
  const line = Object.entries(input)
    .map(([k, v]) => `${k}: ${JSON.stringify(v) ?? String(v)}`)
    .join(', ');
  return line.length > MCP_SUMMARY_CHARS ? `${line.slice(0, MCP_SUMMARY_CHARS - 1)}…` : line;
}

type JsonObject = Record<string, unknown>;
const str = (input: JsonObject, k: string): string => (typeof input[k] === 'string' ? (input[k] as string) : '');

/** What each tool call does, in one line: keyed by every tool of the registry, so a new tool fails to compile until worded. */
const TOOL_SUMMARIES: Readonly<Record<ToolName, (input: JsonObject) => string>> = {
  bash: (input) => `$ ${str(input, 'command')}`,
  patch: (input) => str(input, 'path'),
  keyword_search: (input) => str(input, 'query'),
  think: () => 'thinking',
  request_mode_upgrade: (input) => str(input, 'reason'),
  submit_result: () => 'result submitted',
  spawn_agents: (input) => {
    const tasks = Array.isArray(input.tasks) ? input.tasks.length : 0;
    return `${tasks} sub-agent${tasks === 1 ? '' : 's'}`;
  },
};

/** The one line that says what a tool call does, e.g. "$ ls -la" for bash; an MCP call's arguments; empty for any other name. */
export function toolSummary(name: string, inputJson: string): string {
  const input = parseJsonObject(inputJson) ?? {};
  if (mcpServerOf(name)) return mcpSummary(input);
  return isToolName(name) ? TOOL_SUMMARIES[name](input) : '';
}

/** The tool input as the user reads it: bash's command and the think text as is, anything else as indented JSON. */
export function toolInputText(name: string, inputJson: string): string {
  const input = parseJsonObject(inputJson);
  if (!input) return inputJson;
  if (name === 'bash' && typeof input.command === 'string') {
    const extra = Object.fromEntries(Object.entries(input).filter(([k]) => k !== 'command'));
    return Object.keys(extra).length ? `${input.command}\n\n${JSON.stringify(extra, null, 2)}` : input.command;
  }
  if (name === 'think' && typeof input.thoughts === 'string') return input.thoughts;
  return JSON.stringify(input, null, 2);
}

export type DiffLineKind = 'add' | 'del' | 'hunk' | 'meta' | 'context';

/** Classifies the lines of a unified diff for colouring. */
export function diffLines(diff: string): Array<{ kind: DiffLineKind; text: string }> {
  // The "Index:" header and its "=====" rule say nothing the file name does not.
  const lines = diff
    .replace(/\n$/, '')
    .split('\n')
    .filter((l) => !/^(Index: .*|=+)$/.test(l));
  return lines.map((text) => {
    if (text.startsWith('+++') || text.startsWith('---') || text.startsWith('diff ') || text.startsWith('\\'))
      return { kind: 'meta', text };
    if (text.startsWith('@@')) return { kind: 'hunk', text };
    if (text.startsWith('+')) return { kind: 'add', text };
    if (text.startsWith('-')) return { kind: 'del', text };
    return { kind: 'context', text };
  });
}

/** The diff of a patch result's display_json ({"path", "created", "diff"}), if any. */
export function patchDisplay(displayJson: string): { path: string; created: boolean; diff: string } | undefined {
  const d = parseJsonObject(displayJson);
  if (!d || typeof d.diff !== 'string' || d.diff === '') return undefined;
  return { path: typeof d.path === 'string' ? d.path : '', created: d.created === true, diff: d.diff };
}

/**
 * The hunks of a unified diff as the text each one replaced and the text it put there (context
 * lines on both sides): what an editor needs to show a change without the whole file (ACP's
 * `diff` content). A hunk the diff cuts short (a display limit) is left out; "\ No newline at
 * end of file" drops the last newline of its side.
 */
export function patchHunks(diff: string): Array<{ oldText: string; newText: string }> {
  const hunks: Array<{ oldText: string; newText: string }> = [];
  const lines = diff.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const head = /^@@ -\d+(?:,(\d+))? \+\d+(?:,(\d+))? @@/.exec(lines[i]!);
    if (!head) continue;
    let oldLeft = head[1] === undefined ? 1 : Number(head[1]);
    let newLeft = head[2] === undefined ? 1 : Number(head[2]);
    const oldLines: string[] = [];
    const newLines: string[] = [];
    let oldEnd = '\n';
    let newEnd = '\n';
    let last: 'old' | 'new' | 'both' = 'both';
    /** "\\ No newline at end of file": the line before it (its side) had none. */
    const noNewline = () => {
      if (last !== 'new') oldEnd = '';
      if (last !== 'old') newEnd = '';
    };
    while ((oldLeft > 0 || newLeft > 0) && i + 1 < lines.length) {
      const line = lines[++i]!;
      const text = line.slice(1);
      if (line.startsWith('\\')) noNewline();
      else if (line.startsWith(' ')) {
        oldLines.push(text);
        newLines.push(text);
        oldLeft--;
        newLeft--;
        last = 'both';
      } else if (line.startsWith('-')) {
        oldLines.push(text);
        oldLeft--;
        last = 'old';
      } else if (line.startsWith('+')) {
        newLines.push(text);
        newLeft--;
        last = 'new';
      } else break;
    }
    if (oldLeft !== 0 || newLeft !== 0) continue; // cut short
    // A marker right after the hunk's last line belongs to it.
    if (lines[i + 1]?.startsWith('\\')) {
      i++;
      noNewline();
    }
    const join = (ls: string[], end: string) => (ls.length ? ls.join('\n') + end : '');
    hunks.push({ oldText: join(oldLines, oldEnd), newText: join(newLines, newEnd) });
  }
  return hunks;
}

export const IMAGE_TYPES: readonly string[] = ['image/png', 'image/jpeg', 'image/gif', 'image/webp'];
/** The conversation service's limits (services/conversation/src/api/limits.ts). */
export const MAX_IMAGES = 20;
export const MAX_IMAGE_BYTES = 20 * 1024 * 1024;

/** Why an attachment is refused, or undefined when it is acceptable. */
export function imageProblem(type: string, size: number, alreadyAttached: number): string | undefined {
  if (!IMAGE_TYPES.includes(type))
    return `only PNG, JPEG, GIF and WebP images can be attached (this file is ${type || 'of an unknown type'})`;
  if (size > MAX_IMAGE_BYTES) return `the image is ${(size / 1024 / 1024).toFixed(1)} MiB; at most 20 MiB`;
  if (alreadyAttached >= MAX_IMAGES) return `at most ${MAX_IMAGES} images per message`;
  return undefined;
}
