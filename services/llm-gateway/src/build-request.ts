/**
 * Builds the Messages API request for one LlmRequestJob: system prompt, the static tool
 * schemas (none for a continuation summary, REQ-BED-020), the history with images, and
 * prompt-caching breakpoints so a long conversation re-reads its cached prefix.
 */
import type Anthropic from '@anthropic-ai/sdk';
import { isToolName, TOOLS } from '@bedrock/contracts/tools';
import type { ModelRegistry } from '@bedrock/contracts/models';
import { LlmRequestPurpose, Role, type LlmRequestJob } from '@bedrock/contracts';
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
}

/** A job that cannot become a valid request; `message` is safe to show to the user. */
export class InvalidJobError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'InvalidJobError';
  }
}

const EPHEMERAL = { type: 'ephemeral' } as const;

/** The user turn that asks the model to go on after a response it could not finish. */
export const CONTINUE_AFTER_CUT =
  'Your previous response was cut off by the output limit. Continue exactly where it stopped, without repeating anything; if you were writing a tool call, make it again, smaller (split a large file into several writes).';

/** Text shown to the model for a tool result with no output: the API rejects empty content. */
export const EMPTY_TOOL_RESULT = '(no output)';

export async function buildMessagesRequest(job: LlmRequestJob, options: BuildOptions, hooks: BuildHooks = {}): Promise<Anthropic.MessageCreateParamsStreaming> {
  const model = job.model || options.defaultModel;
  const limits = options.registry.lookup(model);
  const maxTokens = Math.min(job.maxTokens || options.defaultMaxTokens, limits.maxOutputTokens);

  const tools: Anthropic.Tool[] = [];
  if (job.purpose !== LlmRequestPurpose.CONTINUATION) {
    for (const name of job.toolNames) {
      if (!isToolName(name)) throw new InvalidJobError(`unknown tool "${name}" requested; it is not in the tool registry`);
      const def = TOOLS[name];
      tools.push({ name, description: def.description, input_schema: def.inputSchema as Anthropic.Tool.InputSchema });
    }
  }

  const messages = await convertMessages(job, options, hooks);
  if (messages.length === 0) throw new InvalidJobError('the request has no messages to send');
  if (messages[0]?.role !== 'user') throw new InvalidJobError('the history must start with a user message');
  // A response cut by max_tokens (or paused) is continued: current models reject an assistant
  // prefill (a request ending in an assistant turn), so the request asks in a user turn. The
  // history keeps only the model's own text; the next turn merges the continuation into it.
  if (messages[messages.length - 1]?.role === 'assistant') messages.push({ role: 'user', content: [{ type: 'text', text: CONTINUE_AFTER_CUT }] });

  // Breakpoints (at most 4): the prefix tools+system, the end of the previous user turn (so
  // this request reads what the last one wrote, even when more than the API's ~20-block
  // lookback lies between), and the end of this request (written for the next turn).
  let system: Anthropic.TextBlockParam[] | undefined;
  if (job.systemPrompt) system = [{ type: 'text', text: job.systemPrompt, cache_control: EPHEMERAL }];
  else if (tools.length > 0) tools[tools.length - 1] = { ...tools[tools.length - 1]!, cache_control: EPHEMERAL };
  const userTurns = messages.flatMap((m, i) => (m.role === 'user' ? [i] : []));
  const previousUser = userTurns.length >= 2 ? userTurns[userTurns.length - 2] : undefined;
  if (previousUser !== undefined) markLastBlock(messages[previousUser]!);
  markLastBlock(messages[messages.length - 1]!);

  const params: Anthropic.MessageCreateParamsStreaming = { model, max_tokens: maxTokens, messages, stream: true };
  if (system) params.system = system;
  if (tools.length > 0) params.tools = tools;
  return params;
}

function markLastBlock(message: MessageParam): void {
  const content = message.content as BlockParam[];
  const last = content[content.length - 1];
  if (last && (last.type === 'text' || last.type === 'image' || last.type === 'tool_use' || last.type === 'tool_result')) {
    content[content.length - 1] = { ...last, cache_control: EPHEMERAL };
  }
}

async function convertMessages(job: LlmRequestJob, options: BuildOptions, hooks: BuildHooks): Promise<MessageParam[]> {
  const imageCount = job.messages.reduce((n, m) => n + m.content.filter((b) => b.block.case === 'image').length, 0);
  const out: MessageParam[] = [];
  for (const [mi, message] of job.messages.entries()) {
    const role = message.role === Role.USER ? 'user' : message.role === Role.ASSISTANT ? 'assistant' : undefined;
    if (!role) throw new InvalidJobError(`message ${mi + 1} has no role`);
    const blocks: BlockParam[] = [];
    let imageIndex = 0;
    for (const block of message.content) {
      const b = block.block;
      switch (b.case) {
        case 'text':
          // The API rejects empty text blocks.
          if (b.value.text.trim() !== '') blocks.push({ type: 'text', text: b.value.text });
          break;
        case 'image': {
          imageIndex++;
          const label = `image ${imageIndex} of message ${mi + 1}`;
          let prepared;
          try {
            prepared = await prepareImage({ mediaType: b.value.mediaType, data: b.value.data }, { imageCount, label }, options.imageLimits, options.imageCache);
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

/**
 * After the provider refused an image (HTTP 400): replaces the image it named — or, when it
 * named none, every image of the request — by a text note, in place, keeping any cache
 * breakpoint. A named image is remembered in `memory` so later turns send the note at once.
 * Returns what was replaced (nothing when the named block is not an image).
 */
export function replaceRefusedImages(params: Anthropic.MessageCreateParamsStreaming, refusal: ImageRefusal, memory?: RefusedImages): RemovedImage[] {
  const removed: RemovedImage[] = [];
  const replace = (container: BlockParam[] | Anthropic.ToolResultBlockParam['content'], index: number, label: string, remember: boolean): void => {
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
