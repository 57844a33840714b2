/**
 * The message log of one conversation: persisted messages in order, each tool call as a card
 * that later receives its live output and its result, plus the ephemeral parts (streamed
 * text, tool output, retry and sub-agent notices) that the persisted messages replace.
 */
import { MessageType, type ContentBlock, type Message, type SubAgentProgress, type TokenDelta, type ToolResultBlock, type ToolUseBlock } from '@bedrock/contracts';
import { StateKind } from '@bedrock/contracts';
import { h, replace } from './dom.ts';
import { diffLines, patchDisplay, toolInputText, toolSummary } from './format.ts';

/** Results longer than this many lines start folded. */
const FOLD_LINES = 24;

interface ToolCard {
  readonly el: HTMLElement;
  readonly badge: HTMLElement;
  readonly live: HTMLPreElement;
  readonly result: HTMLElement;
  done: boolean;
}

export class Transcript {
  readonly el: HTMLElement;
  private readonly list: HTMLOListElement;
  private readonly empty: HTMLElement;
  private readonly seen = new Set<string>();
  private readonly tools = new Map<string, ToolCard>();
  private readonly live = new Map<string, { el: HTMLElement; blocks: Map<number, string> }>();
  private readonly subAgents = new Map<string, HTMLElement>();
  private readonly objectUrls: string[] = [];
  private runningToolId = '';

  constructor() {
    this.list = h('ol', { class: 'transcript-list' });
    this.empty = h('p', { class: 'transcript-empty' }, 'No messages yet. Ask the agent something below.');
    this.el = h('section', { class: 'transcript', role: 'log', 'aria-label': 'Messages', 'aria-live': 'polite', tabindex: 0 }, this.empty, this.list);
  }

  /** Starts over from a snapshot. */
  reset(messages: readonly Message[]): void {
    for (const url of this.objectUrls.splice(0)) URL.revokeObjectURL(url);
    this.seen.clear();
    this.tools.clear();
    this.live.clear();
    this.subAgents.clear();
    replace(this.list);
    for (const m of messages) this.add(m);
    this.updateEmpty();
  }

  /** Adds a persisted message (a message seen before is ignored). */
  add(message: Message): void {
    if (this.seen.has(message.id)) return;
    this.seen.add(message.id);
    if (message.type === MessageType.AGENT) this.clearStreamedText();
    if (message.type === MessageType.TOOL) {
      for (const block of message.content) if (block.block.case === 'toolResult') this.attachResult(block.block.value);
      this.updateEmpty();
      return;
    }
    const item = this.renderMessage(message);
    if (item) this.push(item);
  }

  tokenDelta(delta: TokenDelta): void {
    let entry = this.live.get(delta.requestId);
    if (!entry) {
      const el = h('li', { class: 'msg msg-agent msg-streaming', 'aria-busy': 'true' }, h('div', { class: 'msg-who' }, 'Agent'), h('div', { class: 'msg-body' }));
      entry = { el, blocks: new Map() };
      this.live.set(delta.requestId, entry);
      this.push(el);
    }
    entry.blocks.set(delta.blockIndex, (entry.blocks.get(delta.blockIndex) ?? '') + delta.text);
    const text = [...entry.blocks.entries()].sort(([a], [b]) => a - b).map(([, t]) => t).join('\n\n');
    replace(entry.el.querySelector('.msg-body')!, ...renderText(text));
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
    if (kind !== StateKind.LLM_REQUESTING && kind !== StateKind.AWAITING_LLM && kind !== StateKind.AWAITING_CONTINUATION) this.clearStreamedText();
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
        return h('li', { class: 'msg msg-user' }, h('div', { class: 'msg-who' }, 'You'), h('div', { class: 'msg-body' }, ...m.content.map((b) => this.userBlock(b))));
      case MessageType.AGENT: {
        const parts: HTMLElement[] = [];
        for (const b of m.content) {
          if (b.block.case === 'text' && b.block.value.text.trim()) parts.push(h('div', { class: 'msg-body' }, ...renderText(b.block.value.text)));
          else if (b.block.case === 'toolUse') parts.push(this.toolCard(b.block.value));
        }
        if (parts.length === 0) return undefined;
        return h('li', { class: 'msg msg-agent' }, h('div', { class: 'msg-who' }, 'Agent'), ...parts);
      }
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
      return h('a', { href: url, target: '_blank', rel: 'noopener', class: 'thumb-link' }, h('img', { class: 'thumb', src: url, alt: 'Attached image' }));
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
      h('header', { class: 'tool-head' }, h('span', { class: 'tool-name' }, use.name), summary ? h('code', { class: 'tool-summary' }, summary) : null, badge),
      showInput ? h('details', { class: 'tool-input' }, h('summary', {}, 'Input'), h('pre', {}, toolInputText(use.name, use.inputJson))) : null,
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
      this.push(h('li', { class: 'msg msg-agent' }, this.toolCard({ id: r.toolUseId, name: 'tool result', inputJson: '' } as ToolUseBlock)));
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
