import { describe, expect, it } from '@jest/globals';
import { AUTO_TITLE_CHARS, checkTitle, MAX_TITLE_CHARS, titleFromMessage } from './titles.ts';

describe('titleFromMessage', () => {
  it.each([
    ['Fix the login bug', 'Fix the login bug'],
    ['  Fix the login bug  \nand then the tests', 'Fix the login bug'],
    ['\n\n## Refactor the **parser** module\nmore', 'Refactor the parser module'],
    ['> quoted `code_span` and [a link](https://example.com)', 'quoted code_span and a link'],
    ['- [ ] task one', 'task one'],
    ['1. first step', 'first step'],
    ['keep snake_case_names and 2*3*4 as they are', 'keep snake_case_names and 2*3*4 as they are'],
    ['*emphasis* and _this_ and ~~gone~~', 'emphasis and this and gone'],
    ['```bash\nls -la /tmp\n```', 'ls -la /tmp'],
    ['![screenshot](x.png) what is wrong here?', 'screenshot what is wrong here?'],
    ['tabs\tand   spaces', 'tabs and spaces'],
    ['line one\r\nline two', 'line one'],
  ])('%j → %j', (text, title) => {
    expect(titleFromMessage(text)).toBe(title);
  });

  it('is null when there are no words', () => {
    expect(titleFromMessage('')).toBeNull();
    expect(titleFromMessage('   \n  \n```\n```')).toBeNull();
    expect(titleFromMessage('---\n***')).toBeNull();
  });

  it('cuts a long line at a word boundary with an ellipsis', () => {
    const text = 'Please look at the failing integration tests in the payments service and tell me why they time out';
    const title = titleFromMessage(text)!;
    expect(title).toBe('Please look at the failing integration tests in the payments…');
    expect(Array.from(title).length).toBeLessThanOrEqual(AUTO_TITLE_CHARS + 1);
    expect(text.startsWith(title.slice(0, -1))).toBe(true);
  });

  it('cuts one very long word mid-word, and counts characters, not UTF-16 units', () => {
    expect(titleFromMessage('x'.repeat(100))).toBe(`${'x'.repeat(AUTO_TITLE_CHARS)}…`);
    const emoji = '😀'.repeat(70);
    expect(titleFromMessage(emoji)).toBe(`${'😀'.repeat(AUTO_TITLE_CHARS)}…`);
  });

  it('leaves a line of exactly the limit whole', () => {
    const line = 'a'.repeat(AUTO_TITLE_CHARS);
    expect(titleFromMessage(line)).toBe(line);
  });
});

describe('checkTitle', () => {
  it('trims and accepts one line of 1 to 200 characters', () => {
    expect(checkTitle('  Release notes  ')).toEqual({ title: 'Release notes' });
    expect(checkTitle('x')).toEqual({ title: 'x' });
    expect(checkTitle('é'.repeat(MAX_TITLE_CHARS))).toEqual({ title: 'é'.repeat(MAX_TITLE_CHARS) });
  });

  it('refuses empty, too long and multi-line titles with a reason', () => {
    expect(checkTitle('   ')).toEqual({ problem: 'title is empty: give 1 to 200 characters' });
    expect(checkTitle('x'.repeat(201))).toEqual({ problem: 'title is 201 characters; the limit is 200: shorten it' });
    expect(checkTitle('one\ntwo')).toEqual({
      problem: 'title contains a control character (U+000A at character 4): give one line of plain text, without line breaks or tabs',
    });
    expect(checkTitle('a\tb')).toMatchObject({ problem: expect.stringContaining('U+0009 at character 2') });
    expect(checkTitle('bell\u0007')).toMatchObject({ problem: expect.stringContaining('U+0007') });
    expect(checkTitle('x\u2028y')).toMatchObject({ problem: expect.stringContaining('U+2028') });
  });
});
