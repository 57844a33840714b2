/**
 * The message log of one conversation: persisted messages in order, each tool call as a card
 * that later receives its live output and its result, plus the ephemeral parts (streamed
 * text, tool output, retry and sub-agent notices) that the persisted messages replace.
 *
 * An agent answer shows its thinking collapsed (apart from the answer text), the provider's
 * own tools (web searches and fetches, with their results collapsed), numbered sources after
 * text that cites them, and how it ended when that matters: cut by the output limit, or
 * declined by the model (together with the error message that follows a refusal, said once).
 * A response the provider paused and the one that continues it are one answer.
 */
import {
  MessageType,
  StopReason,
  TokenDeltaKind,
  type ContentBlock,
  type Message,
  type SubAgentProgress,
  type TextBlock,
  type TokenDelta,
  type ToolResultBlock,
  type ToolUseBlock,
} from '@bedrock/contracts';
import { StateKind } from '@bedrock/contracts';
import {
  citationSources,
  isRefusalError,
  refusalWithError,
  safeUrl,
  serverToolLine,
  serverToolView,
  SourceNumbers,
  stopMarker,
  THINKING_NOT_SHOWN,
  THINKING_REDACTED,
  thoughtSummary,
  usageExtras,
  type Source,
} from '@bedrock/agent-view/agent-content';
import { h, replace } from './dom.ts';
import { diffLines, formatTokens, patchDisplay, toolInputText, toolSummary } from '@bedrock/agent-view/format';

/** Results longer than this many lines start folded. */
const FOLD_LINES = 24;

interface ToolCard {
  readonly el: HTMLElement;
  readonly badge: HTMLElement;
  readonly live: HTMLPreElement;
  readonly result: HTMLElement;
  done: boolean;
}

/** One answer of the agent on screen: one persisted agent message, or several when the provider paused it. */
interface AgentBubble {
  readonly el: HTMLElement;
  /** Sources, the marker and usage: always after the content. */
  readonly foot: HTMLElement;
  readonly sources: SourceNumbers;
  readonly sourceList: HTMLOListElement;
  readonly marker: HTMLElement;
  readonly usageEl: HTMLElement;
  readonly usage: { thinkingTokens: bigint; webSearchRequests: bigint; webFetchRequests: bigint };
  /** How the last message in it ended. */
  stop: StopReason;
  explanation: string;
}

/** A response streaming in: its thinking (collapsed) and its answer text, by block index. */
interface LiveEntry {
  readonly el: HTMLElement;
  readonly body: HTMLElement;
  readonly thinking: Map<number, string>;
  readonly text: Map<number, string>;
  details?: { el: HTMLDetailsElement; text: HTMLElement };
}

export class Transcript {
  readonly el: HTMLElement;
  private readonly list: HTMLOListElement;
  private readonly empty: HTMLElement;
  private readonly seen = new Set<string>();
  private readonly tools = new Map<string, ToolCard>();
  private readonly live = new Map<string, LiveEntry>();
  /** Web search and fetch calls by id, which their results (possibly in a later message) join. */
  private readonly serverTools = new Map<string, HTMLElement>();
  private lastAgent: AgentBubble | undefined;
  private readonly subAgents = new Map<string, HTMLElement>();
  private readonly objectUrls: string[] = [];
  private runningToolId = '';

  constructor() {
    this.list = h('ol', { class: 'transcript-list' });
    this.empty = h('p', { class: 'transcript-empty' }, 'No messages yet. Ask the agent something below.');
    this.el = h(
      'section',
      { class: 'transcript', role: 'log', 'aria-label': 'Messages', 'aria-live': 'polite', tabindex: 0 },
      this.empty,
      this.list,
    );
  }

  /** Starts over from a snapshot. */
  reset(messages: readonly Message[]): void {
    for (const url of this.objectUrls.splice(0)) URL.revokeObjectURL(url);
    this.seen.clear();
    this.tools.clear();
    this.live.clear();
    this.serverTools.clear();
    this.lastAgent = undefined;
    this.subAgents.clear();
    replace(this.list);
    for (const m of messages) this.add(m);
    this.updateEmpty();
  }

  /** Adds a persisted message (a message seen before is ignored). */
  add(message: Message): void {
    if (this.seen.has(message.id)) return;
    this.seen.add(message.id);
    if (message.type === MessageType.AGENT) {
      this.clearStreamedText();
      this.addAgent(message);
      this.updateEmpty();
      return;
    }
    if (message.type === MessageType.TOOL) {
      for (const block of message.content) if (block.block.case === 'toolResult') this.attachResult(block.block.value);
      this.updateEmpty();
      return;
    }
    // The error message that follows a refusal is said in the refusal's marker, once.
    if (message.type === MessageType.ERROR && this.joinRefusal(textOf(message))) return;
    const item = this.renderMessage(message);
    if (item) this.push(item);
  }

  tokenDelta(delta: TokenDelta): void {
    let entry = this.live.get(delta.requestId);
    if (!entry) {
      const body = h('div', { class: 'msg-body' });
      // The continuation of a paused answer streams into that answer.
      const paused = this.pausedBubble();
      const el = paused
        ? h('div', { class: 'msg-streaming-part', 'aria-busy': 'true' }, body)
        : h('li', { class: 'msg msg-agent msg-streaming', 'aria-busy': 'true' }, h('div', { class: 'msg-who' }, 'Agent'), body);
      entry = { el, body, thinking: new Map(), text: new Map() };
      this.live.set(delta.requestId, entry);
      if (paused) {
        paused.foot.before(el);
        this.scroll();
      } else this.push(el);
    }
    if (delta.kind === TokenDeltaKind.THINKING) {
      entry.thinking.set(delta.blockIndex, (entry.thinking.get(delta.blockIndex) ?? '') + delta.text);
      if (!entry.details) {
        const text = h('div', { class: 'thinking-text' });
        const el = h('details', { class: 'thinking thinking-live' }, h('summary', {}, 'Thinking…'), text);
        entry.body.before(el);
        entry.details = { el, text };
      }
      // Only the text changes: the section stays open or closed as the user left it.
      entry.details.text.textContent = joinBlocks(entry.thinking);
    } else {
      entry.text.set(delta.blockIndex, (entry.text.get(delta.blockIndex) ?? '') + delta.text);
      replace(entry.body, ...renderText(joinBlocks(entry.text)));
    }
    this.scroll();
  }

  toolOutput(toolUseId: string, text: string): void {
    const card = this.tools.get(toolUseId);
    if (!card || card.done) return;
    card.live.hidden = false;
    card.live.textContent = (card.live.textContent ?? '') + text;
    card.live.scrollTop = card.live.scrollHeight;
    this.scroll();
  }

  /** The state decides which tool card says "running" and drops text that will never be persisted. */
  onState(kind: StateKind, currentToolUseId: string): void {
    this.runningToolId = kind === StateKind.TOOL_EXECUTING ? currentToolUseId : '';
    for (const [id, card] of this.tools) if (!card.done) setBadge(card, id === this.runningToolId ? 'running' : 'waiting');
    if (kind !== StateKind.LLM_REQUESTING && kind !== StateKind.AWAITING_LLM && kind !== StateKind.AWAITING_CONTINUATION)
      this.clearStreamedText();
  }

  notice(text: string, tone: 'info' | 'warn' | 'error' = 'info'): void {
    this.push(h('li', { class: `notice notice-${tone}` }, text));
  }

  subAgentProgress(p: SubAgentProgress): void {
    const finished = p.state === StateKind.COMPLETED || p.state === StateKind.FAILED;
    const status = finished ? (p.success ? 'done' : 'failed') : 'working';
    const body = [
      h('span', { class: `badge badge-${status === 'done' ? 'ok' : status === 'failed' ? 'error' : 'running'}` }, status),
      ' ',
      h('strong', {}, `Sub-agent ${p.finishedCount} of ${p.totalCount} finished`),
      h('div', { class: 'subagent-task' }, p.task),
      p.result ? h('pre', { class: 'tool-output' }, p.result) : null,
    ];
    const existing = this.subAgents.get(p.subAgentId);
    if (existing) replace(existing, ...body);
    else {
      const el = h('li', { class: 'notice notice-info subagent' }, ...body);
      this.subAgents.set(p.subAgentId, el);
      this.push(el);
    }
  }

  /** The last answer on screen when the provider paused it and nothing came after it. */
  private pausedBubble(): AgentBubble | undefined {
    const last = this.lastAgent;
    return last && last.stop === StopReason.PAUSE_TURN && this.list.lastElementChild === last.el ? last : undefined;
  }

  private addAgent(m: Message): void {
    const bubble = this.pausedBubble() ?? this.newBubble();
    const parts = this.agentParts(m, bubble);
    bubble.stop = m.stopReason;
    bubble.explanation = m.stopExplanation;
    const u = m.usage;
    if (u) {
      bubble.usage.thinkingTokens += u.thinkingTokens;
      bubble.usage.webSearchRequests += u.webSearchRequests;
      bubble.usage.webFetchRequests += u.webFetchRequests;
    }
    for (const p of parts) bubble.foot.before(p);
    // The paused state is not news (the continuation follows in the same answer).
    const marker = m.stopReason === StopReason.PAUSE_TURN ? undefined : stopMarker(m.stopReason, m.stopExplanation);
    bubble.marker.hidden = !marker;
    bubble.marker.textContent = marker ?? '';
    bubble.marker.dataset.stop =
      m.stopReason === StopReason.MAX_TOKENS ? 'max-tokens' : m.stopReason === StopReason.REFUSAL ? 'refusal' : '';
    if (m.stopReason === StopReason.REFUSAL) bubble.marker.setAttribute('role', 'note');
    else bubble.marker.removeAttribute('role');
    const extras = usageExtras(bubble.usage, formatTokens);
    bubble.usageEl.hidden = !extras;
    bubble.usageEl.textContent = extras;
    bubble.sourceList.hidden = bubble.sources.sources.length === 0;
    if (bubble.el.isConnected) {
      this.scroll();
      return;
    }
    // An answer with nothing to show (an empty response that ended normally) takes no room.
    if (parts.length === 0 && !marker && !extras) return;
    this.lastAgent = bubble;
    this.push(bubble.el);
  }

  private newBubble(): AgentBubble {
    const sourceList = h('ol', { class: 'sources', 'aria-label': 'Sources', hidden: true });
    const marker = h('p', { class: 'stop-marker', hidden: true });
    const usageEl = h('p', { class: 'msg-usage', hidden: true });
    const foot = h('div', { class: 'msg-foot' }, sourceList, marker, usageEl);
    const el = h('li', { class: 'msg msg-agent' }, h('div', { class: 'msg-who' }, 'Agent'), foot);
    return {
      el,
      foot,
      sources: new SourceNumbers(),
      sourceList,
      marker,
      usageEl,
      usage: { thinkingTokens: 0n, webSearchRequests: 0n, webFetchRequests: 0n },
      stop: StopReason.UNSPECIFIED,
      explanation: '',
    };
  }

  /** The error message that follows a refused answer becomes that answer's marker text; false if `text` is not that. */
  private joinRefusal(text: string): boolean {
    const last = this.lastAgent;
    if (!last || last.stop !== StopReason.REFUSAL || this.list.lastElementChild !== last.el || !isRefusalError(text)) return false;
    last.marker.textContent = refusalWithError(last.explanation, text);
    last.marker.setAttribute('role', 'alert');
    last.marker.dataset.type = 'error';
    return true;
  }

  /** The blocks of an agent message as elements, in order. */
  private agentParts(m: Message, bubble: AgentBubble): HTMLElement[] {
    const parts: HTMLElement[] = [];
    let run: TextBlock[] = [];
    const flush = () => {
      if (run.length) parts.push(...this.textRun(run, bubble));
      run = [];
    };
    for (const b of m.content) {
      if (b.block.case === 'text') {
        run.push(b.block.value);
        continue;
      }
      flush();
      switch (b.block.case) {
        case 'thinking': {
          const t = b.block.value.thinking;
          parts.push(
            t.trim()
              ? h('details', { class: 'thinking' }, h('summary', {}, thoughtSummary(t)), h('div', { class: 'thinking-text' }, t))
              : h('p', { class: 'thinking-note' }, THINKING_NOT_SHOWN),
          );
          break;
        }
        case 'redactedThinking':
          parts.push(h('p', { class: 'thinking-note' }, THINKING_REDACTED));
          break;
        case 'toolUse':
          parts.push(this.toolCard(b.block.value));
          break;
        case 'serverTool': {
          const part = this.serverToolPart(b.block.value.blockType, b.block.value.blockJson);
          if (part) parts.push(part);
          break;
        }
        default:
          break;
      }
    }
    flush();
    return parts;
  }

  /**
   * Consecutive text blocks. Without citations each is shown as before; with them (a web
   * answer, split by the provider where its sources change) they read as one text, each cited
   * piece followed by its source numbers, listed under the answer.
   */
  private textRun(blocks: readonly TextBlock[], bubble: AgentBubble): HTMLElement[] {
    const cited = blocks.map((b) => citationSources(b.citationsJson));
    if (cited.every((c) => c.length === 0)) {
      return blocks.filter((b) => b.text.trim()).map((b) => h('div', { class: 'msg-body' }, ...renderText(b.text)));
    }
    const pieces: (HTMLElement | string)[] = [];
    blocks.forEach((b, i) => {
      pieces.push(b.text);
      const numbers = [...new Set(cited[i]!.map((source) => this.cite(bubble, source)))];
      for (const n of numbers) {
        const source = bubble.sources.sources[n - 1]!;
        pieces.push(
          h(
            'sup',
            { class: 'cite' },
            source.url
              ? h('a', { href: source.url, target: '_blank', rel: 'noopener noreferrer', title: source.title }, `[${n}]`)
              : `[${n}]`,
          ),
        );
      }
    });
    return [h('div', { class: 'msg-body' }, h('p', { class: 'text' }, ...pieces))];
  }

  /** The number of a cited source in this answer; a new one is added to its list. */
  private cite(bubble: AgentBubble, source: Source): number {
    const before = bubble.sources.sources.length;
    const n = bubble.sources.number(source);
    if (bubble.sources.sources.length > before) bubble.sourceList.append(h('li', {}, sourceLink(source)));
    return n;
  }

  /** A web search or fetch (a card its result joins later), or a result joining its call's card. */
  private serverToolPart(blockType: string, blockJson: string): HTMLElement | undefined {
    const view = serverToolView(blockType, blockJson);
    const line = serverToolLine(view);
    switch (view.kind) {
      case 'search':
      case 'fetch': {
        const head =
          view.kind === 'fetch' && view.url
            ? h('p', { class: 'server-tool-head' }, 'Fetched ', sourceLink({ title: view.url, url: safeUrl(view.url) }))
            : h('p', { class: 'server-tool-head' }, line);
        const card = h('div', { class: 'server-tool', 'data-server-tool': view.kind }, head);
        if (view.id) this.serverTools.set(view.id, card);
        return card;
      }
      case 'search-results':
      case 'fetch-result':
      case 'error': {
        const result =
          view.kind === 'search-results'
            ? h(
                'details',
                { class: 'server-results' },
                h('summary', {}, line),
                h(
                  'ol',
                  {},
                  view.results.map((r) => h('li', {}, sourceLink(r))),
                ),
              )
            : view.kind === 'fetch-result'
              ? h('p', { class: 'server-result' }, 'Read: ', sourceLink(view.source))
              : h('p', { class: 'server-result server-error', 'data-status': 'error' }, line);
        const card = this.serverTools.get(view.toolUseId);
        if (card) {
          card.append(result);
          return undefined;
        }
        return h('div', { class: 'server-tool' }, result);
      }
      case 'other':
        return h('div', { class: 'server-tool server-tool-other' }, h('p', { class: 'server-tool-head' }, line));
    }
  }

  private clearStreamedText(): void {
    for (const { el } of this.live.values()) el.remove();
    this.live.clear();
  }

  private push(el: HTMLElement): void {
    const nearBottom = this.el.scrollHeight - this.el.scrollTop - this.el.clientHeight < 120;
    this.list.append(el);
    this.updateEmpty();
    if (nearBottom) this.scroll();
  }

  private scroll(): void {
    this.el.scrollTop = this.el.scrollHeight;
  }

  private updateEmpty(): void {
    this.empty.hidden = this.list.childElementCount > 0;
  }

  private renderMessage(m: Message): HTMLElement | undefined {
    switch (m.type) {
      case MessageType.USER:
        return h(
          'li',
          { class: 'msg msg-user' },
          h('div', { class: 'msg-who' }, 'You'),
          h('div', { class: 'msg-body' }, ...m.content.map((b) => this.userBlock(b))),
        );
      case MessageType.SYSTEM:
        return h('li', { class: 'notice notice-info', 'data-type': 'system' }, textOf(m));
      case MessageType.ERROR:
        return h('li', { class: 'notice notice-error', role: 'alert', 'data-type': 'error' }, textOf(m));
      case MessageType.CONTINUATION:
        return h(
          'li',
          { class: 'continuation', 'data-type': 'continuation' },
          h('h3', {}, 'Continuation summary'),
          h('div', { class: 'msg-body' }, ...renderText(textOf(m))),
        );
      default:
        return h('li', { class: 'notice' }, textOf(m));
    }
  }

  private userBlock(b: ContentBlock): HTMLElement | null {
    if (b.block.case === 'text') return h('div', {}, ...renderText(b.block.value.text));
    if (b.block.case === 'image') {
      const bytes = b.block.value.data;
      const url = URL.createObjectURL(new Blob([bytes.slice()], { type: b.block.value.mediaType }));
      this.objectUrls.push(url);
      return h(
        'a',
        { href: url, target: '_blank', rel: 'noopener', class: 'thumb-link' },
        h('img', { class: 'thumb', src: url, alt: 'Attached image' }),
      );
    }
    return null;
  }

  private toolCard(use: ToolUseBlock): HTMLElement {
    const badge = h('span', { class: 'badge badge-waiting' }, 'waiting');
    const summary = toolSummary(use.name, use.inputJson);
    const showInput = use.name !== 'bash' || toolInputText(use.name, use.inputJson).includes('\n');
    const live = h('pre', { class: 'tool-output tool-live', hidden: true, 'aria-label': 'Live output' });
    const result = h('div', { class: 'tool-result' });
    const el = h(
      'article',
      { class: 'tool', 'data-tool': use.name, 'data-tool-id': use.id },
      h(
        'header',
        { class: 'tool-head' },
        h('span', { class: 'tool-name' }, use.name),
        summary ? h('code', { class: 'tool-summary' }, summary) : null,
        badge,
      ),
      showInput
        ? h('details', { class: 'tool-input' }, h('summary', {}, 'Input'), h('pre', {}, toolInputText(use.name, use.inputJson)))
        : null,
      live,
      result,
    );
    const card: ToolCard = { el, badge, live, result, done: false };
    this.tools.set(use.id, card);
    if (use.id === this.runningToolId) setBadge(card, 'running');
    return el;
  }

  private attachResult(r: ToolResultBlock): void {
    let card = this.tools.get(r.toolUseId);
    if (!card) {
      // A result whose call is not shown (e.g. a snapshot cut): show it on its own.
      this.push(
        h('li', { class: 'msg msg-agent' }, this.toolCard({ id: r.toolUseId, name: 'tool result', inputJson: '' } as ToolUseBlock)),
      );
      card = this.tools.get(r.toolUseId)!;
    }
    card.done = true;
    card.live.hidden = true;
    card.live.textContent = '';
    setBadge(card, r.cancelled ? 'cancelled' : r.isError ? 'error' : 'ok');
    card.el.classList.toggle('tool-error', r.isError);
    const patch = patchDisplay(r.displayJson);
    const parts: HTMLElement[] = [];
    if (patch) parts.push(renderDiff(patch.diff, patch.path, patch.created));
    if (!patch || r.isError) parts.push(foldable(r.content || '(no output)', r.isError ? 'tool-output output-error' : 'tool-output'));
    replace(card.result, ...parts);
  }
}

function setBadge(card: ToolCard, status: 'waiting' | 'running' | 'ok' | 'error' | 'cancelled'): void {
  const words = { waiting: 'waiting', running: 'running…', ok: 'done', error: 'error', cancelled: 'cancelled' };
  card.badge.className = `badge badge-${status}`;
  card.badge.textContent = words[status];
  card.el.dataset.status = status;
}

/** Streamed blocks in order: adjacent ones are one text (the provider splits cited text), others a paragraph apart. */
function joinBlocks(blocks: Map<number, string>): string {
  let out = '';
  let prev: number | undefined;
  for (const [i, t] of [...blocks.entries()].sort(([a], [b]) => a - b)) {
    out += prev === undefined ? t : i === prev + 1 ? t : `\n\n${t}`;
    prev = i;
  }
  return out;
}

/** A source as a link that opens apart (plain text when it has no http(s) address). */
function sourceLink(source: Source): HTMLElement {
  if (!source.url) return h('span', { class: 'source' }, source.title);
  return h('a', { class: 'source', href: source.url, target: '_blank', rel: 'noopener noreferrer' }, source.title);
}

function textOf(m: Message): string {
  return m.content.flatMap((b) => (b.block.case === 'text' ? [b.block.value.text] : [])).join('\n\n');
}

/** Plain text with ``` fences shown as code blocks; no HTML is ever interpreted. */
export function renderText(text: string): HTMLElement[] {
  const out: HTMLElement[] = [];
  const parts = text.split(/^```[^\n]*\n?/m);
  parts.forEach((part, i) => {
    if (!part) return;
    if (i % 2 === 1) out.push(h('pre', { class: 'code' }, part.replace(/\n$/, '')));
    else out.push(h('p', { class: 'text' }, part.replace(/^\n+|\n+$/g, '')));
  });
  return out;
}

function foldable(text: string, cls: string): HTMLElement {
  const lines = text.split('\n').length;
  const pre = h('pre', { class: cls }, text);
  if (lines <= FOLD_LINES) return pre;
  return h('details', { class: 'fold' }, h('summary', {}, `Output (${lines} lines)`), pre);
}

function renderDiff(diff: string, path: string, created: boolean): HTMLElement {
  const rows = diffLines(diff).map((l) => h('span', { class: `diff-line diff-${l.kind}` }, l.text || ' '));
  return h(
    'figure',
    { class: 'diff' },
    h('figcaption', {}, created ? `Created ${path}` : `Changed ${path}`),
    h('pre', { class: 'diff-body', 'aria-label': `Diff of ${path}` }, ...rows),
  );
}
