/** Small text facts the view shows (pure; tested in Node). */

/** How many lines a text has as a person counts them: "a\nb\n" is two (a trailing newline ends the last line), "" none. */
export function lineCount(text: string): number {
  if (!text) return 0;
  let n = 1;
  for (let i = text.indexOf('\n'); i >= 0; i = text.indexOf('\n', i + 1)) n++;
  return text.endsWith('\n') ? n - 1 : n;
}
