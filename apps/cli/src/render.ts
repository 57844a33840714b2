/**
 * Human-readable output: the agent's text and tool activity on stdout, state lines on stderr.
 * The model's thinking is printed under a `thinking:` label, dimmed on a terminal (or left out
 * with --hide-thinking); the provider's own tools (web search, web fetch) one line each; the
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
import { formatTokens } from '@bedrock/agent-view/format';
import type { Output } from './output.ts';

export { stdio, type Output } from './output.ts';

/** How people's output looks. */
export interface RenderOptions {
  /** Leave the model's thinking out (--hide-thinking). */
  readonly hideThinking?: boolean;
  /** ANSI styles (dim thinking): only when stdout is a terminal. */
  readonly color?: boolean;
}

const DIM = '\x1b[2m';
const UNDIM = '\x1b[22m';

function dim(text: string, options: RenderOptions): string {
  return options.color && text ? `${DIM}${text}${UNDIM}` : text;
}

export function ndjson(event: ConversationEvent): string {
  return `${JSON.stringify(toJson(ConversationEventSchema, event))}\n`;
}

export function stateName(kind: StateKind | undefined): string {
  return (StateKind[kind ?? StateKind.UNSPECIFIED] ?? 'UNKNOWN').toLowerCase();
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
      return `asks for write access: ${state.upgradeReason}`;
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
export function stopLine(m: Pick<Message, 'stopReason' | 'stopExplanation'>): string | undefined {
  const marker = stopMarker(m.stopReason, m.stopExplanation);
  if (!marker) return undefined;
  return m.stopReason === StopReason.REFUSAL ? `✗ ${marker}` : `⋯ ${marker}`;
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
export function renderMessage(m: Message, options: RenderOptions = {}, context: { previous?: Message; next?: Message } = {}): string {
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
      case 'toolUse':
        lines.push(`tool ${block.block.value.name} ${short(block.block.value.inputJson)}`);
        break;
      case 'toolResult': {
        const r = block.block.value;
        const tag = r.cancelled ? 'cancelled' : r.isError ? 'error' : 'ok';
        lines.push(`  → ${tag}: ${short(r.content)}`);
        break;
      }
      case 'serverTool':
        lines.push(serverToolText(serverToolView(block.block.value.blockType, block.block.value.blockJson)));
        break;
      default:
        break;
    }
  }
  lines.push(...footnotes(numbers));
  if (m.type === MessageType.AGENT) {
    const next = context.next;
    if (m.stopReason === StopReason.REFUSAL && next && joinsRefusal(m, next))
      lines.push(`✗ ${refusalWithError(m.stopExplanation, textOf(next))}`);
    else {
      const marker = stopLine(m);
      if (marker) lines.push(marker);
    }
    const extras = usageExtras(m.usage, formatTokens);
    if (extras) lines.push(`  (${extras})`);
  }
  return lines.map((l) => `${l}\n`).join('');
}

/** Messages as transcript lines (a refusal and the error message after it said once). */
export function renderMessages(messages: readonly Message[], options: RenderOptions = {}): string {
  return messages.map((m, i) => renderMessage(m, options, { previous: messages[i - 1], next: messages[i + 1] })).join('');
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

export function renderConversationLine(c: Conversation): string {
  const updated = c.updatedAt ? new Date(Number(c.updatedAt.seconds) * 1000).toISOString().replace('.000Z', 'Z') : '';
  return `${c.id}  ${stateName(c.state?.kind).padEnd(22)} ${modeName(c.mode).padEnd(12)} ${updated}  ${c.cwd}\n`;
}

/** Live rendering of watch events for people. */
export function createEventRenderer(output: Output, options: RenderOptions = {}): (event: ConversationEvent) => void {
  /** What is streaming now: a line is open on stdout. */
  let streaming: 'text' | 'thinking' | undefined;
  let streamBlock = -1;
  /** What the current response streamed (its persisted message need not print it again). */
  let streamed = { text: false, thinking: false };
  /** A refused agent message whose marker waits for the error message that says why (said once). */
  let refused: Message | undefined;
  const endStream = () => {
    if (streaming) output.out('\n');
    streaming = undefined;
  };
  const flushRefusal = () => {
    if (refused) output.out(`✗ ${refusalText(refused.stopExplanation)}\n`);
    refused = undefined;
  };
  return (event) => {
    const k = event.kind;
    if (refused && !(k.case === 'messagePersisted' && k.value.message?.type === MessageType.ERROR)) flushRefusal();
    switch (k.case) {
      case 'tokenDelta': {
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
      case 'toolOutput':
        output.err(k.value.text);
        break;
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
            else if (b.block.case === 'toolUse') output.out(`⏺ ${b.block.value.name} ${short(b.block.value.inputJson)}\n`);
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
            const marker = stopLine(m);
            if (marker) output.out(`${marker}\n`);
          }
        } else if (m.type === MessageType.TOOL) {
          endStream();
          output.out(renderMessage(m, options));
        } else if (m.type === MessageType.ERROR && refused) {
          endStream();
          const agent = refused;
          refused = undefined;
          if (isRefusalError(textOf(m))) output.out(`✗ ${refusalWithError(agent.stopExplanation, textOf(m))}\n`);
          else output.out(`✗ ${refusalText(agent.stopExplanation)}\n${renderMessage(m, options)}`);
        } else if (m.type === MessageType.ERROR || m.type === MessageType.CONTINUATION || m.type === MessageType.SYSTEM) {
          endStream();
          output.out(renderMessage(m, options));
        }
        break;
      }
      case 'stateChanged':
        endStream();
        output.err(`· ${describeState(k.value.state)}\n`);
        break;
      case 'retryScheduled':
        endStream();
        output.err(
          `· ${k.value.errorMessage}: retrying in ${Number(k.value.delayMs) / 1000}s (attempt ${k.value.attempt} of ${k.value.maxAttempts})\n`,
        );
        break;
      case 'modeUpgradeRequested':
        endStream();
        output.err(`· the agent asks for write access: ${k.value.reason}\n`);
        break;
      case 'modeChanged':
        output.err(`· mode: ${modeName(k.value.mode)}\n`);
        break;
      case 'contextWarning': {
        const u = k.value.contextUsage;
        if (u && u.contextWindow > 0n)
          output.err(`· context ${Math.round((Number(u.usedTokens) / Number(u.contextWindow)) * 100)}% full\n`);
        break;
      }
      case 'contextExhausted':
        endStream();
        output.err('· context exhausted: continue with `bedrock new --from ID`\n');
        break;
      case 'subAgentProgress':
        output.err(`· sub-agent ${k.value.subAgentId} ${stateName(k.value.state)} (${k.value.finishedCount}/${k.value.totalCount} done)\n`);
        break;
      case 'snapshot':
      case 'heartbeat':
      default:
        break;
    }
  };
}
