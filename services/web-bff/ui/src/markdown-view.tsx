/**
 * Markdown on screen: a finished text, or the agent's text block by block, whose finished blocks
 * are never rendered again — not while it streams, and not when the stream ends.
 */
import { useLayoutEffect, useMemo, useRef } from 'preact/hooks';
import { markdownFragment } from './markdown.ts';
import { EMPTY_SPLIT, stableSplit, type Split } from './markdown-split.ts';
import { memo } from './memo.ts';

/** A block still being written that is longer than this is shown as plain text until it is complete (rendering it on every delta would stall the page). */
const RAW_TAIL = 20_000;

/**
 * Elements of rendered blocks, by the block's text (the most recent {@link KEPT}): a block drawn
 * again elsewhere (the last block of a stream becoming a finished one) takes them back, moved
 * rather than rendered again, when they are no longer on the page.
 */
const rendered = new Map<string, Node[]>();
const KEPT = 2000;

function renderInto(el: HTMLElement, text: string): void {
  const kept = rendered.get(text);
  if (kept && kept.every((n) => !n.isConnected)) el.replaceChildren(...kept);
  else {
    const fragment = markdownFragment(text);
    const nodes = [...fragment.childNodes];
    el.replaceChildren(fragment);
    rendered.delete(text);
    rendered.set(text, nodes);
    if (rendered.size > KEPT) rendered.delete(rendered.keys().next().value!);
  }
  // A run of a long list (markdown-split.ts) joins the run before it (app.css).
  const only = el.childElementCount === 1 ? el.firstElementChild : null;
  el.classList.toggle('list-run', only?.tagName === 'OL' || only?.tagName === 'UL');
}

/** One Markdown text; rendered again only when the text changes. */
export const Markdown = memo(
  function Markdown({ text }: { text: string }) {
    const ref = useRef<HTMLDivElement>(null);
    useLayoutEffect(() => {
      if (ref.current) renderInto(ref.current, text);
    }, [text]);
    return <div class="md" ref={ref} />;
  },
  (a, b) => a.text === b.text,
);

/**
 * The agent's text as blocks: the complete ones (each rendered once and kept) and, while it
 * streams (`done` false), the block being written, rendered again as it grows. When the stream
 * ends the same component goes on with `done`: the last block joins the others, and nothing
 * drawn before is drawn again. Earlier blocks keep their DOM, so the text above the cursor never
 * moves or flickers.
 */
export function BlockMarkdown({ text, done }: { text: string; done: boolean }) {
  const split = useRef<Split>(EMPTY_SPLIT);
  const next = useMemo(() => (split.current = stableSplit(text, split.current)), [text]);
  const tail = next.tail;
  return (
    <>
      {next.blocks.map((block, i) => (block.trim() ? <Markdown key={i} text={block} /> : null))}
      {!tail.trim() ? null : done ? (
        <Markdown key={next.blocks.length} text={tail} />
      ) : tail.length > RAW_TAIL ? (
        <div key="raw" class="md md-raw">
          {tail}
        </div>
      ) : (
        <Markdown key="tail" text={tail} />
      )}
    </>
  );
}
