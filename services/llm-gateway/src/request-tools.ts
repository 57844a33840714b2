/**
 * The request's tools: the provider-run tools as it defines them, the tools a history's blocks
 * name, the conversation's MCP tools as API tools, and the notes that replace the blocks of a
 * server tool turned off since it was used.
 */
import type Anthropic from '@anthropic-ai/sdk';
import { isToolName, type ToolName } from '@bedrock/contracts/tools';
import { ServerTool } from '@bedrock/contracts';
import { isServerToolBlockType } from './stream-accumulator.ts';
import type { LlmRequest } from './build-options.ts';

type MessageParam = Anthropic.MessageParam;
type BlockParam = Anthropic.ContentBlockParam;

/** Provider-run tools as the request defines them. */
export const SERVER_TOOL_DEFINITIONS = {
  web_search: { type: 'web_search_20250305', name: 'web_search', max_uses: 5 },
  web_fetch: { type: 'web_fetch_20250910', name: 'web_fetch', max_uses: 5 },
} as const satisfies Record<string, Anthropic.WebSearchTool20250305 | Anthropic.WebFetchTool20250910>;
export type ServerToolName = keyof typeof SERVER_TOOL_DEFINITIONS;
export const SERVER_TOOL_NAMES: Readonly<Partial<Record<ServerTool, ServerToolName>>> = {
  [ServerTool.WEB_SEARCH]: 'web_search',
  [ServerTool.WEB_FETCH]: 'web_fetch',
};
const isServerToolName = (name: unknown): name is ServerToolName =>
  typeof name === 'string' && Object.hasOwn(SERVER_TOOL_DEFINITIONS, name);
/**
 * Replaces, in place, the blocks of server tools not in `enabled` by short text notes (the call,
 * and the result's titles and addresses), and drops the citations of text in the turns that held
 * them (they point into the results that are gone). Exported for tests.
 */
export function describeServerToolsTurnedOff(messages: MessageParam[], enabled: readonly string[]): void {
  for (const message of messages) {
    if (message.role !== 'assistant' || !Array.isArray(message.content)) continue;
    const content = message.content as BlockParam[];
    const off = new Set<string>();
    for (const b of content) {
      const block = b as unknown as Record<string, unknown>;
      if (block.type === 'server_tool_use' && typeof block.name === 'string' && !enabled.includes(block.name)) off.add(String(block.id));
    }
    if (off.size === 0) continue;
    const rewritten: BlockParam[] = content.map((b) => {
      const block = b as unknown as Record<string, unknown>;
      if (block.type === 'server_tool_use' && off.has(String(block.id))) {
        return { type: 'text', text: `[Earlier ${String(block.name)} call, a tool now turned off: ${JSON.stringify(block.input ?? {})}]` };
      }
      if (typeof block.type === 'string' && isServerToolBlockType(block.type) && off.has(String(block.tool_use_id))) {
        return { type: 'text', text: `[Its result: ${summariseServerResult(block.content)}]` };
      }
      if (block.type === 'text' && block.citations) {
        const { citations: _dropped, ...rest } = block;
        void _dropped;
        return rest as unknown as BlockParam;
      }
      return b;
    });
    message.content = rewritten;
  }
}

function summariseServerResult(content: unknown): string {
  const items = Array.isArray(content) ? content : [content];
  const parts = items.flatMap((item) => {
    if (typeof item !== 'object' || item === null) return [];
    const r = item as Record<string, unknown>;
    if (typeof r.error_code === 'string') return [`error ${r.error_code}`];
    const url = typeof r.url === 'string' ? r.url : undefined;
    const title = typeof r.title === 'string' ? r.title : undefined;
    return url ? [title ? `${title} (${url})` : url] : [];
  });
  return parts.length > 0 ? parts.join('; ') : 'not kept';
}

/** Tools the history's tool_use and server_tool_use blocks name (known ones), and whether it holds any tool block. */
export function toolsUsedIn(messages: readonly MessageParam[]): { client: ToolName[]; server: ServerToolName[]; any: boolean } {
  const client: ToolName[] = [];
  const server: ServerToolName[] = [];
  let any = false;
  for (const m of messages) {
    for (const b of m.content as BlockParam[]) {
      if (b.type === 'tool_use' || b.type === 'tool_result' || isServerToolBlockType(b.type)) any = true;
      if (b.type === 'tool_use' && isToolName(b.name) && !client.includes(b.name)) client.push(b.name);
      if (b.type === 'server_tool_use' && isServerToolName(b.name) && !server.includes(b.name)) server.push(b.name);
    }
  }
  return { client, server, any };
}

/** The request's MCP tools as API tools; one with a schema that is not a JSON object is left out. */
export function mcpToolsOf(job: LlmRequest): Anthropic.Tool[] {
  const tools: Anthropic.Tool[] = [];
  for (const t of job.mcpTools ?? []) {
    let schema: unknown;
    try {
      schema = JSON.parse(t.inputSchemaJson);
    } catch {
      continue;
    }
    if (schema === null || typeof schema !== 'object' || Array.isArray(schema)) continue;
    if (!('type' in schema)) schema = { ...schema, type: 'object' };
    tools.push({ name: t.name, description: t.description, input_schema: schema as Anthropic.Tool.InputSchema });
  }
  return tools;
}
