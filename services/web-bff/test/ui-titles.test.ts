/** What the web UI calls a conversation and a sub-agent (ui/src/titles.ts): pure functions, in Node. */
import { describe, expect, it } from '@jest/globals';
import {
  conversationTitle,
  inSpawnOrder,
  SEARCH_MAX,
  searchQuery,
  subAgentPieces,
  UNTITLED,
  UNTITLED_SUB_AGENT,
  withSubAgentTitles,
} from '../ui/src/titles.ts';

const PARENT = 'cbda54b2-b54d-4a00-9c43-0d6f1b7e2a11';
const sub = (call: string, index: number) => `${PARENT}--${call}--${index}`;
const A = sub('toolu_01AbCdEf', 0);
const B = sub('toolu_01AbCdEf', 1);

describe('conversationTitle', () => {
  it("is the service's title, else says the conversation is new (or a sub-agent)", () => {
    expect(conversationTitle({ title: 'Plan the release', parentId: '' })).toBe('Plan the release');
    expect(conversationTitle({ title: '', parentId: '' })).toBe(UNTITLED);
    expect(conversationTitle({ title: '  ', parentId: '' })).toBe('New conversation');
    expect(conversationTitle({ title: '', parentId: PARENT })).toBe(UNTITLED_SUB_AGENT);
  });
});

describe('searchQuery', () => {
  it('trims what is typed and keeps it within the limit the service accepts', () => {
    expect(searchQuery('  quokka ')).toBe('quokka');
    expect(searchQuery('   ')).toBe('');
    expect(searchQuery('x'.repeat(SEARCH_MAX + 5))).toHaveLength(SEARCH_MAX);
  });
});

describe('sub-agent ids in a text', () => {
  const titles = new Map([[A, 'Count the files']]);
  const result = `Sub-agent results: 2 spawned.\n\n## Agent 1 (${A}): succeeded\n\n## Agent 2 (${B}): FAILED`;

  it('splits out each id of a sub-agent of this parent, named by its title or by its place', () => {
    expect(subAgentPieces(result, PARENT, titles)).toEqual([
      'Sub-agent results: 2 spawned.\n\n## Agent 1 (',
      { id: A, title: 'Count the files' },
      '): succeeded\n\n## Agent 2 (',
      { id: B, title: 'sub-agent 2' },
      '): FAILED',
    ]);
  });

  it("leaves other texts, and other conversations' ids, as they are", () => {
    expect(subAgentPieces('no ids here', PARENT, titles)).toEqual(['no ids here']);
    const other = `other--toolu_1--0 and ${PARENT}-x`;
    expect(subAgentPieces(other, PARENT, titles)).toEqual([other]);
    expect(subAgentPieces(result, '', titles)).toEqual([result]);
    // A longer id that only starts like one is not cut in two.
    expect(subAgentPieces(`${A}7-more`, PARENT, titles)).toEqual([`${A}7-more`]);
  });

  it('replaces them with their titles, quoted and escaped, in Markdown', () => {
    const md = withSubAgentTitles(result, PARENT, new Map([[A, 'Fix *all* [links]']]));
    expect(md).toBe(
      'Sub-agent results: 2 spawned.\n\n## Agent 1 (“Fix \\*all\\* \\[links\\]”): succeeded\n\n## Agent 2 (“sub-agent 2”): FAILED',
    );
    expect(md).not.toContain(PARENT);
    expect(withSubAgentTitles('plain', PARENT, titles)).toBe('plain');
  });
});

describe('inSpawnOrder', () => {
  it('orders sub-agents by their spawn call (first created first), then by their index in it', () => {
    const agents = [
      { id: sub('toolu_later', 0), createdMs: 300 },
      { id: B, createdMs: 100 },
      { id: A, createdMs: 105 },
      { id: sub('toolu_later', 1), createdMs: 299 },
    ];
    expect(inSpawnOrder(agents).map((a) => a.id)).toEqual([A, B, sub('toolu_later', 0), sub('toolu_later', 1)]);
  });
});
