/**
 * What the transcript shows, as data (no DOM; transcript.tsx draws it): persisted messages in order, each tool call as a card
 * that later receives its live output and its result, plus the ephemeral parts (streamed text, tool output, retry and sub-agent
 * notices) that the persisted messages replace. The items are in transcript-items.ts, an answer's parts made in transcript-parts.ts.
 */
import {
  MessageType,
  StateKind,
  StopReason,
  TokenDeltaKind,
  type Message,
  type SubAgentProgress,
  type TokenDelta,
  type ToolResultBlock,
  type ToolUseBlock,
} from '@bedrock/contracts';
import { timestampMs } from '@bufbuild/protobuf/wkt';
import { isRefusalError, refusalWithError, SourceNumbers, stopMarker, usageExtras } from '@bedrock/agent-view/agent-content';
import { formatTokens, patchDisplay } from '@bedrock/agent-view/format';
import { nextKey, type AgentItem, type Item, type Live, type ServerToolCard, type ToolCard, type ToolStatus } from './transcript-items.ts';
import { agentParts, toolCard, type Calls } from './transcript-parts.ts';

export class TranscriptModel {
  items: Item[] = [];
  /** Bumped on every change (the view's cue to render). */
  version = 0;
  private readonly seen = new Set<string>();
  private readonly tools = new Map<string, { card: ToolCard; owner: AgentItem }>();
  private readonly live = new Map<string, { live: Live; owner: Item }>();
  /** Web search and fetch calls by id, which their results (possibly in a later message) join. */
  private readonly serverTools = new Map<string, { card: ServerToolCard; owner: AgentItem }>();
  private lastAgent: AgentItem | undefined;
  private readonly subAgents = new Map<string, Item & { kind: 'subagent' }>();
  private runningToolId = '';
  /** The persisted messages shown, in order (a history rewind keeps a prefix of them). */
  private messages: Message[] = [];

  /** Starts over from a snapshot. */
  reset(messages: readonly Message[]): void {
    this.messages = [];
    this.items = [];
    this.seen.clear();
    this.tools.clear();
    this.live.clear();
    this.serverTools.clear();
    this.lastAgent = undefined;
    this.subAgents.clear();
    for (const m of messages) this.add(m);
    this.changed();
  }

  /** The history was rewound (`history_rewound`): only the messages through `through` stay. */
  cut(through: bigint): void {
    this.reset(this.messages.filter((m) => m.sequence <= through));
  }

  /** Adds a persisted message (a message seen before is ignored). */
  add(message: Message): void {
    if (this.seen.has(message.id)) return;
    this.seen.add(message.id);
    this.messages.push(message);
    const at = message.createdAt ? timestampMs(message.createdAt) : undefined;
    switch (message.type) {
      case MessageType.AGENT: {
        const streamed = this.streamedAnswer();
        this.clearStreamedText(streamed);
        this.addAgent(message, at, streamed);
        break;
      }
      case MessageType.TOOL:
        for (const block of message.content) if (block.block.case === 'toolResult') this.attachResult(block.block.value, message.sequence);
        break;
      case MessageType.USER:
        this.push({ kind: 'user', key: message.id, blocks: message.content, at, forkAt: message.sequence, rev: 0 });
        break;
      case MessageType.SYSTEM:
        this.push({ kind: 'notice', key: message.id, tone: 'info', type: 'system', text: textOf(message), at, rev: 0 });
        break;
      case MessageType.ERROR:
        // The error message that follows a refusal is said in the refusal's marker, once.
        if (this.joinRefusal(textOf(message))) break;
        this.push({ kind: 'notice', key: message.id, tone: 'error', type: 'error', text: textOf(message), at, rev: 0 });
        break;
      case MessageType.CONTINUATION:
        this.push({ kind: 'continuation', key: message.id, text: textOf(message), at, rev: 0 });
        break;
      default:
        this.push({ kind: 'notice', key: message.id, tone: 'info', type: 'other', text: textOf(message), at, rev: 0 });
    }
    this.changed();
  }

  tokenDelta(delta: TokenDelta): void {
    let entry = this.live.get(delta.requestId);
    if (!entry) {
      const live: Live = { requestId: delta.requestId, thinking: new Map(), compaction: new Map(), text: new Map(), rev: 0 };
      // The continuation of a paused answer streams into that answer.
      const paused = this.pausedAnswer();
      if (paused) {
        paused.parts = [...paused.parts, { kind: 'live', key: nextKey('live'), live }];
        entry = { live, owner: paused };
      } else {
        const item: AgentItem = {
          ...emptyAnswer(nextKey('streaming')),
          parts: [{ kind: 'live', key: nextKey('live'), live }],
          streaming: true,
        };
        this.push(item);
        entry = { live, owner: item };
      }
      this.live.set(delta.requestId, entry);
    }
    const blocks = this.liveBlocks(entry.live, delta.kind);
    blocks.set(delta.blockIndex, (blocks.get(delta.blockIndex) ?? '') + delta.text);
    entry.live.rev++;
    entry.owner.rev++;
    this.changed();
  }

  /** Where a delta of this kind streams: thinking and compaction apart from the answer. */
  private liveBlocks(live: Live, kind: TokenDeltaKind): Map<number, string> {
    switch (kind) {
      case TokenDeltaKind.THINKING:
        return live.thinking;
      case TokenDeltaKind.COMPACTION:
        return live.compaction;
      case TokenDeltaKind.TEXT:
      case TokenDeltaKind.UNSPECIFIED:
        return live.text;
      default: {
        // A kind newer than this UI: kept out of the answer text.
        const unknown: never = kind;
        void unknown;
        return new Map();
      }
    }
  }

  toolOutput(toolUseId: string, text: string): void {
    const found = this.tools.get(toolUseId);
    if (!found || found.card.result) return;
    found.card.live += text;
    this.touchCard(found.card, found.owner);
  }

  /** The state decides which tool card says "running" and drops text that will never be persisted. */
  onState(kind: StateKind, currentToolUseId: string): void {
    this.runningToolId = kind === StateKind.TOOL_EXECUTING ? currentToolUseId : '';
    for (const [id, { card, owner }] of this.tools) {
      if (card.result) continue;
      const status: ToolStatus = id === this.runningToolId ? 'running' : 'waiting';
      if (card.status !== status) {
        card.status = status;
        this.touchCard(card, owner);
      }
    }
    // Cancelling keeps it: the text that streamed comes back as the cancelled answer, in its place.
    if (
      kind !== StateKind.LLM_REQUESTING &&
      kind !== StateKind.AWAITING_LLM &&
      kind !== StateKind.AWAITING_CONTINUATION &&
      kind !== StateKind.CANCELLING
    )
      if (this.clearStreamedText()) this.changed();
  }

  notice(text: string, tone: 'info' | 'warn' | 'error', type: 'retry' | 'context' | 'other', at = Date.now()): void {
    this.push({ kind: 'notice', key: nextKey('notice'), tone, type, text, at, rev: 0 });
    this.changed();
  }

  subAgentProgress(p: SubAgentProgress): void {
    const existing = this.subAgents.get(p.subAgentId);
    if (existing) {
      existing.progress = p;
      existing.rev++;
    } else {
      const item = { kind: 'subagent' as const, key: nextKey('subagent'), progress: p, rev: 0 };
      this.subAgents.set(p.subAgentId, item);
      this.push(item);
    }
    this.changed();
  }

  private changed(): void {
    this.version++;
    this.onChange();
  }

  /** Called on every change (the transcript view draws it on the next frame). */
  onChange: () => void = () => {};

  private touchCard(card: ToolCard, owner: AgentItem): void {
    card.rev++;
    owner.rev++;
    this.changed();
  }

  private push(item: Item): void {
    this.items = [...this.items, item];
  }

  private lastItem(): Item | undefined {
    return this.items[this.items.length - 1];
  }

  /** The last answer on screen when the provider paused it and nothing came after it. */
  private pausedAnswer(): AgentItem | undefined {
    const last = this.lastAgent;
    return last && last.stop === StopReason.PAUSE_TURN && this.lastItem() === last ? last : undefined;
  }

  /** The item of the answer streaming now, if one is (the message that ends the stream becomes it). */
  private streamedAnswer(): { answer: AgentItem; liveKey: string } | undefined {
    for (const { owner } of this.live.values()) {
      if (owner.kind !== 'agent' || !owner.streaming || !this.items.includes(owner)) continue;
      const live = owner.parts.find((p) => p.kind === 'live');
      return { answer: owner, liveKey: live?.key ?? '' };
    }
    return undefined;
  }

  private addAgent(m: Message, at: number | undefined, streamed?: { answer: AgentItem; liveKey: string }): void {
    const paused = this.pausedAnswer();
    const existing = paused ?? streamed?.answer;
    const answer: AgentItem = existing ?? { ...emptyAnswer(m.id), at };
    if (streamed && answer === streamed.answer) {
      answer.streaming = false;
      answer.at = at;
    }
    let parts = agentParts(m, answer, this.calls());
    // The answer's text takes the place (the key) of the text that streamed: it stays as drawn.
    const first = parts.findIndex((p) => p.kind === 'text' || p.kind === 'cited');
    if (streamed && first >= 0) parts = parts.map((p, i) => (i === first ? { ...p, key: streamed.liveKey } : p));
    answer.parts = [...answer.parts.filter((p) => p.kind !== 'live'), ...parts];
    answer.stop = m.stopReason;
    answer.explanation = m.stopExplanation;
    const u = m.usage;
    if (u) {
      answer.usage.thinkingTokens += u.thinkingTokens;
      answer.usage.webSearchRequests += u.webSearchRequests;
      answer.usage.webFetchRequests += u.webFetchRequests;
    }
    // The paused state is not news (the continuation follows in the same answer).
    const text = m.stopReason === StopReason.PAUSE_TURN ? undefined : stopMarker(m.stopReason, m.stopExplanation);
    answer.marker = text
      ? {
          text,
          stop:
            m.stopReason === StopReason.MAX_TOKENS
              ? 'max-tokens'
              : m.stopReason === StopReason.REFUSAL
                ? 'refusal'
                : m.stopReason === StopReason.CANCELLED
                  ? 'cancelled'
                  : '',
          role: m.stopReason === StopReason.REFUSAL ? 'note' : undefined,
          error: false,
        }
      : undefined;
    answer.usageText = usageExtras(answer.usage, formatTokens);
    answer.forkAt = m.stopReason !== StopReason.PAUSE_TURN && toolsAnswered(answer) ? m.sequence : undefined;
    answer.rev++;
    if (paused) return;
    // An answer with nothing to show (an empty response that ended normally) takes no room.
    if (parts.length === 0 && !text && !answer.usageText) {
      if (existing) this.items = this.items.filter((i) => i !== existing);
      return;
    }
    this.lastAgent = answer;
    if (!existing) this.push(answer);
  }

  /** The error message that follows a refused answer becomes that answer's marker text; false if `text` is not that. */
  private joinRefusal(text: string): boolean {
    const last = this.lastAgent;
    if (!last || last.stop !== StopReason.REFUSAL || this.lastItem() !== last || !isRefusalError(text)) return false;
    last.marker = { text: refusalWithError(last.explanation, text), stop: 'refusal', role: 'alert', error: true };
    last.rev++;
    return true;
  }

  /** Removes streamed text that a persisted message replaces (or that will never be persisted); true if there was any. */
  private clearStreamedText(keep?: { answer: AgentItem }): boolean {
    if (this.live.size === 0) return false;
    for (const { live, owner } of this.live.values()) {
      if (owner === keep?.answer) continue;
      if (owner.kind === 'agent' && owner.streaming) this.items = this.items.filter((i) => i !== owner);
      else if (owner.kind === 'agent') {
        owner.parts = owner.parts.filter((p) => p.kind !== 'live' || p.live !== live);
        owner.rev++;
      }
    }
    this.live.clear();
    return true;
  }

  /** The calls by id and the tool running now, for the parts of a message. */
  private calls(): Calls {
    return { tools: this.tools, serverTools: this.serverTools, runningToolId: this.runningToolId };
  }

  private attachResult(r: ToolResultBlock, sequence: bigint): void {
    let found = this.tools.get(r.toolUseId);
    // A result whose call is not shown has no answer of its own to fork from.
    const orphan = !found;
    if (!found) {
      // A result whose call is not shown (e.g. a snapshot cut): show it on its own.
      const answer: AgentItem = {
        kind: 'agent',
        key: nextKey('orphan'),
        parts: [],
        sources: new SourceNumbers(),
        stop: StopReason.UNSPECIFIED,
        explanation: '',
        usageText: '',
        usage: { thinkingTokens: 0n, webSearchRequests: 0n, webFetchRequests: 0n },
        rev: 0,
      };
      const card = toolCard({ id: r.toolUseId, name: 'tool result', inputJson: '' } as ToolUseBlock, answer, this.calls());
      answer.parts = [{ kind: 'tool', key: r.toolUseId, card }];
      this.push(answer);
      found = { card, owner: answer };
    }
    const { card, owner } = found;
    card.live = '';
    card.status = r.cancelled ? 'cancelled' : r.isError ? 'error' : 'ok';
    const patch = patchDisplay(r.displayJson);
    card.result = {
      patch,
      output: !patch || r.isError ? r.content || '(no output)' : undefined,
      isError: r.isError,
    };
    // Every call answered: the answer is at rest up to this message.
    if (!orphan && owner.stop !== StopReason.PAUSE_TURN && toolsAnswered(owner)) owner.forkAt = sequence;
    this.touchCard(card, owner);
  }
}

/** Whether every tool the answer called has its result. */
function toolsAnswered(answer: AgentItem): boolean {
  return answer.parts.every((p) => p.kind !== 'tool' || p.card.result !== undefined);
}

/** Streamed blocks in order: adjacent ones are one text (the provider splits cited text), others a paragraph apart. */
export function joinBlocks(blocks: Map<number, string>): string {
  let out = '';
  let prev: number | undefined;
  for (const [i, t] of [...blocks.entries()].sort(([a], [b]) => a - b)) {
    out += prev === undefined ? t : i === prev + 1 ? t : `\n\n${t}`;
    prev = i;
  }
  return out;
}

export function textOf(m: Message): string {
  return m.content.flatMap((b) => (b.block.case === 'text' ? [b.block.value.text] : [])).join('\n\n');
}

/** An answer with nothing in it yet. */
function emptyAnswer(key: string): AgentItem {
  return {
    kind: 'agent',
    key,
    parts: [],
    sources: new SourceNumbers(),
    stop: StopReason.UNSPECIFIED,
    explanation: '',
    usageText: '',
    usage: { thinkingTokens: 0n, webSearchRequests: 0n, webFetchRequests: 0n },
    rev: 0,
  };
}
