/**
 * Error texts read as sentences: provider messages often end with their own full stop
 * ("Overloaded."), and gluing our advice after them must not give "Overloaded.. The model…".
 */

/** `text` as one sentence: trimmed, ending in exactly one `.` (or its own `?`/`!`). */
export function sentence(text: string): string {
  const trimmed = text.trim().replace(/[\s.]+$/u, '');
  if (trimmed === '') return '';
  return /[?!]$/u.test(trimmed) ? trimmed : `${trimmed}.`;
}

/** Sentences joined by one space, each ending once. */
export function sentences(...parts: readonly (string | undefined)[]): string {
  return parts
    .map((p) => (p ? sentence(p) : ''))
    .filter((p) => p !== '')
    .join(' ');
}
