/**
 * What the model's own blocks say, in words (no DOM): thinking, the provider's compaction of the context,
 * provider-run tools (web search, web fetch) and the citations of text, why a response stopped, the
 * conversation's thinking level and server tools, and the usage worth naming. Shared by the web UI and the
 * `bedrock` CLI; tested in Node by test/agent-content.test.ts.
 */
import { ServerTool, StopReason, ThinkingLevel, type Usage } from '@bedrock/contracts';
import { parseJsonObject } from './format.ts';

/** Choices offered for a conversation's thinking, in order; UNSPECIFIED is "the deployment's default". */
export const THINKING_CHOICES: readonly ThinkingLevel[] = [
  ThinkingLevel.UNSPECIFIED,
  ThinkingLevel.OFF,
  ThinkingLevel.LOW,
  ThinkingLevel.MEDIUM,
  ThinkingLevel.HIGH,
  ThinkingLevel.XHIGH,
  ThinkingLevel.MAX,
];

const THINKING_NAMES: Record<ThinkingLevel, string> = {
  [ThinkingLevel.UNSPECIFIED]: 'default',
  [ThinkingLevel.OFF]: 'off',
  [ThinkingLevel.LOW]: 'low',
  [ThinkingLevel.MEDIUM]: 'medium',
  [ThinkingLevel.HIGH]: 'high',
  [ThinkingLevel.XHIGH]: 'xhigh',
  [ThinkingLevel.MAX]: 'max',
};

/** "off", "low", … "max"; "default" for UNSPECIFIED. */
export function thinkingName(level: ThinkingLevel): string {
  return THINKING_NAMES[level] ?? 'default';
}

/** "Off", "Low", … "Max"; "Default" for UNSPECIFIED. */
export function thinkingLabel(level: ThinkingLevel): string {
  const name = thinkingName(level);
  return name.charAt(0).toUpperCase() + name.slice(1);
}

/** The level a name means (CLI `--thinking`); undefined for anything else. */
export function parseThinking(name: string): ThinkingLevel | undefined {
  const wanted = name.trim().toLowerCase();
  const found = THINKING_CHOICES.find((l) => l !== ThinkingLevel.UNSPECIFIED && THINKING_NAMES[l] === wanted);
  return found;
}

export const SERVER_TOOLS: readonly ServerTool[] = [ServerTool.WEB_SEARCH, ServerTool.WEB_FETCH];

/** "Web search", "Web fetch". */
export function serverToolLabel(tool: ServerTool): string {
  return tool === ServerTool.WEB_SEARCH ? 'Web search' : tool === ServerTool.WEB_FETCH ? 'Web fetch' : 'Unknown tool';
}

/** "web_search", "web_fetch": the names the operator's BEDROCK_SERVER_TOOLS and the API use. */
export function serverToolName(tool: ServerTool): string {
  return tool === ServerTool.WEB_SEARCH ? 'web_search' : tool === ServerTool.WEB_FETCH ? 'web_fetch' : 'unknown';
}

/** "Thinking: high · Web search, Web fetch" / "Thinking: off · no web tools". */
export function settingsSummary(thinking: ThinkingLevel, tools: readonly ServerTool[]): string {
  const on = SERVER_TOOLS.filter((t) => tools.includes(t)).map(serverToolLabel);
  return `Thinking: ${thinkingName(thinking)} · ${on.length ? on.join(', ') : 'no web tools'}`;
}

/** The words of a thinking text (what its collapsed summary counts). */
export function wordCount(text: string): number {
  const t = text.trim();
  return t ? t.split(/\s+/).length : 0;
}

/** The collapsed line of a thinking block: "Thought (120 words)". */
export function thoughtSummary(text: string): string {
  const n = wordCount(text);
  return `Thought (${n} word${n === 1 ? '' : 's'})`;
}

export const THINKING_NOT_SHOWN = '(thinking not shown)';

/**
 * Server-side compaction: the provider summarised the conversation before the answer (a
 * `compaction` block in the agent message; docs/llm-gateway.md, "Compaction"). Shown as one
 * marked item, its summary collapsed (web) or left out (terminal); never as answer text.
 */
export const COMPACTION_LABEL = 'Context compacted by the provider';
/** What a client says while a `COMPACTION` token delta streams in (progress, not answer text). */
export const COMPACTING = 'Compacting the context…';

/** The marked line of a compaction block: "Context compacted by the provider (summary: 120 words)". */
export function compactionSummary(content: string): string {
  const n = wordCount(content);
  return n ? `${COMPACTION_LABEL} (summary: ${n} word${n === 1 ? '' : 's'})` : `${COMPACTION_LABEL} (no summary returned)`;
}
export const THINKING_REDACTED = '(thinking redacted by the provider)';

/** A link target the UI may open: only http and https (a provider's JSON could hold anything). */
export function safeUrl(url: unknown): string | undefined {
  if (typeof url !== 'string' || !url) return undefined;
  try {
    const u = new URL(url);
    return u.protocol === 'http:' || u.protocol === 'https:' ? u.href : undefined;
  } catch {
    return undefined;
  }
}

export interface Source {
  readonly title: string;
  /** Only http(s). */
  readonly url: string | undefined;
}

/** What a server-tool block shows. */
export type ServerToolView =
  | { readonly kind: 'search'; readonly id: string; readonly query: string }
  | { readonly kind: 'fetch'; readonly id: string; readonly url: string }
  | { readonly kind: 'search-results'; readonly toolUseId: string; readonly results: readonly Source[] }
  | { readonly kind: 'fetch-result'; readonly toolUseId: string; readonly source: Source }
  | { readonly kind: 'error'; readonly toolUseId: string; readonly tool: string; readonly message: string }
  /** A provider tool this client does not know (code execution, …): named, not interpreted. */
  | { readonly kind: 'other'; readonly id: string; readonly text: string };

const str = (v: unknown): string => (typeof v === 'string' ? v : '');
const obj = (v: unknown): Record<string, unknown> | undefined =>
  v && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined;

const ERROR_CODES: Record<string, string> = {
  max_uses_exceeded: 'the limit of uses for this answer was reached',
  too_many_requests: 'the provider is rate limiting these requests',
  invalid_input: 'the request was not valid',
  invalid_tool_input: 'the request was not valid',
  query_too_long: 'the query was too long',
  unavailable: 'the service was unavailable',
  url_too_long: 'the address was too long',
  url_not_allowed: 'the address is not allowed',
  url_not_accessible: 'the page could not be reached',
  unsupported_content_type: 'the page is of a type that cannot be read',
};

function errorMessage(code: string): string {
  return ERROR_CODES[code] ?? (code ? code.replace(/_/g, ' ') : 'it failed');
}

/**
 * Reads one server-tool block (its `block_type` and the provider's JSON, verbatim). Read defensively:
 * a field of the wrong type is treated as missing, and no link other than http(s) gets through ({@link safeUrl}).
 */
export function serverToolView(blockType: string, blockJson: string): ServerToolView {
  const b = parseJsonObject(blockJson) ?? {};
  const type = str(b.type) || blockType;
  if (type === 'server_tool_use') {
    const id = str(b.id);
    const input = obj(b.input) ?? {};
    const name = str(b.name);
    if (name === 'web_search') return { kind: 'search', id, query: str(input.query) };
    if (name === 'web_fetch') return { kind: 'fetch', id, url: str(input.url) };
    return { kind: 'other', id, text: `Used the provider's tool ${name || '(unnamed)'}` };
  }
  const toolUseId = str(b.tool_use_id);
  if (type === 'web_search_tool_result') {
    const content = b.content;
    if (Array.isArray(content)) {
      const results = content.flatMap((r) => {
        const o = obj(r);
        if (!o) return [];
        const url = safeUrl(o.url);
        return [{ title: str(o.title) || url || 'Untitled result', url }];
      });
      return { kind: 'search-results', toolUseId, results };
    }
    return { kind: 'error', toolUseId, tool: 'Web search', message: errorMessage(str(obj(content)?.error_code)) };
  }
  if (type === 'web_fetch_tool_result') {
    const content = obj(b.content) ?? {};
    if (str(content.type) === 'web_fetch_result') {
      const url = safeUrl(content.url);
      const title = str(obj(content.content)?.title);
      return { kind: 'fetch-result', toolUseId, source: { title: title || str(content.url) || 'the page', url } };
    }
    return { kind: 'error', toolUseId, tool: 'Web fetch', message: errorMessage(str(content.error_code)) };
  }
  return { kind: 'other', id: toolUseId || str(b.id), text: `Provider tool block ${type || '(untyped)'}` };
}

/** One line for a server-tool block: "Searched the web: cats", "Fetched https://…", "Web search: 5 results". */
export function serverToolLine(view: ServerToolView): string {
  switch (view.kind) {
    case 'search':
      return `Searched the web: ${view.query || '(no query)'}`;
    case 'fetch':
      return `Fetched ${view.url || '(no address)'}`;
    case 'search-results':
      return `${view.results.length} result${view.results.length === 1 ? '' : 's'}`;
    case 'fetch-result':
      return `Read: ${view.source.title}`;
    case 'error':
      return `${view.tool} failed: ${view.message}.`;
    case 'other':
      return view.text;
  }
}

/**
 * The sources a text block cites (its `citations` JSON, verbatim from the provider): web
 * search citations carry `url` and `title`; citations of a fetched document carry
 * `document_title`. Unreadable JSON is no citations.
 */
export function citationSources(citationsJson: string): Source[] {
  if (!citationsJson) return [];
  let list: unknown;
  try {
    list = JSON.parse(citationsJson);
  } catch {
    return [];
  }
  if (!Array.isArray(list)) return [];
  return list.flatMap((c) => {
    const o = obj(c);
    if (!o) return [];
    const url = safeUrl(o.url);
    const title = str(o.title) || str(o.document_title) || url || '';
    return title ? [{ title, url }] : [];
  });
}

/** Numbers sources in the order first cited, one number per distinct source. */
export class SourceNumbers {
  private readonly byKey = new Map<string, number>();
  readonly sources: Source[] = [];

  /** The number of `source` (a new one when first seen). */
  number(source: Source): number {
    const key = source.url ?? `title:${source.title}`;
    let n = this.byKey.get(key);
    if (n === undefined) {
      this.sources.push(source);
      n = this.sources.length;
      this.byKey.set(key, n);
    }
    return n;
  }
}

/** The marker under an answer the user cancelled while it streamed (the text above it is what had arrived). */
export const CANCELLED_ANSWER = 'Cancelled by user — the answer stopped here.';

/** The marker an agent message shows for how its response ended, if it says something. */
export function stopMarker(reason: StopReason, explanation: string): string | undefined {
  switch (reason) {
    case StopReason.MAX_TOKENS:
      return 'Cut by the output limit — continued below.';
    case StopReason.PAUSE_TURN:
      return 'Paused by the provider — continued below.';
    case StopReason.REFUSAL:
      return refusalText(explanation);
    case StopReason.CANCELLED:
      return CANCELLED_ANSWER;
    default:
      return undefined;
  }
}

/** "The model declined to answer." plus the provider's explanation, when it gave one. */
export function refusalText(explanation: string): string {
  const e = explanation.trim();
  return e ? `The model declined to answer: ${/[.!?]$/.test(e) ? e : `${e}.`}` : 'The model declined to answer.';
}

/**
 * The error message the conversation service persists after a refusal, as the one text of
 * the refusal's marker: it already says that the model declined (and, usually, why); the
 * explanation is added only when the error does not carry it, so nothing is said twice.
 */
export function refusalWithError(explanation: string, errorText: string): string {
  const err = errorText.trim();
  if (!err) return refusalText(explanation);
  const e = explanation.trim().replace(/[.!?]+$/, '');
  if (!e || err.includes(e)) return err;
  return `${err} (${refusalText(explanation)})`;
}

/** Whether an error message is the one that tells the user about a refusal. */
export function isRefusalError(text: string): boolean {
  return /\bdeclined\b/i.test(text);
}

/** "1.2k thinking tokens · 2 web searches · 1 web fetch"; "" when the usage has none of these. */
export function usageExtras(
  usage: Pick<Usage, 'thinkingTokens' | 'webSearchRequests' | 'webFetchRequests'> | undefined,
  formatTokens: (n: number) => string = String,
): string {
  if (!usage) return '';
  const parts: string[] = [];
  const thinking = Number(usage.thinkingTokens);
  const searches = Number(usage.webSearchRequests);
  const fetches = Number(usage.webFetchRequests);
  if (thinking > 0) parts.push(`${formatTokens(thinking)} thinking token${thinking === 1 ? '' : 's'}`);
  if (searches > 0) parts.push(`${searches} web search${searches === 1 ? '' : 'es'}`);
  if (fetches > 0) parts.push(`${fetches} web fetch${fetches === 1 ? '' : 'es'}`);
  return parts.join(' · ');
}
