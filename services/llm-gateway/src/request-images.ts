/**
 * The image blocks of a built request: replacing those the provider refused by notes, and
 * counting them.
 */
import type Anthropic from '@anthropic-ai/sdk';
import { refusedImageNote, type ImageRefusal, type RefusedImages } from './images.ts';
import type { RemovedImage } from './build-options.ts';

type BlockParam = Anthropic.ContentBlockParam;

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
