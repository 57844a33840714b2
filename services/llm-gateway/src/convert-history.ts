/**
 * The job's history as Messages API turns: text with its citations, images (prepared, or a note
 * in their place), tool calls and results, and the model's own blocks sent back verbatim;
 * same-role turns merged, tool results first in a user turn.
 */
import type Anthropic from '@anthropic-ai/sdk';
import { Role } from '@bedrock/contracts';
import { ImageRejectedError, prepareImage, refusedImageNote, unsendableImageNote } from './images.ts';
import { compactionParam } from './compaction.ts';
import { InvalidJobError, type BuildHooks, type BuildOptions, type LlmRequest } from './build-options.ts';

type MessageParam = Anthropic.MessageParam;
type BlockParam = Anthropic.ContentBlockParam;

/** Text shown to the model for a tool result with no output: the API rejects empty content. */
export const EMPTY_TOOL_RESULT = '(no output)';

export async function convertMessages(job: LlmRequest, options: BuildOptions, hooks: BuildHooks): Promise<MessageParam[]> {
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
