/** Markdown on screen: a finished text, or a streamed one whose finished blocks are never rendered again. */
import { useLayoutEffect, useRef } from 'preact/hooks';
import { markdownFragment, stableSplit } from './markdown.ts';
import { memo } from './memo.ts';

/** One Markdown text; rendered again only when the text changes. */
export const Markdown = memo(
  function Markdown({ text }: { text: string }) {
    const ref = useRef<HTMLDivElement>(null);
    useLayoutEffect(() => {
      ref.current?.replaceChildren(markdownFragment(text));
    }, [text]);
    return <div class="md" ref={ref} />;
  },
  (a, b) => a.text === b.text,
);

/**
 * A text still arriving: its complete blocks (kept, each rendered once) and the block being
 * written (rendered again on each delta). Earlier blocks keep their DOM, so the text above
 * the cursor never moves or flickers.
 */
export function StreamingMarkdown({ text }: { text: string }) {
  const split = useRef<{ blocks: string[]; offset: number }>({ blocks: [], offset: 0 });
  const next = stableSplit(text, split.current);
  split.current = next;
  return (
    <>
      {next.blocks.map((block, i) => (block.trim() ? <Markdown key={i} text={block} /> : null))}
      {next.tail.trim() ? <Markdown key="tail" text={next.tail} /> : null}
    </>
  );
}
