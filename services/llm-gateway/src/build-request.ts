/**
 * Builds the Messages API request for one LlmRequestJob: system prompt, tools, thinking, the
 * history, prompt-caching breakpoints and compaction; a paused turn is resumed, a cut one
 * continued. Its parts sit beside it (convert-history.ts, request-tools.ts, request-thinking.ts,
 * request-images.ts, build-options.ts); docs/llm-gateway.md describes every rule.
 */
import type Anthropic from '@anthropic-ai/sdk';
import { isToolName, TOOLS, type ToolName } from '@bedrock/contracts/tools';
import { InvalidJobError, type BuildHooks, type BuildOptions, type LlmRequest } from './build-options.ts';
import { convertMessages } from './convert-history.ts';
import { applyThinking } from './request-thinking.ts';
import {
  describeServerToolsTurnedOff,
  mcpToolsOf,
  SERVER_TOOL_DEFINITIONS,
  SERVER_TOOL_NAMES,
  toolsUsedIn,
  type ServerToolName,
} from './request-tools.ts';
import { isServerToolBlockType } from './stream-accumulator.ts';
import { DEFAULT_CACHE_TTLS, placeCacheBreakpoints } from './cache-breakpoints.ts';
import { applyCompaction } from './compaction.ts';
import {
  DEFAULT_MCP_DEFER_LIMITS,
  deferred,
  describeStaleToolSearches,
  shouldDefer,
  TOOL_SEARCH_TOOL,
  TOOL_SEARCH_TOOL_NAMES,
} from './mcp-defer.ts';

type MessageParam = Anthropic.MessageParam;
type BlockParam = Anthropic.ContentBlockParam;

/** The user turn that asks the model to go on after a response it could not finish. */
export const CONTINUE_AFTER_CUT =
  'Your previous response was cut off by the output limit. Continue exactly where it stopped, without repeating anything; if you were writing a tool call, make it again, smaller (split a large file into several writes).';

export async function buildMessagesRequest(
  job: LlmRequest,
  options: BuildOptions,
  hooks: BuildHooks = {},
): Promise<Anthropic.MessageCreateParamsStreaming> {
  const model = job.model || options.defaultModel;
  const spec = options.registry.lookup(model);
  const maxTokens = Math.min(job.maxTokens || options.defaultMaxTokens, spec.maxOutputTokens);

  const clientTools: ToolName[] = [];
  for (const name of job.toolNames) {
    if (!isToolName(name)) throw new InvalidJobError(`The request names the tool "${name}", which is not in the tool registry.`);
    if (!clientTools.includes(name)) clientTools.push(name);
  }
  const serverTools: ServerToolName[] = [];
  for (const tool of job.serverTools) {
    const name = SERVER_TOOL_NAMES[tool];
    if (name && !serverTools.includes(name)) serverTools.push(name);
  }

  const messages = await convertMessages(job, options, hooks);
  // A server tool the conversation has turned off since it was used: its blocks become text
  // notes (a normal turn never defines a tool the user turned off, and the API rejects a
  // server_tool_use naming a tool the request does not define; tool searches are handled below,
  // describeStaleToolSearches). A request that can call
  // nothing (a job with no tools) keeps them and defines the tool (below).
  if (clientTools.length > 0 || serverTools.length > 0) describeServerToolsTurnedOff(messages, [...serverTools, ...TOOL_SEARCH_TOOL_NAMES]);
  if (messages.length === 0) throw new InvalidJobError('The request has no messages to send.');
  if (messages[0]?.role !== 'user') throw new InvalidJobError('The history must start with a user message.');
  // Current models reject an assistant prefill (a request ending in an assistant turn), with
  // one exception: a turn the provider paused (pause_turn, while it ran a server tool) is
  // resumed by sending it back as it is. A paused turn holds server-tool blocks; anything else
  // ending the history (it should not happen: the state machine adds a notice after a cut) is
  // continued from a user turn.
  const last = messages[messages.length - 1]!;
  if (last.role === 'assistant') {
    if ((last.content as BlockParam[]).some((b) => isServerToolBlockType(b.type))) trimFinalText(last);
    else messages.push({ role: 'user', content: [{ type: 'text', text: CONTINUE_AFTER_CUT }] });
  }

  // A continuation summary is sent exactly like a turn (same tools, tool_choice, thinking), its
  // prompt being the last user block, so it reads the turn's cached prefix instead of writing
  // it again; the prompt asks for text only (docs/llm-gateway.md, "Continuation summaries").
  // A job that lists no tools but whose history holds tool blocks defines the history's tools
  // under tool_choice none (the API rejects tool blocks in a request without tools).
  const used = toolsUsedIn(messages);
  const toolChoiceNone = clientTools.length === 0 && serverTools.length === 0 && used.any;
  if (toolChoiceNone) {
    for (const name of used.client) if (!clientTools.includes(name)) clientTools.push(name);
    for (const name of used.server) if (!serverTools.includes(name)) serverTools.push(name);
    if (clientTools.length === 0 && serverTools.length === 0 && used.any) clientTools.push(...(Object.keys(TOOLS) as ToolName[]));
  }
  const mcpTools = clientTools.length > 0 || toolChoiceNone ? mcpToolsOf(job) : [];
  const deferMcp = shouldDefer(mcpTools, options.mcpDefer ?? DEFAULT_MCP_DEFER_LIMITS);
  const tools: Anthropic.ToolUnion[] = [
    ...clientTools.map((name): Anthropic.Tool => ({
      name,
      description: TOOLS[name].description,
      input_schema: TOOLS[name].inputSchema as Anthropic.Tool.InputSchema,
    })),
    // MCP tools, their schemas as the server gave them (a request that may call no tool keeps them
    // defined too: its history's tool blocks may name them). Deferred ones go last, after the
    // search tool (below).
    ...(deferMcp ? [] : mcpTools),
    // The newest version the model takes (registry `webTools`).
    ...serverTools.map(
      (name) =>
        ({
          ...SERVER_TOOL_DEFINITIONS[name],
          type: name === 'web_search' ? spec.webTools.webSearch : spec.webTools.webFetch,
        }) as Anthropic.ToolUnion,
    ),
    // Past the threshold: the provider's tool search tool, then every MCP tool deferred (not in
    // the prompt, nor in the cached prefix, until a search returns it).
    ...(deferMcp ? [TOOL_SEARCH_TOOL, ...deferred(mcpTools)] : []),
  ];
  describeStaleToolSearches(messages, new Set(tools.flatMap((t) => ('name' in t ? [t.name] : []))));

  const params: Anthropic.MessageCreateParamsStreaming = { model, max_tokens: maxTokens, messages, stream: true };
  if (job.systemPrompt) params.system = [{ type: 'text', text: job.systemPrompt }];
  if (tools.length > 0) params.tools = tools;
  if (toolChoiceNone && tools.length > 0) params.tool_choice = { type: 'none' };
  // A stable opaque id of the conversation's owner (never a name or an email).
  if (job.ownerRef) params.metadata = { user_id: job.ownerRef };
  applyThinking(params, job.thinking, spec, hooks);
  placeCacheBreakpoints(params, options.cacheTtls ?? DEFAULT_CACHE_TTLS);
  applyCompaction(params, spec);
  return params;
}

/** A paused turn is sent back as it is, but the API rejects final assistant content ending in whitespace. */
function trimFinalText(message: MessageParam): void {
  const content = message.content as BlockParam[];
  const last = content[content.length - 1];
  if (last?.type !== 'text') return;
  const text = last.text.trimEnd();
  if (text === '') content.pop();
  else content[content.length - 1] = { ...last, text };
}
