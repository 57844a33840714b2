/**
 * The strict request validator of the local Messages API server: the checks the real API makes on a
 * request before answering, each answered (by the server) with HTTP 400 `invalid_request_error` and a
 * message modelled on the real API's, so a product test cannot pass while sending something the real API
 * would refuse. The rules: docs/testing.md, "The model: the local Messages API server". The model table
 * here ({@link fakeModel}) is the fake API's own, independent of the product's registry.
 */
import type { BlockSigner } from './signing.ts';
import { compactionBlockProblem, contextManagementProblem } from './compaction.ts';

/** What the fake API knows about a model. */
export interface FakeModel {
  /** The largest `max_tokens` accepted. */
  readonly maxOutputTokens: number;
  /** Accepts `thinking: {type: 'adaptive'}`. */
  readonly adaptiveThinking: boolean;
  /** Accepts `thinking: {type: 'enabled', budget_tokens}`. */
  readonly budgetThinking: boolean;
  /** Accepts a request ending in an assistant turn (prefill). */
  readonly prefill: boolean;
}

/** The offline demo model's output limit (its `max_tokens` ceiling). */
export const OFFLINE_MAX_OUTPUT_TOKENS = 64_000;

/**
 * The fake API's model table, by family: Claude 5 models (`claude-*-5*`), `claude-fable-*` and
 * `claude-opus-4-7` think adaptively only; 4.6 models accept both kinds (adaptive preferred);
 * 4.5 models take a budget only; `bedrock-offline` accepts both. Only the old `claude-3-*`
 * models accept a prefill. Unknown models: both thinking kinds, 128 000 output tokens, no prefill.
 */
export function fakeModel(model: string): FakeModel {
  const m = (maxOutputTokens: number, adaptiveThinking: boolean, budgetThinking: boolean, prefill = false): FakeModel => ({
    maxOutputTokens,
    adaptiveThinking,
    budgetThinking,
    prefill,
  });
  if (model === 'bedrock-offline') return m(OFFLINE_MAX_OUTPUT_TOKENS, true, true);
  if (/^claude-3-7-/.test(model)) return m(64_000, false, true, true);
  if (/^claude-3-5-/.test(model)) return m(8_192, false, false, true);
  if (/^claude-3-/.test(model)) return m(4_096, false, false, true);
  if (/^claude-fable-/.test(model) || /^claude-[a-z]+-5/.test(model) || /^claude-opus-4-7/.test(model)) return m(128_000, true, false);
  if (/^claude-[a-z]+-4-6/.test(model)) return m(128_000, true, true);
  if (/^claude-[a-z]+-4-5/.test(model)) return m(64_000, false, true);
  return m(128_000, true, true);
}

type Json = Record<string, unknown>;
const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Types of the server tools' result blocks (they live in assistant turns). */
const SERVER_RESULT_TYPES = new Set([
  'web_search_tool_result',
  'web_fetch_tool_result',
  'code_execution_tool_result',
  'bash_code_execution_tool_result',
  'text_editor_code_execution_tool_result',
  'tool_search_tool_result',
]);

/** Server tool types (prefix before the date) and the name each must have. */
const SERVER_TOOLS: ReadonlyArray<{ readonly prefix: string; readonly name: string }> = [
  { prefix: 'web_search_', name: 'web_search' },
  { prefix: 'web_fetch_', name: 'web_fetch' },
  { prefix: 'code_execution_', name: 'code_execution' },
  { prefix: 'bash_', name: 'bash' },
  { prefix: 'text_editor_', name: 'str_replace_based_edit_tool' },
  { prefix: 'memory_', name: 'memory' },
  { prefix: 'computer_', name: 'computer' },
  { prefix: 'tool_search_tool_regex_', name: 'tool_search_tool_regex' },
  { prefix: 'tool_search_tool_bm25_', name: 'tool_search_tool_bm25' },
];

const TOOL_CHOICES = ['auto', 'any', 'tool', 'none'];
const EFFORTS = ['low', 'medium', 'high', 'xhigh', 'max'];
const THINKING_DOCS = 'Please consult our documentation at https://docs.claude.com/en/docs/build-with-claude/extended-thinking';

const quoteList = (values: readonly string[]) => {
  const q = values.map((v) => `'${v}'`);
  return `${q.slice(0, -1).join(', ')} or ${q.at(-1)}`;
};

/** The blocks of a message's content (a string is one text block). */
function blocksOf(content: unknown): Json[] {
  if (typeof content === 'string') return [{ type: 'text', text: content }];
  return Array.isArray(content) ? content.filter(isObject) : [];
}

/**
 * Checks one request body. Returns the message the API answers a broken rule with (HTTP 400
 * `invalid_request_error`), or undefined when the request is valid; the first rule broken is the one
 * reported. `signer` is the server's: thinking blocks must carry its signatures.
 */
export function validateRequest(body: unknown, signer: BlockSigner, betas: readonly string[] = []): string | undefined {
  if (!isObject(body)) return 'There was an error parsing the body: the request body must be a JSON object.';
  const cacheProblem = cacheControlProblem(body);
  if (cacheProblem) return cacheProblem;
  const cmProblem = contextManagementProblem(body, betas);
  if (cmProblem) return cmProblem;

  // Required fields and their shapes.
  if (typeof body.model !== 'string' || body.model === '') return 'model: Field required';
  if (body.max_tokens === undefined) return 'max_tokens: Field required';
  if (typeof body.max_tokens !== 'number' || !Number.isInteger(body.max_tokens)) return 'max_tokens: Input should be a valid integer';
  if (body.max_tokens < 1) return 'max_tokens: Input should be greater than or equal to 1';
  if (body.messages === undefined) return 'messages: Field required';
  if (!Array.isArray(body.messages)) return 'messages: Input should be a valid list';
  if (body.messages.length === 0) return 'messages: at least one message is required';
  const model = fakeModel(body.model);
  if (body.max_tokens > model.maxOutputTokens) {
    return `max_tokens: ${body.max_tokens} > ${model.maxOutputTokens}, which is the maximum allowed number of output tokens for ${body.model}`;
  }

  // Tools.
  const tools = body.tools;
  if (tools !== undefined && !Array.isArray(tools)) return 'tools: Input should be a valid list';
  const toolList: Json[] = Array.isArray(tools) ? tools.filter(isObject) : [];
  if (Array.isArray(tools) && toolList.length !== tools.length) return 'tools: each tool must be an object';
  const toolNames = new Set<string>();
  const serverToolNames = new Set<string>();
  for (const [i, tool] of toolList.entries()) {
    const type = typeof tool.type === 'string' ? tool.type : 'custom';
    if (type === 'custom') {
      if (typeof tool.name !== 'string' || tool.name === '') return `tools.${i}.custom.name: Field required`;
      if (!/^[a-zA-Z0-9_-]{1,128}$/.test(tool.name)) return `tools.${i}.custom.name: String should match pattern '^[a-zA-Z0-9_-]{1,128}$'`;
      if (!isObject(tool.input_schema)) return `tools.${i}.custom.input_schema: Field required`;
    } else {
      const server = SERVER_TOOLS.find((s) => type.startsWith(s.prefix) && /_\d{8}$/.test(type));
      if (!server) return `tools.${i}: Input tag '${type}' found using 'type' does not match any of the expected tags`;
      if (tool.name === undefined) return `tools.${i}.${type}.name: Field required`;
      if (tool.name !== server.name) return `tools.${i}.${type}.name: Input should be '${server.name}'`;
      serverToolNames.add(server.name);
    }
    if (toolNames.has(tool.name as string)) return 'tools: Tool names must be unique.';
    toolNames.add(tool.name as string);
  }
  const deferProblem = deferLoadingProblem(toolList);
  if (deferProblem) return deferProblem;

  // Thinking configuration.
  let thinkingOn = false;
  // Manual (budget) thinking: the model thinks on every turn, so the tool-loop rule below holds.
  // Adaptive thinking is optional for the model on each turn (the provider's adaptive-thinking
  // page), so a tool loop's turn without a thinking block is accepted there.
  let manualThinking = false;
  if (body.thinking !== undefined) {
    const thinking = body.thinking;
    if (!isObject(thinking)) return 'thinking: Input should be an object';
    const type = thinking.type;
    if (type === 'enabled') {
      if (thinking.budget_tokens === undefined) return 'thinking.enabled.budget_tokens: Field required';
      if (typeof thinking.budget_tokens !== 'number' || !Number.isInteger(thinking.budget_tokens))
        return 'thinking.enabled.budget_tokens: Input should be a valid integer';
      if (thinking.budget_tokens < 1024) return 'thinking.enabled.budget_tokens: Input should be greater than or equal to 1024';
      if (!model.budgetThinking) {
        return model.adaptiveThinking
          ? '`thinking.type.enabled` is not supported for this model. Use `thinking.type.adaptive` and `output_config.effort` to control thinking behavior.'
          : `${body.model} does not support extended thinking.`;
      }
      if (body.max_tokens <= thinking.budget_tokens) {
        return `\`max_tokens\` must be greater than \`thinking.budget_tokens\`. ${THINKING_DOCS}#max-tokens-and-context-window-size`;
      }
      thinkingOn = true;
      manualThinking = true;
    } else if (type === 'adaptive') {
      if (!model.adaptiveThinking) {
        return model.budgetThinking
          ? '`thinking.type.adaptive` is not supported for this model. Use `thinking.type.enabled` with `budget_tokens`.'
          : `${body.model} does not support extended thinking.`;
      }
      thinkingOn = true;
    } else if (type !== 'disabled') {
      return `thinking: Input tag '${String(type)}' found using 'type' does not match any of the expected tags: 'adaptive', 'disabled', 'enabled'`;
    }
    if (
      type !== 'disabled' &&
      thinking.display !== undefined &&
      thinking.display !== null &&
      thinking.display !== 'summarized' &&
      thinking.display !== 'omitted'
    ) {
      return `thinking.${String(type)}.display: Input should be 'summarized' or 'omitted'`;
    }
  }
  if (body.output_config !== undefined) {
    if (!isObject(body.output_config)) return 'output_config: Input should be an object';
    const effort = body.output_config.effort;
    if (effort !== undefined && effort !== null && !EFFORTS.includes(effort as string))
      return `output_config.effort: Input should be ${quoteList(EFFORTS)}`;
  }

  // Tool choice.
  if (body.tool_choice !== undefined) {
    const choice = body.tool_choice;
    if (!isObject(choice) || !TOOL_CHOICES.includes(choice.type as string)) {
      return `tool_choice: Input tag '${String(isObject(choice) ? choice.type : choice)}' found using 'type' does not match any of the expected tags: ${quoteList(TOOL_CHOICES)}`;
    }
    if (choice.type === 'tool' && (typeof choice.name !== 'string' || choice.name === '')) return 'tool_choice.tool.name: Field required';
    if (thinkingOn && (choice.type === 'any' || choice.type === 'tool'))
      return 'Thinking may not be enabled when tool_choice forces tool use.';
  }

  // System prompt.
  let cacheControls = toolList.filter((t) => t.cache_control !== undefined && t.cache_control !== null).length;
  if (body.system !== undefined) {
    if (typeof body.system === 'string') {
      // A string system prompt may be empty; it cannot carry cache_control.
    } else if (Array.isArray(body.system)) {
      for (const [i, block] of body.system.entries()) {
        if (!isObject(block) || block.type !== 'text') return `system.${i}: Input should be a text block`;
        const bad = textProblem(block.text);
        if (bad) return `system.${i}: ${bad}`;
        if (block.cache_control !== undefined && block.cache_control !== null) cacheControls++;
      }
    } else return 'system: Input should be a valid string or a list of text blocks';
  }

  // Messages: roles, content, blocks.
  const messages = body.messages as unknown[];
  const toolUseIds = new Set<string>();
  let hasToolBlocks = false;
  for (const [i, raw] of messages.entries()) {
    if (!isObject(raw)) return `messages.${i}: Input should be an object`;
    const role = raw.role;
    if (role !== 'user' && role !== 'assistant') return `messages.${i}.role: Input should be 'user' or 'assistant'`;
    if (i === 0 && role !== 'user') return 'messages: first message must use the "user" role';
    if (i > 0 && (messages[i - 1] as Json).role === role) {
      return `messages: roles must alternate between "user" and "assistant", but found multiple "${role}" roles in a row (messages.${i - 1} and messages.${i})`;
    }
    const content = raw.content;
    if (typeof content !== 'string' && !Array.isArray(content))
      return `messages.${i}.content: Input should be a valid string or a list of content blocks`;
    if (content.length === 0) {
      if (i === messages.length - 1 && role === 'assistant') continue; // then a prefill (below)
      return `messages.${i}: all messages must have non-empty content except for the optional final assistant message`;
    }
    if (typeof content === 'string') {
      const bad = textProblem(content);
      if (bad) return `messages.${i}.content: ${bad}`;
      continue;
    }
    const serverToolUses = new Set<string>();
    let seenNonResult = -1;
    for (const [j, block] of content.entries()) {
      const at = `messages.${i}.content.${j}`;
      if (!isObject(block) || typeof block.type !== 'string') return `${at}: Input should be a content block with a \`type\``;
      const type = block.type;
      const hasCache = block.cache_control !== undefined && block.cache_control !== null;
      if (hasCache) cacheControls++;
      switch (type) {
        case 'text': {
          const bad = textProblem(block.text);
          if (bad) return `${at}: ${bad}`;
          break;
        }
        case 'thinking':
        case 'redacted_thinking':
          if (role !== 'assistant') return `${at}: \`${type}\` blocks are only allowed in \`assistant\` messages`;
          if (hasCache)
            return `${at}.${type}.cache_control: Extra inputs are not permitted (\`cache_control\` cannot be set on \`${type}\` blocks)`;
          if (type === 'thinking') {
            if (typeof block.thinking !== 'string') return `${at}.thinking.thinking: Field required`;
            if (!signer.verifyThinking(block.thinking, block.signature)) return `${at}: Invalid \`signature\` in \`thinking\` block`;
          } else if (!signer.verifyRedacted(block.data)) return `${at}: Invalid \`data\` in \`redacted_thinking\` block`;
          break;
        case 'tool_use':
        case 'server_tool_use': {
          if (role !== 'assistant') return `${at}: \`${type}\` blocks are only allowed in \`assistant\` messages`;
          if (typeof block.id !== 'string' || block.id === '') return `${at}.${type}.id: Field required`;
          if (typeof block.name !== 'string' || block.name === '') return `${at}.${type}.name: Field required`;
          if (!isObject(block.input)) return `${at}.${type}.input: Input should be a valid dictionary`;
          if (toolUseIds.has(block.id)) return `${at}: \`tool_use\` ids must be unique (${block.id} is used more than once)`;
          toolUseIds.add(block.id);
          if (type === 'tool_use') hasToolBlocks = true;
          else {
            if (!serverToolNames.has(block.name))
              return `${at}: \`server_tool_use\` block calls \`${block.name}\`, but \`tools\` defines no server tool of that name`;
            serverToolUses.add(block.id);
          }
          break;
        }
        case 'tool_result': {
          if (role !== 'user') return `${at}: \`tool_result\` blocks are only allowed in \`user\` messages`;
          hasToolBlocks = true;
          if (seenNonResult >= 0) {
            return `${at}: \`tool_result\` blocks must come first in the \`user\` message, before any other content (found after messages.${i}.content.${seenNonResult})`;
          }
          if (Array.isArray(block.content)) {
            for (const [k, inner] of block.content.entries()) {
              if (!isObject(inner)) return `${at}.content.${k}: Input should be a content block`;
              if (inner.cache_control !== undefined && inner.cache_control !== null) cacheControls++;
              if (inner.type === 'text') {
                const bad = textProblem(inner.text);
                if (bad) return `${at}.content.${k}: ${bad}`;
              }
            }
          } else if (block.content !== undefined && typeof block.content !== 'string')
            return `${at}.tool_result.content: Input should be a valid string or a list of content blocks`;
          break;
        }
        case 'compaction': {
          const bad = compactionBlockProblem(block, at, role, betas, signer);
          if (bad) return bad;
          break;
        }
        default:
          if (SERVER_RESULT_TYPES.has(type)) {
            if (role !== 'assistant') return `${at}: \`${type}\` blocks are only allowed in \`assistant\` messages`;
            const id = block.tool_use_id;
            if (typeof id !== 'string' || !serverToolUses.has(id)) {
              return `${at}: \`${type}\` block with tool_use_id ${String(id)} must follow the \`server_tool_use\` block with that id in the same message`;
            }
            if (type === 'tool_search_tool_result') {
              const unknown = toolReferences(block.content).find((n) => !toolNames.has(n));
              if (unknown !== undefined) return `${at}: Tool reference '${unknown}' not found in available tools`;
            }
          }
          break;
      }
      if (type !== 'tool_result' && seenNonResult < 0) seenNonResult = j;
    }
  }

  // tool_use / tool_result pairing, turn by turn.
  for (const [i, raw] of messages.entries()) {
    const m = raw as Json;
    const blocks = blocksOf(m.content);
    if (m.role === 'assistant') {
      const ids = blocks.filter((b) => b.type === 'tool_use').map((b) => b.id as string);
      if (ids.length === 0) continue;
      const next = messages[i + 1] as Json | undefined;
      const answered = new Set(
        next && next.role === 'user'
          ? blocksOf(next.content)
              .filter((b) => b.type === 'tool_result')
              .map((b) => b.tool_use_id)
          : [],
      );
      const missing = ids.filter((id) => !answered.has(id));
      if (missing.length > 0) {
        return `messages.${i}: \`tool_use\` ids were found without \`tool_result\` blocks immediately after: ${missing.join(', ')}. Each \`tool_use\` block must have a corresponding \`tool_result\` block in the next message.`;
      }
    } else {
      const previous = i > 0 ? (messages[i - 1] as Json) : undefined;
      const offered = new Set(
        previous
          ? blocksOf(previous.content)
              .filter((b) => b.type === 'tool_use')
              .map((b) => b.id)
          : [],
      );
      for (const [j, b] of blocks.entries()) {
        if (b.type === 'tool_result' && !offered.has(b.tool_use_id)) {
          return `messages.${i}.content.${j}: unexpected \`tool_use_id\` found in \`tool_result\` blocks: ${String(b.tool_use_id)}. Each \`tool_result\` block must have a corresponding \`tool_use\` block in the previous message.`;
        }
      }
    }
  }
  if (hasToolBlocks && toolList.length === 0) return 'Requests which include `tool_use` or `tool_result` blocks must define tools.';

  // With thinking on, the final assistant turn starts with its thinking: the one before the
  // final tool results (a tool loop), or the final turn itself (a paused turn resumed).
  const last = messages[messages.length - 1] as Json;
  const lastBlocks = blocksOf(last.content);
  const finalAssistant = last.role === 'assistant' ? messages.length - 1 : lastBlocks[0]?.type === 'tool_result' ? messages.length - 2 : -1;
  if (manualThinking && finalAssistant >= 0) {
    const i = finalAssistant;
    // A compaction block the API put first in the turn is not part of the turn's thinking rule (assumed: not documented).
    const first = blocksOf((messages[i] as Json).content).find((b) => b.type !== 'compaction');
    if (first && first.type !== 'thinking' && first.type !== 'redacted_thinking') {
      return (
        `messages.${i}.content.0.type: Expected \`thinking\` or \`redacted_thinking\`, but found \`${String(first.type)}\`. ` +
        'When `thinking` is enabled, a final `assistant` message must start with a thinking block (preceding the lastmost set of `tool_use` and `tool_result` blocks). ' +
        'We recommend you include thinking blocks from previous turns. To avoid this requirement, disable `thinking`. ' +
        THINKING_DOCS
      );
    }
  }

  // A request ending in an assistant turn: a prefill, or the continuation of a paused turn.
  if (last.role === 'assistant') {
    const paused = lastBlocks.some((b) => b.type === 'server_tool_use');
    if (!paused && !model.prefill)
      return 'This model does not support assistant message prefill. The conversation must end with a user message.';
    const tail = lastBlocks[lastBlocks.length - 1];
    if (tail?.type === 'text' && typeof tail.text === 'string' && /\s$/.test(tail.text))
      return 'messages: final assistant content cannot end with trailing whitespace';
  }

  if (cacheControls > 4) return `A maximum of 4 blocks with cache_control may be provided. Found ${cacheControls}.`;
  return undefined;
}

/**
 * Every `cache_control` of the request, in prefix order (tools → system → messages, nested tool
 * result blocks in place): each `{type: 'ephemeral'}` with `ttl` absent, `5m` or `1h`, and no
 * `1h` after a `5m` (a longer-lived entry cannot extend a shorter-lived prefix).
 */
function cacheControlProblem(body: Json): string | undefined {
  const found: Array<{ at: string; cc: unknown }> = [];
  const visit = (block: unknown, at: string) => {
    if (isObject(block) && block.cache_control !== undefined && block.cache_control !== null) found.push({ at, cc: block.cache_control });
  };
  if (Array.isArray(body.tools)) body.tools.forEach((t, i) => visit(t, `tools.${i}`));
  if (Array.isArray(body.system)) body.system.forEach((b, i) => visit(b, `system.${i}`));
  if (Array.isArray(body.messages)) {
    body.messages.forEach((m, i) => {
      if (!isObject(m) || !Array.isArray(m.content)) return;
      m.content.forEach((b, j) => {
        visit(b, `messages.${i}.content.${j}`);
        if (isObject(b) && Array.isArray(b.content))
          b.content.forEach((inner, k) => visit(inner, `messages.${i}.content.${j}.content.${k}`));
      });
    });
  }
  let fiveMinutesAt: string | undefined;
  for (const { at, cc } of found) {
    if (!isObject(cc) || cc.type !== 'ephemeral') return `${at}.cache_control.type: Input should be 'ephemeral'`;
    const ttl = cc.ttl ?? '5m';
    if (ttl !== '5m' && ttl !== '1h') return `${at}.cache_control.ttl: Input should be '5m' or '1h'`;
    if (ttl === '5m') fiveMinutesAt ??= at;
    else if (fiveMinutesAt !== undefined)
      return `${at}.cache_control: a cache_control with ttl='1h' cannot come after one with ttl='5m' (${fiveMinutesAt}): longer TTLs must come first`;
  }
  return undefined;
}

/** Why a text is not an acceptable text block, or undefined. */
function textProblem(text: unknown): string | undefined {
  if (typeof text !== 'string') return 'text content blocks must have a `text` string';
  if (text === '') return 'text content blocks must be non-empty';
  if (text.trim() === '') return 'text content blocks must contain non-whitespace text';
  return undefined;
}

const TOOL_SEARCH_NAMES = new Set(['tool_search_tool_regex', 'tool_search_tool_bm25']);

/**
 * Deferred tools (`defer_loading: true`, the provider's tool search page): a boolean; the
 * search tool itself is never deferred; deferred tools need a search tool in the request; and
 * at least one tool must be loaded.
 */
function deferLoadingProblem(tools: readonly Json[]): string | undefined {
  let deferredCount = 0;
  for (const [i, tool] of tools.entries()) {
    if (tool.defer_loading === undefined || tool.defer_loading === null) continue;
    if (typeof tool.defer_loading !== 'boolean') return `tools.${i}.defer_loading: Input should be a valid boolean`;
    if (!tool.defer_loading) continue;
    if (TOOL_SEARCH_NAMES.has(tool.name as string)) return `tools.${i}: The tool search tool cannot have defer_loading set to true`;
    deferredCount++;
  }
  if (deferredCount === 0) return undefined;
  if (deferredCount === tools.length)
    return 'tools: All tools have defer_loading set to true. At least one tool must be loaded (not deferred).';
  if (!tools.some((t) => TOOL_SEARCH_NAMES.has(t.name as string))) {
    return 'tools: Tools with defer_loading set to true require a tool search tool (tool_search_tool_regex or tool_search_tool_bm25) in the request.';
  }
  return undefined;
}

/** The tool names a tool search result references. */
function toolReferences(content: unknown): string[] {
  if (!isObject(content) || !Array.isArray(content.tool_references)) return [];
  return content.tool_references.flatMap((r) => (isObject(r) && typeof r.tool_name === 'string' ? [r.tool_name] : []));
}
