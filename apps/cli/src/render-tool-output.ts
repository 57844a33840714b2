/**
 * Tool output and results for people: long output folded to a head, a count and a tail (all of
 * it with --full), the `→ ok` / `→ error` line, and live output as it streams.
 */
import { paint, type RenderOptions } from './render-style.ts';

/** Lines of tool output shown before the fold, and after it. */
export const FOLD_HEAD = 10;
export const FOLD_TAIL = 5;

/** "    … 99985 lines hidden (--full shows them) …" */
function foldLine(hidden: number, options: RenderOptions): string {
  return paint(options.color, 'dim', `    … ${hidden} line${hidden === 1 ? '' : 's'} hidden (--full shows them) …`);
}

const outputLine = (line: string, options: RenderOptions) => `    ${paint(options.color, 'dim', line)}`;

/**
 * Tool output as lines for people: indented; longer than FOLD_HEAD + FOLD_TAIL + 1 lines, a
 * head, the count of hidden lines and a tail (all of it with `full`).
 */
export function foldOutput(text: string, options: RenderOptions = {}): string[] {
  const lines = text.replace(/\n$/, '').split('\n');
  if (text === '') return [];
  if (options.full || lines.length <= FOLD_HEAD + FOLD_TAIL + 1) return lines.map((l) => outputLine(l, options));
  return [
    ...lines.slice(0, FOLD_HEAD).map((l) => outputLine(l, options)),
    foldLine(lines.length - FOLD_HEAD - FOLD_TAIL, options),
    ...lines.slice(-FOLD_TAIL).map((l) => outputLine(l, options)),
  ];
}

/** "  → ok", "  → error: [Exit code 3.]" (one line of content said on it), "  → cancelled". */
export function resultLine(r: { cancelled: boolean; isError: boolean }, options: RenderOptions, said = ''): string {
  const tag = r.cancelled ? 'cancelled' : r.isError ? 'error' : 'ok';
  const painted = paint(options.color, r.cancelled ? 'yellow' : r.isError ? 'red' : 'green', tag);
  return `  → ${painted}${said ? `: ${said}` : ''}`;
}

/** A tool result for people: a one-line content on its status line, longer content folded above it. */
export function toolResultLines(r: { content: string; cancelled: boolean; isError: boolean }, options: RenderOptions): string[] {
  const content = r.content.replace(/\n+$/, '');
  if (!content.includes('\n')) return [resultLine(r, options, content)];
  return [...foldOutput(content, options), resultLine(r, options)];
}

/**
 * Live tool output as it streams (toolOutput events): the first FOLD_HEAD lines at once, then
 * only a count and the last lines, said when the tool's result arrives (finish). Each line is
 * printed once: the result then adds only what the output did not say (an exit code).
 */
export class LiveOutput {
  private partial = '';
  private shown = 0;
  private readonly tail: string[] = [];
  private beyond = 0;
  /** Everything streamed, to tell what the result adds to it. */
  text = '';

  constructor(
    private readonly print: (line: string) => void,
    private readonly options: RenderOptions,
  ) {}

  add(chunk: string): void {
    this.text += chunk;
    const parts = (this.partial + chunk).split('\n');
    this.partial = parts.pop() ?? '';
    for (const line of parts) this.line(line);
  }

  private line(line: string): void {
    if (this.options.full || this.shown < FOLD_HEAD) {
      this.shown++;
      this.print(outputLine(line, this.options));
      return;
    }
    this.beyond++;
    this.tail.push(line);
    if (this.tail.length > FOLD_TAIL + 1) this.tail.shift();
  }

  /** The rest: a partial last line, the fold and the tail. */
  finish(): void {
    if (this.partial) this.line(this.partial);
    this.partial = '';
    if (this.beyond > FOLD_TAIL + 1) {
      this.print(foldLine(this.beyond - FOLD_TAIL, this.options));
      this.tail.splice(0, this.tail.length - FOLD_TAIL);
    }
    for (const line of this.tail) this.print(outputLine(line, this.options));
    this.tail.length = 0;
  }
}
