/**
 * An agent message's blocks as transcript parts, in order: thinking, text (cited text with its
 * source numbers), tool cards, the provider's web searches and fetches (a result joins its
 * call's card), compaction summaries.
 */
import type { Message, TextBlock, ToolUseBlock } from '@bedrock/contracts';
import {
  citationSources,
  compactionSummary,
  safeUrl,
  serverToolLine,
  serverToolView,
  THINKING_NOT_SHOWN,
  THINKING_REDACTED,
  thoughtSummary,
} from '@bedrock/agent-view/agent-content';
import { toolInputText, toolSummary } from '@bedrock/agent-view/format';
import {
  nextKey,
  type AgentItem,
  type CitedPiece,
  type Part,
  type ServerResult,
  type ServerToolCard,
  type ToolCard,
} from './transcript-items.ts';

/** The calls the model keeps by id, which their output and results (possibly in a later message) join; and the tool running now. */
export interface Calls {
  readonly tools: Map<string, { card: ToolCard; owner: AgentItem }>;
  readonly serverTools: Map<string, { card: ServerToolCard; owner: AgentItem }>;
  readonly runningToolId: string;
}

/** The blocks of an agent message as parts, in order. */
export function agentParts(m: Message, answer: AgentItem, calls: Calls): Part[] {
  const parts: Part[] = [];
  let run: TextBlock[] = [];
  const flush = () => {
    if (run.length) parts.push(...textRun(run, answer));
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
            ? { kind: 'thinking', key: nextKey('thinking'), summary: thoughtSummary(t), text: t }
            : { kind: 'thinking-note', key: nextKey('note'), text: THINKING_NOT_SHOWN },
        );
        break;
      }
      case 'redactedThinking':
        parts.push({ kind: 'thinking-note', key: nextKey('note'), text: THINKING_REDACTED });
        break;
      case 'toolUse':
        parts.push({ kind: 'tool', key: b.block.value.id || nextKey('tool'), card: toolCard(b.block.value, answer, calls) });
        break;
      case 'serverTool': {
        const card = serverToolPart(b.block.value.blockType, b.block.value.blockJson, answer, calls);
        if (card) parts.push({ kind: 'server-tool', key: nextKey('server'), card });
        break;
      }
      case 'compaction': {
        const t = b.block.value.content;
        parts.push({ kind: 'compaction', key: nextKey('compaction'), summary: compactionSummary(t), text: t });
        break;
      }
      case 'image':
      case 'toolResult':
      case undefined:
        break;
      default: {
        const unknown: never = b.block;
        void unknown;
      }
    }
  }
  flush();
  return parts;
}

/**
 * Consecutive text blocks. Without citations each is Markdown; with them (a web answer, split
 * by the provider where its sources change) they read as one text, each cited piece followed
 * by its source numbers, listed under the answer.
 */
function textRun(blocks: readonly TextBlock[], answer: AgentItem): Part[] {
  const cited = blocks.map((b) => citationSources(b.citationsJson));
  if (cited.every((c) => c.length === 0)) {
    return blocks.filter((b) => b.text.trim()).map((b) => ({ kind: 'text' as const, key: nextKey('text'), text: b.text }));
  }
  const pieces: CitedPiece[] = [];
  blocks.forEach((b, i) => {
    pieces.push(b.text);
    const numbers = [...new Set(cited[i]!.map((source) => answer.sources.number(source)))];
    for (const n of numbers) pieces.push({ n, source: answer.sources.sources[n - 1]! });
  });
  return [{ kind: 'cited', key: nextKey('cited'), pieces }];
}

/** A web search or fetch (a card its result joins later), or a result joining its call's card. */
function serverToolPart(blockType: string, blockJson: string, answer: AgentItem, calls: Calls): ServerToolCard | undefined {
  const view = serverToolView(blockType, blockJson);
  const line = serverToolLine(view);
  switch (view.kind) {
    case 'search':
    case 'fetch': {
      const card: ServerToolCard = {
        kind: view.kind,
        line,
        fetched: view.kind === 'fetch' && view.url ? { title: view.url, url: safeUrl(view.url) } : undefined,
        results: [],
        rev: 0,
      };
      if (view.id) calls.serverTools.set(view.id, { card, owner: answer });
      return card;
    }
    case 'search-results':
    case 'fetch-result':
    case 'error': {
      const result: ServerResult =
        view.kind === 'search-results'
          ? { kind: 'search-results', line, results: view.results }
          : view.kind === 'fetch-result'
            ? { kind: 'fetch-result', source: view.source }
            : { kind: 'error', line };
      const call = calls.serverTools.get(view.toolUseId);
      if (call) {
        call.card.results.push(result);
        call.card.rev++;
        call.owner.rev++;
        return undefined;
      }
      return { kind: 'result', line: '', results: [result], rev: 0 };
    }
    case 'other':
      return { kind: 'other', line, results: [], rev: 0 };
  }
}

export function toolCard(use: ToolUseBlock, owner: AgentItem, calls: Calls): ToolCard {
  const input = toolInputText(use.name, use.inputJson);
  const card: ToolCard = {
    id: use.id,
    name: use.name,
    summary: toolSummary(use.name, use.inputJson),
    input: use.name !== 'bash' || input.includes('\n') ? input : undefined,
    status: use.id && use.id === calls.runningToolId ? 'running' : 'waiting',
    live: '',
    rev: 0,
  };
  calls.tools.set(use.id, { card, owner });
  return card;
}
