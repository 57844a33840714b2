/**
 * Human-readable output: the agent's text and tool activity on stdout, state lines on stderr.
 * The model's thinking is printed under a `thinking:` label, dimmed on a terminal (or left out
 * with --hide-thinking); the provider's own tools (web search, web fetch) one line each; the
 * provider's compaction of the context one marked line (its summary left out; while it streams,
 * a progress note on stderr); the
 * sources an answer cites as footnotes; an answer cut by the output limit, paused by the
 * provider or declined by the model with a one-line marker.
 */
import { toJson } from '@bufbuild/protobuf';
import {
  ConversationEventSchema,
  MessageType,
  Mode,
  StateKind,
  StopReason,
  TokenDeltaKind,
  type ContentBlock,
  type Conversation,
  type ConversationEvent,
  type ConversationState,
  type Message,
} from '@bedrock/contracts';
import {
  citationSources,
  COMPACTING,
  compactionSummary,
  isRefusalError,
  refusalText,
  refusalWithError,
  SERVER_TOOLS,
  serverToolLabel,
  serverToolView,
  SourceNumbers,
  stopMarker,
  thinkingName,
  usageExtras,
  type ServerToolView,
} from '@bedrock/agent-view/agent-content';
import { formatTokens, modeLine, relativeTime, toolLabel, writePlace, writeWarning } from '@bedrock/agent-view/format';
import { safeOutput, type Output } from './output.ts';
import { cleanStrings, stripControls } from './terminal-text.ts';

export { stdio, type Output } from './output.ts';

/** How people's output looks. */
export interface RenderOptions {
  /** `show`: each message starts with its sequence number (`#12`), which `fork --at` takes. */
  readonly numbered?: boolean;
  /** Leave the model's thinking out (--hide-thinking). */
  readonly hideThinking?: boolean;
  /** ANSI styles on stdout: only when it is a terminal and NO_COLOR is not set (wantsColor). */
  readonly color?: boolean;
  /** ANSI styles on stderr (the state lines), by the same rule. */
  readonly errColor?: boolean;
  /** Every line of tool output, not a head and a tail (--full). */
  readonly full?: boolean;
}

/**
 * Whether a stream gets ANSI styles: never with NO_COLOR set (no-color.org), always with
 * FORCE_COLOR set (other than 0), else when it is a terminal.
 */
export function wantsColor(isTTY: boolean | undefined, env: NodeJS.ProcessEnv): boolean {
  if (env.NO_COLOR) return false;
  if (env.FORCE_COLOR !== undefined && env.FORCE_COLOR !== '0') return true;
  return Boolean(isTTY);
}

const STYLES = {
  dim: ['\x1b[2m', '\x1b[22m'],
  bold: ['\x1b[1m', '\x1b[22m'],
  red: ['\x1b[31m', '\x1b[39m'],
  green: ['\x1b[32m', '\x1b[39m'],
  yellow: ['\x1b[33m', '\x1b[39m'],
  cyan: ['\x1b[36m', '\x1b[39m'],
} as const;
type Style = keyof typeof STYLES;

/** `text` in a style when colour is on. */
export function paint(on: boolean | undefined, style: Style, text: string): string {
  return on && text ? `${STYLES[style][0]}${text}${STYLES[style][1]}` : text;
}

function dim(text: string, options: RenderOptions): string {
  return paint(options.color, 'dim', text);
}

/** Lines of tool output shown before the fold, and after it. */
export const FOLD_HEAD = 10;
export const FOLD_TAIL = 5;

/** "    … 99985 lines hidden (--full shows them) …" */
function foldLine(hidden: number, options: RenderOptions): string {
  return paint(options.color, 'dim', `    … ${hidden} line${hidden === 1 ? '' : 's'} hidden (--full shows them) …`);
}

const outputLine = (line: string, options: RenderOptions) => `    ${paint(options.color, 'dim', line)}`;

/**
 * Tool output as lines for people: indented; longer than FOLD_HEAD + FOLD_TAIL + 1 lines, a
 * head, the count of hidden lines and a tail (all of it with `full`).
 */
export function foldOutput(text: string, options: RenderOptions = {}): string[] {
  const lines = text.replace(/\n$/, '').split('\n');
  if (text === '') return [];
  if (options.full || lines.length <= FOLD_HEAD + FOLD_TAIL + 1) return lines.map((l) => outputLine(l, options));
  return [
    ...lines.slice(0, FOLD_HEAD).map((l) => outputLine(l, options)),
    foldLine(lines.length - FOLD_HEAD - FOLD_TAIL, options),
    ...lines.slice(-FOLD_TAIL).map((l) => outputLine(l, options)),
  ];
}

/** "  → ok", "  → error: [Exit code 3.]" (one line of content said on it), "  → cancelled". */
function resultLine(r: { cancelled: boolean; isError: boolean }, options: RenderOptions, said = ''): string {
  const tag = r.cancelled ? 'cancelled' : r.isError ? 'error' : 'ok';
  const painted = paint(options.color, r.cancelled ? 'yellow' : r.isError ? 'red' : 'green', tag);
  return `  → ${painted}${said ? `: ${said}` : ''}`;
}

/** A tool result for people: a one-line content on its status line, longer content folded above it. */
function toolResultLines(r: { content: string; cancelled: boolean; isError: boolean }, options: RenderOptions): string[] {
  const content = r.content.replace(/\n+$/, '');
  if (!content.includes('\n')) return [resultLine(r, options, content)];
  return [...foldOutput(content, options), resultLine(r, options)];
}

/**
 * Live tool output as it streams (toolOutput events): the first FOLD_HEAD lines at once, then
 * only a count and the last lines, said when the tool's result arrives (finish). Each line is
 * printed once: the result then adds only what the output did not say (an exit code).
 */
class LiveOutput {
  private partial = '';
  private shown = 0;
  private readonly tail: string[] = [];
  private beyond = 0;
  /** Everything streamed, to tell what the result adds to it. */
  text = '';

  constructor(
    private readonly print: (line: string) => void,
    private readonly options: RenderOptions,
  ) {}

  add(chunk: string): void {
    this.text += chunk;
    const parts = (this.partial + chunk).split('\n');
    this.partial = parts.pop() ?? '';
    for (const line of parts) this.line(line);
  }

  private line(line: string): void {
    if (this.options.full || this.shown < FOLD_HEAD) {
      this.shown++;
      this.print(outputLine(line, this.options));
      return;
    }
    this.beyond++;
    this.tail.push(line);
    if (this.tail.length > FOLD_TAIL + 1) this.tail.shift();
  }

  /** The rest: a partial last line, the fold and the tail. */
  finish(): void {
    if (this.partial) this.line(this.partial);
    this.partial = '';
    if (this.beyond > FOLD_TAIL + 1) {
      this.print(foldLine(this.beyond - FOLD_TAIL, this.options));
      this.tail.splice(0, this.tail.length - FOLD_TAIL);
    }
    for (const line of this.tail) this.print(outputLine(line, this.options));
    this.tail.length = 0;
  }
}

export function ndjson(event: ConversationEvent): string {
  return `${JSON.stringify(toJson(ConversationEventSchema, event))}\n`;
}

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

function short(text: string, max = 200): string {
  const line = text.replace(/\s+/g, ' ').trim();
  return line.length > max ? `${line.slice(0, max - 1)}…` : line;
}

/** The one-line marker of how an agent message ended ("⋯ Cut by the output limit — continued below."), if any. */
export function stopLine(m: Pick<Message, 'stopReason' | 'stopExplanation'>, options: RenderOptions = {}): string | undefined {
  const marker = stopMarker(m.stopReason, m.stopExplanation);
  if (!marker) return undefined;
  return m.stopReason === StopReason.REFUSAL
    ? `${paint(options.color, 'red', '✗')} ${marker}`
    : `${paint(options.color, 'yellow', '⋯')} ${marker}`;
}

/** A provider-run tool block as one line: "⏺ searched: cats", "⏺ fetched: https://…", "  → 5 results: A; B; …". */
export function serverToolText(view: ServerToolView): string {
  switch (view.kind) {
    case 'search':
      return `⏺ searched: ${view.query || '(no query)'}`;
    case 'fetch':
      return `⏺ fetched: ${view.url || '(no address)'}`;
    case 'search-results': {
      const n = view.results.length;
      return `  → ${n} result${n === 1 ? '' : 's'}${n ? `: ${short(view.results.map((r) => r.title).join('; '), 160)}` : ''}`;
    }
    case 'fetch-result':
      return `  → read: ${view.source.title}`;
    case 'error':
      return `  → ${view.tool.toLowerCase()} failed: ${view.message}`;
    case 'other':
      return `⏺ ${view.text.charAt(0).toLowerCase()}${view.text.slice(1)}`;
  }
}

/** "  [1] Title https://…" lines for the sources an agent message cites, numbered in order of first citation. */
function footnotes(numbers: SourceNumbers): string[] {
  return numbers.sources.map((s, i) => `  [${i + 1}] ${s.title}${s.url && s.url !== s.title ? ` ${s.url}` : ''}`);
}

/** A compaction block's marked line, dimmed: "⏺ context compacted by the provider (summary: 120 words)". */
export function compactionLine(content: string, options: RenderOptions): string {
  const text = compactionSummary(content);
  return dim(`⏺ ${text.charAt(0).toLowerCase()}${text.slice(1)}`, options);
}

/** The thinking of a block as lines under the label (undefined when hidden or not a thinking block). */
function thinkingLines(block: ContentBlock, options: RenderOptions): string[] | undefined {
  if (options.hideThinking) return undefined;
  const b = block.block;
  if (b.case === 'thinking') {
    const t = b.value.thinking.trim();
    return [dim('thinking:', options), ...(t ? t.split('\n').map((l) => dim(`  ${l}`, options)) : [dim('  (not shown)', options)])];
  }
  if (b.case === 'redactedThinking') return [dim('thinking:', options), dim('  (redacted by the provider)', options)];
  return undefined;
}

/**
 * One message as transcript lines. `next` is the message after it: the error message that
 * follows a refusal is said in the refusal's marker (and returns nothing itself).
 */
/** Tool results by their call's id, to print each under its call; the ids printed so are added to `shown`. */
interface PairedResults {
  readonly byCall: ReadonlyMap<string, { content: string; cancelled: boolean; isError: boolean }>;
  readonly shown: Set<string>;
}

export function renderMessage(
  raw: Message,
  options: RenderOptions = {},
  context: { previous?: Message; next?: Message; results?: PairedResults } = {},
): string {
  // The model's and tools' text without terminal controls (terminal-text.ts).
  const m = cleanStrings(raw);
  const lines: string[] = [];
  const who = (MessageType[m.type] ?? 'message').toLowerCase();
  if (m.type === MessageType.ERROR && context.previous && joinsRefusal(context.previous, m)) return '';
  const numbers = new SourceNumbers();
  for (const block of m.content) {
    const thinking = thinkingLines(block, options);
    if (thinking) {
      lines.push(...thinking);
      continue;
    }
    switch (block.block.case) {
      case 'text': {
        const cites = citationSources(block.block.value.citationsJson);
        const marks = [...new Set(cites.map((c) => numbers.number(c)))].map((n) => `[${n}]`).join('');
        lines.push(`${who}: ${block.block.value.text}${marks ? ` ${marks}` : ''}`);
        break;
      }
      case 'image':
        lines.push(`${who}: [image ${block.block.value.mediaType}, ${block.block.value.data.length} bytes]`);
        break;
      case 'toolUse': {
        lines.push(`tool ${paint(options.color, 'bold', toolLabel(block.block.value.name))} ${short(block.block.value.inputJson)}`);
        const result = context.results?.byCall.get(block.block.value.id);
        if (result) {
          lines.push(...toolResultLines(cleanStrings(result), options));
          context.results!.shown.add(block.block.value.id);
        }
        break;
      }
      case 'toolResult':
        if (context.results?.shown.has(block.block.value.toolUseId)) break;
        lines.push(...toolResultLines(block.block.value, options));
        break;
      case 'serverTool':
        lines.push(serverToolText(serverToolView(block.block.value.blockType, block.block.value.blockJson)));
        break;
      case 'compaction':
        lines.push(compactionLine(block.block.value.content, options));
        break;
      case 'thinking':
      case 'redactedThinking':
      case undefined:
        // Thinking is said above (or hidden).
        break;
      default: {
        const unknown: never = block.block;
        void unknown;
      }
    }
  }
  lines.push(...footnotes(numbers));
  if (m.type === MessageType.AGENT) {
    const next = context.next;
    if (m.stopReason === StopReason.REFUSAL && next && joinsRefusal(m, next))
      lines.push(`✗ ${refusalWithError(m.stopExplanation, textOf(next))}`);
    else {
      const marker = stopLine(m, options);
      if (marker) lines.push(marker);
    }
    const extras = usageExtras(m.usage, formatTokens);
    if (extras) lines.push(`  (${extras})`);
  }
  return lines.map((l) => `${l}\n`).join('');
}

/** Messages as transcript lines (a refusal and the error message after it said once). */
export function renderMessages(messages: readonly Message[], options: RenderOptions = {}): string {
  // Each tool's result under its own call (a turn of several calls: call, result, call, result).
  const byCall = new Map<string, { content: string; cancelled: boolean; isError: boolean }>();
  for (const m of messages)
    if (m.type === MessageType.TOOL)
      for (const b of m.content) if (b.block.case === 'toolResult') byCall.set(b.block.value.toolUseId, b.block.value);
  const results: PairedResults = { byCall, shown: new Set() };
  return messages
    .map((m, i) => {
      let text = renderMessage(m, options, { previous: messages[i - 1], next: messages[i + 1], results });
      if (!options.numbered) return text;
      // A results message said under its calls still shows its number: `fork --at` may name it.
      if (!text && m.type === MessageType.TOOL) text = dim('(tool results: under their calls above)\n', options);
      // The number on the message's first line; the lines under it as they are (tool output stays aligned).
      return text ? `#${m.sequence} ${text}` : '';
    })
    .join('');
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

function joinsRefusal(agent: Message, error: Message): boolean {
  return (
    agent.type === MessageType.AGENT &&
    agent.stopReason === StopReason.REFUSAL &&
    error.type === MessageType.ERROR &&
    isRefusalError(textOf(error))
  );
}

function textOf(m: Message): string {
  return m.content.flatMap((b) => (b.block.case === 'text' ? [b.block.value.text] : [])).join('\n');
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

/** Renders watch events for people; remembers the last state it was told and the last state line it printed. */
export interface EventRenderer {
  (event: ConversationEvent): void;
  readonly lastState: ConversationState | undefined;
  /** The text of the last `· state` line printed (so that a caller does not print it again). */
  readonly saidState: string | undefined;
}

/** Live rendering of watch events for people. */
export function createEventRenderer(given: Output, options: RenderOptions = {}): EventRenderer {
  const output = safeOutput(given);
  let lastState: ConversationState | undefined;
  let saidState: string | undefined;
  /** Live output of the tools running now, by tool use id. */
  const live = new Map<string, LiveOutput>();
  const note = (text: string) => output.err(`${paint(options.errColor, 'dim', `· ${text}`)}\n`);
  /** What is streaming now: a line is open on stdout. */
  let streaming: 'text' | 'thinking' | undefined;
  let streamBlock = -1;
  /** What the current response streamed (its persisted message need not print it again). */
  let streamed = { text: false, thinking: false };
  /** The compaction block whose progress note was said (`requestId/blockIndex`): said once. */
  let compacting = '';
  /** A refused agent message whose marker waits for the error message that says why (said once). */
  let refused: Message | undefined;
  const endStream = () => {
    if (streaming) output.out('\n');
    streaming = undefined;
  };
  const flushRefusal = () => {
    if (refused) output.out(`${paint(options.color, 'red', '✗')} ${refusalText(refused.stopExplanation)}\n`);
    refused = undefined;
  };
  const render = (raw: ConversationEvent) => {
    const event = cleanStrings(raw);
    const k = event.kind;
    if (refused && !(k.case === 'messagePersisted' && k.value.message?.type === MessageType.ERROR)) flushRefusal();
    switch (k.case) {
      case 'tokenDelta': {
        if (k.value.kind === TokenDeltaKind.COMPACTION) {
          // The provider's summary of the context: progress, not answer text (its persisted block gets a line).
          const key = `${k.value.requestId}/${k.value.blockIndex}`;
          if (compacting !== key) {
            endStream();
            note(COMPACTING);
          }
          compacting = key;
          break;
        }
        const thinking = k.value.kind === TokenDeltaKind.THINKING;
        if (thinking) {
          streamed.thinking = true;
          if (options.hideThinking) break;
          if (streaming !== 'thinking' || streamBlock !== k.value.blockIndex) {
            endStream();
            output.out(`${dim('thinking:', options)}\n`);
          }
          output.out(dim(k.value.text, options));
        } else {
          streamed.text = true;
          // The answer starts on a line of its own after thinking.
          if (streaming === 'thinking') endStream();
          output.out(k.value.text);
        }
        streaming = thinking ? 'thinking' : 'text';
        streamBlock = k.value.blockIndex;
        break;
      }
      case 'toolOutput': {
        endStream();
        let out = live.get(k.value.toolUseId);
        if (!out) {
          out = new LiveOutput((line) => output.out(`${line}\n`), options);
          live.set(k.value.toolUseId, out);
        }
        out.add(k.value.text);
        break;
      }
      case 'messagePersisted': {
        const m = k.value.message!;
        if (m.type === MessageType.AGENT) {
          // What streamed is not printed again; the rest (tool calls, web searches, sources, how it ended) is.
          const was = streamed;
          streamed = { text: false, thinking: false };
          endStream();
          const numbers = new SourceNumbers();
          for (const b of m.content) {
            const thinking = was.thinking ? undefined : thinkingLines(b, options);
            if (thinking) output.out(thinking.map((l) => `${l}\n`).join(''));
            else if (b.block.case === 'toolUse')
              output.out(
                `${paint(options.color, 'cyan', '⏺')} ${paint(options.color, 'bold', b.block.value.name)} ${short(b.block.value.inputJson)}\n`,
              );
            else if (b.block.case === 'compaction') output.out(`${compactionLine(b.block.value.content, options)}\n`);
            else if (b.block.case === 'serverTool')
              output.out(`${serverToolText(serverToolView(b.block.value.blockType, b.block.value.blockJson))}\n`);
            else if (b.block.case === 'text') {
              const marks = [...new Set(citationSources(b.block.value.citationsJson).map((c) => numbers.number(c)))]
                .map((n) => `[${n}]`)
                .join('');
              if (!was.text) output.out(`${b.block.value.text}${marks ? ` ${marks}` : ''}\n`);
            }
          }
          const notes = footnotes(numbers);
          if (notes.length) output.out(notes.map((l) => `${l}\n`).join(''));
          if (m.stopReason === StopReason.REFUSAL) refused = m;
          else {
            const marker = stopLine(m, options);
            if (marker) output.out(`${marker}\n`);
          }
        } else if (m.type === MessageType.TOOL) {
          endStream();
          for (const b of m.content) {
            if (b.block.case !== 'toolResult') continue;
            const r = b.block.value;
            const streamedOutput = live.get(r.toolUseId);
            if (!streamedOutput) {
              output.out(
                toolResultLines(r, options)
                  .map((l) => `${l}\n`)
                  .join(''),
              );
              continue;
            }
            // The output was printed as it came: the result says only what it adds ("[Exit code 3.]").
            streamedOutput.finish();
            live.delete(r.toolUseId);
            const added = r.content.startsWith(streamedOutput.text) ? r.content.slice(streamedOutput.text.length).trim() : '';
            const lines = added.includes('\n') ? [...foldOutput(added, options), resultLine(r, options)] : [resultLine(r, options, added)];
            output.out(lines.map((l) => `${l}\n`).join(''));
          }
        } else if (m.type === MessageType.ERROR && refused) {
          endStream();
          const agent = refused;
          refused = undefined;
          const cross = paint(options.color, 'red', '✗');
          if (isRefusalError(textOf(m))) output.out(`${cross} ${refusalWithError(agent.stopExplanation, textOf(m))}\n`);
          else output.out(`${cross} ${refusalText(agent.stopExplanation)}\n${renderMessage(m, options)}`);
        } else if (m.type === MessageType.ERROR || m.type === MessageType.CONTINUATION || m.type === MessageType.SYSTEM) {
          endStream();
          output.out(renderMessage(m, options));
        }
        break;
      }
      case 'stateChanged': {
        endStream();
        lastState = k.value.state;
        // The same state said again (a retry's attempt counter, a repeat after a resume) is one line.
        const said = describeState(k.value.state);
        if (said !== saidState) note(said);
        saidState = said;
        break;
      }
      case 'retryScheduled':
        endStream();
        note(
          `${k.value.errorMessage}: retrying in ${Number(k.value.delayMs) / 1000}s (attempt ${k.value.attempt} of ${k.value.maxAttempts})`,
        );
        break;
      case 'modeUpgradeRequested':
        endStream();
        note(`the agent asks for write access: ${k.value.reason}`);
        break;
      case 'modeChanged':
        note(`mode: ${modeName(k.value.mode)}`);
        break;
      case 'contextWarning': {
        const u = k.value.contextUsage;
        if (u && u.contextWindow > 0n) note(`context ${Math.round((Number(u.usedTokens) / Number(u.contextWindow)) * 100)}% full`);
        break;
      }
      case 'contextExhausted':
        endStream();
        note('context exhausted: continue with `bedrock new --from ID`');
        break;
      case 'notice':
        // For the user only (the model never sees it), e.g. thinking left out of a tool loop.
        endStream();
        note(k.value.text);
        break;
      case 'historyRewound':
        // RewindConversation cut the history: what was printed after the kept message is gone.
        endStream();
        note(`history rewound: messages after #${k.value.through} were removed; new ones are numbered from #${k.value.through + 1n}`);
        break;
      case 'subAgentProgress':
        note(`sub-agent ${k.value.subAgentId} ${stateName(k.value.state)} (${k.value.finishedCount}/${k.value.totalCount} done)`);
        break;
      case 'snapshot':
      case 'heartbeat':
      default:
        break;
    }
  };
  return Object.defineProperties(render, {
    lastState: { get: () => lastState },
    saidState: { get: () => saidState },
  }) as EventRenderer;
}
