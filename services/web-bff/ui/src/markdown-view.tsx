/**
 * Markdown on screen: a finished text, or the agent's text block by block, whose finished blocks
 * are rendered once and never again — not while it streams, and not when the stream ends.
 */
import { useEffect, useLayoutEffect, useMemo, useRef } from 'preact/hooks';
import { perFrame } from './frame.ts';
import { markdownFragment } from './markdown.ts';
import { EMPTY_SPLIT, stableSplit, type Split } from './markdown-split.ts';
import { memo } from './memo.ts';

/** A block still being written that is longer than this is shown as plain text until it is complete (rendering it on every delta would stall the page). */
const RAW_TAIL = 20_000;
/**
 * Finished blocks are rendered for at most this long in one frame (at least one block): a
 * stream that ran ahead of the page (many blocks finished since the last frame) is caught up
 * over the next frames rather than in one task that freezes the page.
 */
const FRAME_BUDGET_MS = 6;

function renderInto(el: HTMLElement, text: string): void {
  el.replaceChildren(markdownFragment(text));
  // A run of a long list (markdown-split.ts) joins the run before it (app.css).
  const only = el.childElementCount === 1 ? el.firstElementChild : null;
  el.classList.toggle('list-run', only?.tagName === 'OL' || only?.tagName === 'UL');
}

function block(text: string): HTMLElement {
  const el = document.createElement('div');
  el.className = 'md';
  renderInto(el, text);
  return el;
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
 * Draws Markdown blocks into `host`, outside Preact: finished blocks are appended (those already
 * drawn stay as they are), a few per frame (FRAME_BUDGET_MS), then the block being written
 * (`tail`) after them, drawn again when it changes. While finished blocks wait for a frame the
 * tail is hidden (it would come before them). A finished block whose text is the tail's as
 * drawn takes the tail's element: the last block of a stream stays as it streamed.
 */
class BlockPainter {
  private readonly drawn: { readonly text: string; readonly el: HTMLElement | null }[] = [];
  private blocks: readonly string[] = [];
  private tail = '';
  private tailEl: HTMLElement | null = null;
  /** What `tailEl` shows, and whether as Markdown (a huge tail is plain text). */
  private tailText = '';
  private tailMarkdown = false;
  private readonly frame = perFrame(() => this.paint());

  constructor(private readonly host: HTMLElement) {}

  show(blocks: readonly string[], tail: string): void {
    this.blocks = blocks;
    this.tail = tail;
    // A text that does not continue the one drawn (split again from the start) keeps what still matches.
    let same = 0;
    while (same < this.drawn.length && same < blocks.length && this.drawn[same]!.text === blocks[same]) same++;
    for (const gone of this.drawn.splice(same)) gone.el?.remove();
    this.paint();
  }

  stop(): void {
    this.frame.cancel();
  }

  private paint(): void {
    const start = performance.now();
    let n = 0;
    while (this.drawn.length < this.blocks.length) {
      if (n++ && performance.now() - start > FRAME_BUDGET_MS) {
        // Hidden, not removed: the blocks before it keep their place in the CSS (not the last child).
        if (this.tailEl) this.tailEl.hidden = true;
        this.frame.request();
        return;
      }
      const text = this.blocks[this.drawn.length]!;
      if (this.tailEl && this.tailMarkdown && this.tailText === text) {
        // The tail is finished as it was drawn: it stays, as a finished block.
        this.tailEl.hidden = false;
        this.drawn.push({ text, el: this.tailEl });
        this.tailEl = null;
        this.tailText = '';
      } else {
        const el = text.trim() ? block(text) : null;
        if (el) this.host.insertBefore(el, this.tailEl);
        this.drawn.push({ text, el });
      }
    }
    this.setTail(this.tail);
  }

  private setTail(tail: string): void {
    if (!tail.trim()) {
      this.tailEl?.remove();
      this.tailEl = null;
      this.tailText = '';
      return;
    }
    if (this.tailEl && tail === this.tailText) {
      this.tailEl.hidden = false;
      return;
    }
    this.tailText = tail;
    this.tailMarkdown = tail.length <= RAW_TAIL;
    let el: HTMLElement;
    if (this.tailMarkdown) el = block(tail);
    else {
      el = document.createElement('div');
      el.className = 'md md-raw';
      el.textContent = tail;
    }
    // A new element each time: an element drawn from a text stays with that text.
    if (this.tailEl) this.tailEl.replaceWith(el);
    else this.host.append(el);
    this.tailEl = el;
  }
}

/**
 * The agent's text as blocks in a `.msg-body`: the complete ones (each rendered once and kept)
 * and, while it streams (`done` false), the block being written, rendered again as it grows.
 * When the stream ends the same component goes on with `done`: the last block joins the others,
 * and nothing drawn before is drawn again. Earlier blocks keep their DOM, so the text above the
 * cursor never moves or flickers.
 */
export function BlockMarkdown({ text, done }: { text: string; done: boolean }) {
  const ref = useRef<HTMLDivElement>(null);
  const painter = useRef<BlockPainter | null>(null);
  const split = useRef<Split>(EMPTY_SPLIT);
  const next = useMemo(() => (split.current = stableSplit(text, split.current)), [text]);
  useLayoutEffect(() => {
    if (!ref.current) return;
    painter.current ??= new BlockPainter(ref.current);
    if (done) painter.current.show([...next.blocks, next.tail], '');
    else painter.current.show(next.blocks, next.tail);
  }, [next, done]);
  useEffect(() => () => painter.current?.stop(), []);
  // Its children are the painter's: Preact draws none.
  return <div class="msg-body" ref={ref} />;
}
