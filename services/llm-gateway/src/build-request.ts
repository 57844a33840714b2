/**
 * Builds the Messages API request for one LlmRequestJob: system prompt, the static tool
 * schemas plus the provider-run tools the conversation turned on, extended thinking in the
 * form the model takes, the history with images and with the model's own blocks (thinking,
 * server tools, citations) sent back verbatim, and prompt-caching breakpoints so a long
 * conversation re-reads its cached prefix. docs/llm-gateway.md describes every rule.
 */
import type { McpToolDefinition } from '@bedrock/contracts';
import type Anthropic from '@anthropic-ai/sdk';
import { isToolName, TOOLS, type ToolName } from '@bedrock/contracts/tools';
import type { Effort, ModelLimits, ModelRegistry } from '@bedrock/contracts/models';
import { Role, ServerTool, ThinkingLevel, type LlmMessage, type LlmRequestJob } from '@bedrock/contracts';
import {
  ImageRejectedError,
  prepareImage,
  refusedImageNote,
  unsendableImageNote,
  type ImageCache,
  type ImageLimits,
  type ImageRefusal,
  type RefusedImages,
} from './images.ts';
import { isServerToolBlockType } from './stream-accumulator.ts';
import { DEFAULT_CACHE_TTLS, placeCacheBreakpoints, type CacheTtls } from './cache-breakpoints.ts';

export { MAX_CACHE_BREAKPOINTS } from './cache-breakpoints.ts';
import { applyCompaction, compactionParam } from './compaction.ts';
import {
  DEFAULT_MCP_DEFER_LIMITS,
  deferred,
  describeStaleToolSearches,
  shouldDefer,
  TOOL_SEARCH_TOOL,
  TOOL_SEARCH_TOOL_NAMES,
  type McpDeferLimits,
} from './mcp-defer.ts';

type MessageParam = Anthropic.MessageParam;
type BlockParam = Anthropic.ContentBlockParam;

export interface BuildOptions {
  readonly registry: ModelRegistry;
  /** Used when the job names no model. */
  readonly defaultModel: string;
  /** `max_tokens` when the job asks for 0 (the default), capped by the model's output limit. */
  readonly defaultMaxTokens: number;
  readonly imageLimits: ImageLimits;
  readonly imageCache?: ImageCache;
  /** Images the provider refused before: sent as a note instead (a conversation never sticks on one image). */
  readonly refusedImages?: RefusedImages;
  /** TTL of each prompt-caching breakpoint; default one hour everywhere (cache-breakpoints.ts). */
  readonly cacheTtls?: CacheTtls;
  /** When the MCP tools are deferred behind the tool search tool (mcp-defer.ts); default 30 tools or ~10k tokens. */
  readonly mcpDefer?: McpDeferLimits;
}

/** An image sent as a text note instead: one the gateway could not prepare, or the provider refused. */
export interface RemovedImage {
  /** e.g. "image 1 of message 3" (job messages), or "messages.2.content.1" (request indexes). */
  readonly label: string;
  readonly reason: string;
  /** `gateway`: it could not be prepared; `provider`: the provider refused it (now, or before). */
  readonly by: 'gateway' | 'provider';
}

export interface BuildHooks {
  /** Each image left out of the request, with the note in its place. */
  readonly onImageRemoved?: (removed: RemovedImage) => void;
  /**
   * The job asked for thinking but this request goes without it, and why; `firstInLoop` is true
   * for the first request of the tool loop it happens in (the one to tell the user about).
   */
  readonly onThinkingOmitted?: (reason: string, firstInLoop: boolean) => void;
  /** A text block's stored citations could not be read: the text is sent without them. */
  readonly onCitationsDropped?: (label: string) => void;
}

/** A job that cannot become a valid request; `message` is safe to show to the user. */
export class InvalidJobError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'InvalidJobError';
  }
}

/** The user turn that asks the model to go on after a response it could not finish. */
export const CONTINUE_AFTER_CUT =
  'Your previous response was cut off by the output limit. Continue exactly where it stopped, without repeating anything; if you were writing a tool call, make it again, smaller (split a large file into several writes).';

/** Text shown to the model for a tool result with no output: the API rejects empty content. */
export const EMPTY_TOOL_RESULT = '(no output)';

/** Thinking budgets of budget-form models, by level, in tokens. */
export const THINKING_BUDGETS: Readonly<Partial<Record<ThinkingLevel, number>>> = {
  [ThinkingLevel.LOW]: 4_000,
  [ThinkingLevel.MEDIUM]: 10_000,
  [ThinkingLevel.HIGH]: 24_000,
  [ThinkingLevel.XHIGH]: 32_000,
  [ThinkingLevel.MAX]: 48_000,
};
/** The API's smallest thinking budget. */
export const MIN_THINKING_BUDGET = 1_024;
/** Output kept for the answer beyond a thinking budget: max_tokens ≥ budget + this. */
export const ANSWER_HEADROOM = 4_096;

/** Effort levels of adaptive-form models, by level. */
const EFFORTS: Readonly<Partial<Record<ThinkingLevel, Effort>>> = {
  [ThinkingLevel.LOW]: 'low',
  [ThinkingLevel.MEDIUM]: 'medium',
  [ThinkingLevel.HIGH]: 'high',
  [ThinkingLevel.XHIGH]: 'xhigh',
  [ThinkingLevel.MAX]: 'max',
};
const EFFORT_ORDER: readonly Effort[] = ['low', 'medium', 'high', 'xhigh', 'max'];

/** The level's effort, or the nearest one below that the model takes (`xhigh` → `high`). */
export function effortFor(level: ThinkingLevel, efforts: readonly Effort[]): Effort {
  const wanted = EFFORTS[level] ?? 'high';
  if (efforts.length === 0 || efforts.includes(wanted)) return wanted;
  for (let i = EFFORT_ORDER.indexOf(wanted) - 1; i >= 0; i--) if (efforts.includes(EFFORT_ORDER[i]!)) return EFFORT_ORDER[i]!;
  return wanted;
}

/** Provider-run tools as the request defines them. */
export const SERVER_TOOL_DEFINITIONS = {
  web_search: { type: 'web_search_20250305', name: 'web_search', max_uses: 5 },
  web_fetch: { type: 'web_fetch_20250910', name: 'web_fetch', max_uses: 5 },
} as const satisfies Record<string, Anthropic.WebSearchTool20250305 | Anthropic.WebFetchTool20250910>;
type ServerToolName = keyof typeof SERVER_TOOL_DEFINITIONS;
const SERVER_TOOL_NAMES: Readonly<Partial<Record<ServerTool, ServerToolName>>> = {
  [ServerTool.WEB_SEARCH]: 'web_search',
  [ServerTool.WEB_FETCH]: 'web_fetch',
};
const isServerToolName = (name: unknown): name is ServerToolName =>
  typeof name === 'string' && Object.hasOwn(SERVER_TOOL_DEFINITIONS, name);

/** A job with the history it names, fetched from the conversation service: what is sent to the model. */
export type LlmRequest = LlmRequestJob & {
  readonly messages: readonly LlmMessage[];
  /** The conversation's MCP tools, defined after the built-in ones (docs/mcp.md). */
  readonly mcpTools?: readonly McpToolDefinition[];
};

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

/**
 * Thinking in the form the model takes (docs/llm-gateway.md, "Thinking"): adaptive models get
 * an effort level, budget models a token budget (max_tokens raised to fit it, within the
 * model's limit). The configuration is the same on every request of a conversation: adaptive
 * models may choose not to think, so a turn without a thinking block never changes it. Left out
 * only when the level is OFF, the model cannot think, or — budget models — the history does not
 * allow it (see {@link thinkingBlocker}).
 */
function applyThinking(params: Anthropic.MessageCreateParamsStreaming, level: ThinkingLevel, spec: ModelLimits, hooks: BuildHooks): void {
  const form = spec.thinking;
  const modelLimit = spec.maxOutputTokens;
  if (form === 'none' || level === ThinkingLevel.OFF || level === ThinkingLevel.UNSPECIFIED) return;
  if (form === 'adaptive') {
    params.thinking = { type: 'adaptive', display: 'summarized' };
    params.output_config = { effort: effortFor(level, spec.efforts) };
    return;
  }
  const blocker = thinkingBlocker(params.messages);
  if (blocker) {
    hooks.onThinkingOmitted?.(blocker, firstRequestOfLoop(params.messages));
    return;
  }
  const wanted = THINKING_BUDGETS[level] ?? THINKING_BUDGETS[ThinkingLevel.HIGH]!;
  const maxTokens = Math.max(params.max_tokens, Math.min(wanted + ANSWER_HEADROOM, modelLimit));
  const budget = Math.max(MIN_THINKING_BUDGET, Math.min(wanted, maxTokens - ANSWER_HEADROOM));
  // The API wants the budget below max_tokens; a model whose whole output limit is that small cannot think.
  if (budget >= maxTokens) {
    hooks.onThinkingOmitted?.(
      `the model's output limit (${modelLimit} tokens) leaves no room for a thinking budget of at least ${MIN_THINKING_BUDGET} tokens`,
      false,
    );
    return;
  }
  params.max_tokens = maxTokens;
  params.thinking = { type: 'enabled', budget_tokens: budget };
}

/**
 * Whether the request is the first of its tool loop to go without thinking: the assistant turn
 * it answers (or resumes) comes straight after a plain user turn, so no earlier request of the
 * loop was blocked. Deterministic for a history, so a retried job says the same.
 */
function firstRequestOfLoop(messages: readonly MessageParam[]): boolean {
  let i = messages.length - 1;
  if (messages[i]?.role === 'user') i--;
  const before = messages[i - 1];
  return !before || (before.content as BlockParam[])[0]?.type !== 'tool_result';
}

/**
 * The API's rule for manual (budget) thinking across tool turns: with thinking on, the final assistant turn
 * (the one before the last user turn when that turn answers tool calls, or the request's own
 * last turn when it ends in a paused assistant turn) must start with a thinking or redacted
 * thinking block. A turn produced while thinking was off does not, so the request goes
 * without thinking until the next plain user turn. Returns why, or undefined when allowed.
 */
export function thinkingBlocker(messages: readonly MessageParam[]): string | undefined {
  const startsWithThinking = (m: MessageParam | undefined) => {
    const first = (m?.content as BlockParam[] | undefined)?.find((b) => (b.type as string) !== 'compaction');
    return first?.type === 'thinking' || first?.type === 'redacted_thinking';
  };
  const lastIndex = messages.length - 1;
  const last = messages[lastIndex];
  if (last?.role === 'assistant') {
    return startsWithThinking(last) ? undefined : 'the paused assistant turn it resumes does not start with a thinking block';
  }
  const first = (last?.content as BlockParam[] | undefined)?.[0];
  if (first?.type !== 'tool_result') return undefined;
  const assistant = messages[lastIndex - 1];
  return startsWithThinking(assistant) ? undefined : 'the tool calls it answers were made in a turn without thinking';
}

/** A paused turn is sent back as it is, but the API rejects final assistant content ending in whitespace. */
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

function trimFinalText(message: MessageParam): void {
  const content = message.content as BlockParam[];
  const last = content[content.length - 1];
  if (last?.type !== 'text') return;
  const text = last.text.trimEnd();
  if (text === '') content.pop();
  else content[content.length - 1] = { ...last, text };
}

/** Tools the history's tool_use and server_tool_use blocks name (known ones), and whether it holds any tool block. */
function toolsUsedIn(messages: readonly MessageParam[]): { client: ToolName[]; server: ServerToolName[]; any: boolean } {
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

async function convertMessages(job: LlmRequest, options: BuildOptions, hooks: BuildHooks): Promise<MessageParam[]> {
  const imageCount = job.messages.reduce((n, m) => n + m.content.filter((b) => b.block.case === 'image').length, 0);
  const out: MessageParam[] = [];
  for (const [mi, message] of job.messages.entries()) {
    const role = message.role === Role.USER ? 'user' : message.role === Role.ASSISTANT ? 'assistant' : undefined;
    if (!role) throw new InvalidJobError(`Message ${mi + 1} has no role.`);
    const blocks: BlockParam[] = [];
    let imageIndex = 0;
    for (const [bi, block] of message.content.entries()) {
      const b = block.block;
      switch (b.case) {
        case 'text': {
          // The API rejects empty text blocks.
          if (b.value.text.trim() === '') break;
          const text: Anthropic.TextBlockParam = { type: 'text', text: b.value.text };
          if (b.value.citationsJson) {
            const citations = parseJson(b.value.citationsJson);
            if (Array.isArray(citations)) text.citations = citations as Anthropic.TextCitationParam[];
            else hooks.onCitationsDropped?.(`block ${bi + 1} of message ${mi + 1}`);
          }
          blocks.push(text);
          break;
        }
        case 'image': {
          imageIndex++;
          const label = `image ${imageIndex} of message ${mi + 1}`;
          let prepared;
          try {
            prepared = await prepareImage(
              { mediaType: b.value.mediaType, data: b.value.data },
              { imageCount, label },
              options.imageLimits,
              options.imageCache,
            );
          } catch (err) {
            if (!(err instanceof ImageRejectedError)) throw err;
            // An image in the history that cannot be sent must not fail every later turn.
            blocks.push({ type: 'text', text: unsendableImageNote(err.message) });
            hooks.onImageRemoved?.({ label, reason: err.message, by: 'gateway' });
            break;
          }
          const refused = options.refusedImages?.get(prepared.data);
          if (refused !== undefined) {
            blocks.push({ type: 'text', text: refusedImageNote(refused) });
            hooks.onImageRemoved?.({ label, reason: refused, by: 'provider' });
            break;
          }
          blocks.push({ type: 'image', source: { type: 'base64', media_type: prepared.mediaType, data: prepared.data } });
          break;
        }
        case 'toolUse':
          blocks.push({ type: 'tool_use', id: b.value.id, name: b.value.name, input: parseToolInput(b.value.inputJson) });
          break;
        case 'toolResult':
          blocks.push({
            type: 'tool_result',
            tool_use_id: b.value.toolUseId,
            content: b.value.content === '' ? EMPTY_TOOL_RESULT : b.value.content,
            is_error: b.value.isError,
          });
          break;
        // The model's own blocks go back exactly as it returned them (signatures, encrypted data).
        case 'thinking':
          blocks.push({ type: 'thinking', thinking: b.value.thinking, signature: b.value.signature });
          break;
        case 'redactedThinking':
          blocks.push({ type: 'redacted_thinking', data: b.value.data });
          break;
        case 'compaction':
          blocks.push(compactionParam(b.value));
          break;
        case 'serverTool': {
          const value = parseJson(b.value.blockJson);
          if (typeof value !== 'object' || value === null || Array.isArray(value)) {
            throw new InvalidJobError(
              `Block ${bi + 1} of message ${mi + 1} (${b.value.blockType || 'a server tool block'}) is not a JSON object, so it cannot be sent back to the model.`,
            );
          }
          const verbatim = value as Record<string, unknown>;
          blocks.push((typeof verbatim.type === 'string' ? verbatim : { ...verbatim, type: b.value.blockType }) as unknown as BlockParam);
          break;
        }
        case undefined:
          break;
      }
    }
    if (blocks.length === 0) continue;
    const previous = out[out.length - 1];
    // Consecutive same-role turns are merged: the API requires alternating roles.
    if (previous && previous.role === role) (previous.content as BlockParam[]).push(...blocks);
    else out.push({ role, content: blocks });
  }
  // In a user turn the API wants every tool_result before any other block.
  for (const m of out) {
    if (m.role !== 'user') continue;
    const content = m.content as BlockParam[];
    m.content = [...content.filter((b) => b.type === 'tool_result'), ...content.filter((b) => b.type !== 'tool_result')];
  }
  return out;
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}

/**
 * After the provider refused an image (HTTP 400): replaces the image it named — or, when it
 * named none, every image of the request — by a text note, in place, keeping any cache
 * breakpoint. A named image is remembered in `memory` so later turns send the note at once.
 * Returns what was replaced (nothing when the named block is not an image).
 */
export function replaceRefusedImages(
  params: Anthropic.MessageCreateParamsStreaming,
  refusal: ImageRefusal,
  memory?: RefusedImages,
): RemovedImage[] {
  const removed: RemovedImage[] = [];
  const replace = (
    container: BlockParam[] | Anthropic.ToolResultBlockParam['content'],
    index: number,
    label: string,
    remember: boolean,
  ): void => {
    if (!Array.isArray(container)) return;
    const block = container[index];
    if (!block || block.type !== 'image') return;
    if (remember && block.source.type === 'base64') memory?.remember(block.source.data, refusal.reason);
    const note: Anthropic.TextBlockParam = { type: 'text', text: refusedImageNote(refusal.reason) };
    if (block.cache_control) note.cache_control = block.cache_control;
    container[index] = note;
    removed.push({ label, reason: refusal.reason, by: 'provider' });
  };
  if (refusal.at) {
    const { message, block, nested } = refusal.at;
    const content = params.messages[message]?.content;
    if (!Array.isArray(content)) return removed;
    if (nested === undefined) replace(content as BlockParam[], block, `messages.${message}.content.${block}`, true);
    else {
      const outer = content[block];
      if (outer?.type === 'tool_result') replace(outer.content, nested, `messages.${message}.content.${block}.content.${nested}`, true);
    }
    return removed;
  }
  // Not named: every image could be the one. None is remembered (most of them are fine).
  for (const [mi, m] of params.messages.entries()) {
    if (!Array.isArray(m.content)) continue;
    for (let bi = 0; bi < m.content.length; bi++) {
      const b = m.content[bi]!;
      if (b.type === 'image') replace(m.content as BlockParam[], bi, `messages.${mi}.content.${bi}`, false);
      else if (b.type === 'tool_result' && Array.isArray(b.content)) {
        for (let ni = 0; ni < b.content.length; ni++) replace(b.content, ni, `messages.${mi}.content.${bi}.content.${ni}`, false);
      }
    }
  }
  return removed;
}

/** How many image blocks the request holds (top level and inside tool results). */
export function countImages(params: Anthropic.MessageCreateParamsStreaming): number {
  let n = 0;
  for (const m of params.messages) {
    if (!Array.isArray(m.content)) continue;
    for (const b of m.content) {
      if (b.type === 'image') n++;
      else if (b.type === 'tool_result' && Array.isArray(b.content)) n += b.content.filter((c) => c.type === 'image').length;
    }
  }
  return n;
}

/** A tool_use input is a JSON object string; anything else is sent as `{}` (the API requires an object). */
function parseToolInput(json: string): Record<string, unknown> {
  if (!json) return {};
  try {
    const value: unknown = JSON.parse(json);
    return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : {};
  } catch {
    return {};
  }
}

export { ImageRejectedError };

/** The request's MCP tools as API tools; one with a schema that is not a JSON object is left out. */
function mcpToolsOf(job: LlmRequest): Anthropic.Tool[] {
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
