/** Small text facts of the web UI (ui/src/text.ts), in Node. */
import { describe, expect, it } from '@jest/globals';
import { lineCount } from '../ui/src/text.ts';

describe('lineCount', () => {
  it('counts lines as a person does: a trailing newline ends the last line', () => {
    const output = Array.from({ length: 5000 }, (_, i) => `line ${i + 1}`).join('\n') + '\n';
    expect(lineCount(output)).toBe(5000);
    expect(lineCount(output.trimEnd())).toBe(5000);
    expect(lineCount('a\nb')).toBe(2);
    expect(lineCount('a\n\n')).toBe(2);
    expect(lineCount('\n')).toBe(1);
    expect(lineCount('')).toBe(0);
  });
});
