/**
 * Conversation titles (docs/conversation.md, "Titles"): the automatic one, made from the first
 * user message, and the checks of a title set by RenameConversation. Pure: no I/O.
 */

/** Longest automatic title, in characters (code points), before the ellipsis. */
export const AUTO_TITLE_CHARS = 60;
/** Longest title RenameConversation accepts, in characters (code points). */
export const MAX_TITLE_CHARS = 200;

const FENCE = /^(`{3,}|~{3,})/;
/** Line starts that are markdown structure, not words: headings, quotes, list markers, task boxes. */
const LINE_MARKUP = /^(?:#{1,6}\s+|>\s?|[-*+]\s+(?:\[[ xX]\]\s+)?|\d{1,9}[.)]\s+)/;
/** Line breaks and control characters (C0, DEL, C1) and the Unicode line and paragraph separators. */
const CONTROL = /[\p{Cc}\u2028\u2029]/u;

function stripInline(line: string): string {
  return (
    line
      // Images and links keep their text: ![alt](url) → alt, [text](url) → text.
      .replace(/!\[([^\]]*)\]\([^)]*\)/g, '$1')
      .replace(/\[([^\]]+)\]\([^)]*\)/g, '$1')
      // Code spans keep their content.
      .replace(/`+([^`]*)`+/g, '$1')
      // Emphasis: **x**, __x__, ~~x~~, *x*, _x_ (not the underscores inside snake_case words).
      .replace(/(\*\*|__|~~)(?=\S)(.+?)(?<=\S)\1/g, '$2')
      .replace(/(^|[^\p{L}\p{N}_*])[*_](?=\S)(.+?)(?<=\S)[*_](?![\p{L}\p{N}_])/gu, '$1$2')
      // HTML tags (<br>, <details>) are not words.
      .replace(/<\/?[A-Za-z][^>]*>/g, ' ')
  );
}

/**
 * The automatic title of a conversation: the first line of its first user message that has
 * words, markdown removed, whitespace collapsed, cut at a word boundary to at most
 * AUTO_TITLE_CHARS characters (with "…" when cut). Null when the message has no words (only
 * images, only a code fence): the next message with text gives the title.
 */
export function titleFromMessage(text: string): string | null {
  for (const raw of text.split(/\r?\n|\r/)) {
    const trimmed = raw.trim();
    // A fence line ("```bash") names a language, not the subject: the lines inside it will do.
    if (FENCE.test(trimmed)) continue;
    let line = trimmed;
    for (let before = ''; before !== line;) {
      before = line;
      line = line.replace(LINE_MARKUP, '');
    }
    line = stripInline(line)
      .replace(/[\p{Cc}\u2028\u2029]/gu, ' ')
      .replace(/\s+/g, ' ')
      .trim();
    if (!/[\p{L}\p{N}\p{So}]/u.test(line)) continue;
    return shorten(line);
  }
  return null;
}

/** Cuts at the last word boundary within AUTO_TITLE_CHARS (or mid-word when the first word is longer), adding "…". */
function shorten(line: string): string {
  const chars = Array.from(line);
  if (chars.length <= AUTO_TITLE_CHARS) return line;
  const head = chars.slice(0, AUTO_TITLE_CHARS + 1).join('');
  const lastSpace = head.lastIndexOf(' ');
  // A boundary in the first half would leave too little: cut the long word instead.
  const cut = lastSpace >= AUTO_TITLE_CHARS / 2 ? head.slice(0, lastSpace) : chars.slice(0, AUTO_TITLE_CHARS).join('');
  return `${cut.replace(/[\s,;:.\-–—]+$/u, '')}…`;
}

/**
 * A title given by its owner, trimmed, or the reason it is refused (worded for the person who
 * typed it): 1 to MAX_TITLE_CHARS characters, one line, no control characters.
 */
export function checkTitle(raw: string): { readonly title: string } | { readonly problem: string } {
  const title = raw.trim();
  if (title === '') return { problem: `title is empty: give 1 to ${MAX_TITLE_CHARS} characters` };
  const length = Array.from(title).length;
  if (length > MAX_TITLE_CHARS) return { problem: `title is ${length} characters; the limit is ${MAX_TITLE_CHARS}: shorten it` };
  const control = CONTROL.exec(title);
  if (control) {
    const code = control[0].codePointAt(0)!.toString(16).toUpperCase().padStart(4, '0');
    const where = Array.from(title.slice(0, control.index)).length + 1;
    return {
      problem: `title contains a control character (U+${code} at character ${where}): give one line of plain text, without line breaks or tabs`,
    };
  }
  return { title };
}
