/**
 * The pure part of patch: applies a list of operations to a file's original text, all
 * against that original, all or nothing. No I/O here, so every rule is easy to test.
 */

export type PatchOperation = 'replace' | 'append_eof' | 'prepend_bof' | 'overwrite';

export interface PatchSpec {
  readonly operation: PatchOperation;
  readonly old_text?: string;
  readonly new_text: string;
}

export type PatchTextResult =
  { readonly ok: true; readonly text: string; readonly notes: readonly string[] } | { readonly ok: false; readonly error: string };

interface Edit {
  readonly index: number;
  readonly start: number;
  readonly end: number;
  readonly text: string;
}

/** Line number (1-based) of character offset `offset`. */
function lineOf(text: string, offset: number): number {
  let line = 1;
  for (let i = text.indexOf('\n'); i !== -1 && i < offset; i = text.indexOf('\n', i + 1)) line++;
  return line;
}

/** Every start offset of `needle` in `haystack`, overlapping ones included. */
function occurrences(haystack: string, needle: string): number[] {
  const found: number[] = [];
  for (let i = haystack.indexOf(needle); i !== -1; i = haystack.indexOf(needle, i + 1)) found.push(i);
  return found;
}

const normalize = (line: string): string => line.trim().replace(/\s+/g, ' ');
const indentOf = (line: string): string => /^[ \t]*/.exec(line)?.[0] ?? '';
const isBlank = (line: string): boolean => line.trim() === '';

/**
 * The whitespace-tolerant retry: matches whole lines, ignoring indentation and runs of
 * spaces, and only when exactly one place matches. The replacement is re-indented by the
 * difference between the file's indentation and the model's, so the file's style survives.
 */
function tolerantMatch(original: string, oldText: string, newText: string): { start: number; end: number; text: string }[] {
  let oldLines = oldText.split('\n');
  let newLines = newText.split('\n');
  // Leading and trailing blank lines carry no identity; drop as many from the replacement.
  while (oldLines.length > 0 && isBlank(oldLines[0] as string)) {
    oldLines = oldLines.slice(1);
    if (newLines.length > 0 && isBlank(newLines[0] as string)) newLines = newLines.slice(1);
  }
  while (oldLines.length > 0 && isBlank(oldLines[oldLines.length - 1] as string)) {
    oldLines = oldLines.slice(0, -1);
    if (newLines.length > 0 && isBlank(newLines[newLines.length - 1] as string)) newLines = newLines.slice(0, -1);
  }
  if (oldLines.length === 0) return [];
  const wanted = oldLines.map(normalize);
  const lines = original.split('\n');
  const starts: number[] = [];
  let offset = 0;
  for (const line of lines) {
    starts.push(offset);
    offset += line.length + 1;
  }
  const matches: { start: number; end: number; text: string }[] = [];
  for (let i = 0; i + wanted.length <= lines.length; i++) {
    if (!wanted.every((w, k) => normalize(lines[i + k] as string) === w)) continue;
    const last = i + wanted.length - 1;
    const fileIndent = indentOf(lines[i] as string);
    const modelIndent = indentOf(oldLines[0] as string);
    const text = newLines
      .map((line) => (fileIndent !== modelIndent && line.startsWith(modelIndent) ? fileIndent + line.slice(modelIndent.length) : line))
      .join('\n');
    matches.push({ start: starts[i] as number, end: (starts[last] as number) + (lines[last] as string).length, text });
  }
  return matches;
}

/** Applies `patches` to `original` (null when the file does not exist). */
export function applyPatches(original: string | null, patches: readonly PatchSpec[], displayPath: string): PatchTextResult {
  const overwrites = patches.filter((p) => p.operation === 'overwrite');
  if (overwrites.length > 0) {
    if (patches.length > 1) return { ok: false, error: 'overwrite replaces the whole file, so it must be the only patch of its call.' };
    return { ok: true, text: (overwrites[0] as PatchSpec).new_text, notes: [] };
  }
  if (original === null) {
    return { ok: false, error: `${displayPath} does not exist. Use the overwrite operation to create it.` };
  }
  const edits: Edit[] = [];
  const notes: string[] = [];
  let prefix = '';
  let suffix = '';
  for (const [index, patch] of patches.entries()) {
    const label = patches.length > 1 ? `patch ${index + 1}: ` : '';
    if (patch.operation === 'prepend_bof') {
      prefix += patch.new_text;
      continue;
    }
    if (patch.operation === 'append_eof') {
      suffix += patch.new_text;
      continue;
    }
    const oldText = patch.old_text;
    if (oldText === undefined || oldText === '') return { ok: false, error: `${label}replace needs a non-empty old_text.` };
    const exact = occurrences(original, oldText);
    if (exact.length === 1) {
      const start = exact[0] as number;
      edits.push({ index, start, end: start + oldText.length, text: patch.new_text });
      continue;
    }
    if (exact.length > 1) {
      const where = exact
        .slice(0, 10)
        .map((o) => lineOf(original, o))
        .join(', ');
      return {
        ok: false,
        error: `${label}old_text matches ${exact.length} places in ${displayPath} (lines ${where}). Include more surrounding lines so it matches exactly once.`,
      };
    }
    const loose = tolerantMatch(original, oldText, patch.new_text);
    if (loose.length === 1) {
      const match = loose[0] as { start: number; end: number; text: string };
      edits.push({ index, ...match });
      notes.push(`${label}old_text matched at line ${lineOf(original, match.start)} only when ignoring whitespace differences.`);
      continue;
    }
    if (loose.length > 1) {
      return {
        ok: false,
        error: `${label}old_text was not found exactly, and ignoring whitespace it matches ${loose.length} places in ${displayPath}. Copy the exact text, with more context.`,
      };
    }
    return {
      ok: false,
      error: `${label}old_text was not found in ${displayPath}. Read the file again and copy the exact text to replace.`,
    };
  }
  edits.sort((a, b) => a.start - b.start);
  for (let i = 1; i < edits.length; i++) {
    const previous = edits[i - 1] as Edit;
    const current = edits[i] as Edit;
    if (current.start < previous.end) {
      return {
        ok: false,
        error: `patches ${previous.index + 1} and ${current.index + 1} change overlapping text; combine them into one replace.`,
      };
    }
  }
  let text = '';
  let cursor = 0;
  for (const edit of edits) {
    text += original.slice(cursor, edit.start) + edit.text;
    cursor = edit.end;
  }
  text += original.slice(cursor);
  // Whole lines in, whole lines out: keep prepended and appended text on their own lines.
  if (prefix !== '' && text !== '' && !prefix.endsWith('\n')) prefix += '\n';
  if (suffix !== '' && text !== '' && !text.endsWith('\n')) text += '\n';
  return { ok: true, text: prefix + text + suffix, notes };
}
