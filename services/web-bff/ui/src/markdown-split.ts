/**
 * Cutting a streamed Markdown text into blocks that can no longer change and the tail still being
 * written, so a growing answer is lexed and rendered only at its end (pure: marked's lexer, no DOM;
 * tested in Node). A list still growing gives up its finished items in runs of {@link LIST_RUN}.
 */
import { Marked } from 'marked';

/**
 * Finished items of a growing list are cut off this many at a time. A long list is one Markdown
 * block, so without this a 2,000-item list would be lexed and rendered whole on every delta; the
 * items before the last are final once the next one has begun. An ordered run keeps its numbers
 * (it starts with its first item's).
 */
export const LIST_RUN = 8;
/** Finished pieces found in one call are joined into blocks of at most this many characters (a longer piece is a block of its own). */
export const BLOCK_CHARS = 2000;

// Only the lexer is used here: the same options as the renderer (markdown.ts).
const lexer = new Marked({ gfm: true, breaks: true });

interface Lexed {
  readonly raw: string;
  readonly type: string;
  readonly items?: readonly { readonly raw: string }[];
}

/** Blocks found so far in a growing text: `consumed` is their text, the text's first `consumed.length` characters. */
export interface Split {
  readonly blocks: readonly string[];
  readonly consumed: string;
}

export const EMPTY_SPLIT: Split = { blocks: [], consumed: '' };

/**
 * Splits a streamed text at block boundaries: `blocks` are complete (a later delta cannot
 * change how they render), `tail` is the block still growing. `from` carries the split of an
 * earlier, shorter version of the same text, so each call lexes only the tail; a text that
 * does not continue it is split from the start.
 */
export function stableSplit(text: string, from: Split = EMPTY_SPLIT): Split & { tail: string } {
  let blocks: string[];
  let consumed: string;
  if (from.consumed.length <= text.length && text.startsWith(from.consumed)) {
    blocks = [...from.blocks];
    consumed = from.consumed;
  } else {
    blocks = [];
    consumed = '';
  }
  const rest = text.slice(consumed.length);
  const tokens = lexer.lexer(rest) as unknown as Lexed[];
  let last = tokens.length - 1;
  while (last >= 0 && tokens[last]!.type === 'space') last--;
  const done: string[] = [];
  for (let i = 0; i < last; i++) done.push(tokens[i]!.raw);
  // The block being written is a list: its items before the last are final.
  const open = tokens[last];
  if (open?.type === 'list' && open.items && open.items.length > LIST_RUN) {
    const finished = open.items.slice(0, open.items.length - 1);
    const whole = finished.length - (finished.length % LIST_RUN);
    for (let i = 0; i < whole; i += LIST_RUN)
      done.push(
        finished
          .slice(i, i + LIST_RUN)
          .map((item) => item.raw)
          .join(''),
      );
  }
  const more = done.join('');
  // The lexer normalises some input (e.g. carriage returns): then it is safer not to split.
  if (more && rest.startsWith(more)) {
    // What finished since the last call is rendered in blocks of up to BLOCK_CHARS (a fast stream
    // finishes several at a time, and each render has a fixed cost; one huge one would stall).
    let block = '';
    for (const piece of done) {
      if (block && block.length + piece.length > BLOCK_CHARS) {
        blocks.push(block);
        block = '';
      }
      block += piece;
    }
    if (block) blocks.push(block);
    consumed += more;
  }
  return { blocks, consumed, tail: text.slice(consumed.length) };
}
