/**
 * Messages as transcript lines (`show`; the live renderer uses its pieces): thinking under a
 * `thinking:` label, the provider's tools and compaction one line each, cited sources as
 * footnotes, and the one-line marker of an answer cut, paused or declined.
 */
import { MessageType, StopReason, type ContentBlock, type Message } from '@bedrock/contracts';
import {
  citationSources,
  compactionSummary,
  isRefusalError,
  refusalWithError,
  serverToolView,
  SourceNumbers,
  stopMarker,
  usageExtras,
  type ServerToolView,
} from '@bedrock/agent-view/agent-content';
import { formatTokens, toolLabel } from '@bedrock/agent-view/format';
import { dim, paint, type RenderOptions } from './render-style.ts';
import { toolResultLines } from './render-tool-output.ts';
import { cleanStrings } from './terminal-text.ts';

export function short(text: string, max = 200): string {
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
export function footnotes(numbers: SourceNumbers): string[] {
  return numbers.sources.map((s, i) => `  [${i + 1}] ${s.title}${s.url && s.url !== s.title ? ` ${s.url}` : ''}`);
}

/** A compaction block's marked line, dimmed: "⏺ context compacted by the provider (summary: 120 words)". */
export function compactionLine(content: string, options: RenderOptions): string {
  const text = compactionSummary(content);
  return dim(`⏺ ${text.charAt(0).toLowerCase()}${text.slice(1)}`, options);
}

/** The thinking of a block as lines under the label (undefined when hidden or not a thinking block). */
export function thinkingLines(block: ContentBlock, options: RenderOptions): string[] | undefined {
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

function joinsRefusal(agent: Message, error: Message): boolean {
  return (
    agent.type === MessageType.AGENT &&
    agent.stopReason === StopReason.REFUSAL &&
    error.type === MessageType.ERROR &&
    isRefusalError(textOf(error))
  );
}

export function textOf(m: Message): string {
  return m.content.flatMap((b) => (b.block.case === 'text' ? [b.block.value.text] : [])).join('\n');
}
