/**
 * Deferred loading of MCP tools (docs/mcp.md, "Context budget: deferred tools"): past a threshold
 * of tools or of definition size, every MCP tool of the request is `defer_loading: true` and the
 * provider's tool search tool is defined, so the model finds the tools it needs by searching. A
 * deferred tool is not in the cached prefix, so a server's tool list changing leaves the prefix
 * (built-in tools, search tool, system prompt) byte-identical. Built-in tools are never deferred.
 */
import type Anthropic from '@anthropic-ai/sdk';

type MessageParam = Anthropic.MessageParam;
type BlockParam = Anthropic.ContentBlockParam;

export interface McpDeferLimits {
  /** MCP tools are deferred when there are more than this many. */
  readonly maxTools: number;
  /** …or when their definitions are estimated at more than this many tokens. */
  readonly maxTokens: number;
}

/** The default: more than 30 tools (selection degrades past 30–50) or ~10k tokens of definitions. */
export const DEFAULT_MCP_DEFER_LIMITS: McpDeferLimits = { maxTools: 30, maxTokens: 10_000 };

/** The tool search tool the request defines with deferred tools (BM25: natural-language queries). */
export const TOOL_SEARCH_TOOL = {
  type: 'tool_search_tool_bm25_20251119',
  name: 'tool_search_tool_bm25',
} as const satisfies Anthropic.ToolSearchToolBm25_20251119;
export const TOOL_SEARCH_TOOL_NAMES: readonly string[] = ['tool_search_tool_bm25', 'tool_search_tool_regex'];

/** A rough token estimate of tool definitions (about 4 characters a token, as JSON). */
export function estimateDefinitionTokens(tools: readonly Anthropic.Tool[]): number {
  return Math.ceil(JSON.stringify(tools).length / 4);
}

/** Whether these MCP tools are to be deferred. */
export function shouldDefer(tools: readonly Anthropic.Tool[], limits: McpDeferLimits = DEFAULT_MCP_DEFER_LIMITS): boolean {
  if (tools.length === 0) return false;
  return tools.length > limits.maxTools || estimateDefinitionTokens(tools) > limits.maxTokens;
}

/**
 * The MCP tools as deferred definitions, sorted by name (the order of deferred tools does not
 * change the prefix, but a stable order keeps the request itself reproducible).
 */
export function deferred(tools: readonly Anthropic.Tool[]): Anthropic.Tool[] {
  return [...tools].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0)).map((t) => ({ ...t, defer_loading: true }));
}

/**
 * A tool search result naming a tool this request does not define (its server was turned off or
 * dropped it) makes the API reject the request: such a search call and its result become short
 * text notes, in place, as a turned-off server tool's blocks do. So does every search call and
 * result when the request defines no search tool. `defined` holds the names the request defines.
 */
export function describeStaleToolSearches(messages: MessageParam[], defined: ReadonlySet<string>): void {
  const searchDefined = TOOL_SEARCH_TOOL_NAMES.some((n) => defined.has(n));
  for (const message of messages) {
    if (message.role !== 'assistant' || !Array.isArray(message.content)) continue;
    const content = message.content as BlockParam[];
    const stale = new Set<string>();
    for (const b of content) {
      const block = b as unknown as Record<string, unknown>;
      if (block.type !== 'tool_search_tool_result') continue;
      const names = referencedTools(block.content);
      if (!searchDefined || names.some((n) => !defined.has(n))) stale.add(String(block.tool_use_id));
    }
    for (const b of content) {
      const block = b as unknown as Record<string, unknown>;
      if (!searchDefined && block.type === 'server_tool_use' && TOOL_SEARCH_TOOL_NAMES.includes(String(block.name)))
        stale.add(String(block.id));
    }
    if (stale.size === 0) continue;
    message.content = content.map((b): BlockParam => {
      const block = b as unknown as Record<string, unknown>;
      if (block.type === 'server_tool_use' && stale.has(String(block.id))) {
        return { type: 'text', text: `[Earlier tool search: ${JSON.stringify(block.input ?? {})}]` };
      }
      if (block.type === 'tool_search_tool_result' && stale.has(String(block.tool_use_id))) {
        const names = referencedTools(block.content);
        return {
          type: 'text',
          text: `[It found: ${names.length > 0 ? names.join(', ') : 'nothing'}; some of these tools are no longer offered]`,
        };
      }
      return b;
    });
  }
}

function referencedTools(content: unknown): string[] {
  if (typeof content !== 'object' || content === null) return [];
  const refs = (content as Record<string, unknown>).tool_references;
  if (!Array.isArray(refs)) return [];
  return refs.flatMap((r) =>
    typeof r === 'object' && r !== null && typeof (r as Record<string, unknown>).tool_name === 'string'
      ? [(r as Record<string, string>).tool_name!]
      : [],
  );
}
