import { describe, expect, it } from '@jest/globals';
import { checkpointIdOf, currentTurn, filesPoint } from './points.ts';

// 1 user, 2 agent(tool_use), 3 tool, 4 agent(tool_use), 5 tool, 6 agent(end) | 7 user, 8 agent(end) | 9 user, 10 agent, 11 tool, 12 agent
const M = (types: string): { sequence: number; type: string }[] => types.split(' ').map((type, i) => ({ sequence: i + 1, type }));
const messages = M('user agent tool agent tool agent user agent user agent tool agent');

describe('filesPoint', () => {
  it('takes the first checkpoint after the point when no tool ran between', () => {
    expect(filesPoint(messages, [1, 9], 6)).toEqual({ kind: 'checkpoint', turn: 9 });
    expect(filesPoint(messages, [1, 9], 8)).toEqual({ kind: 'checkpoint', turn: 9 });
    expect(filesPoint(messages, [1, 9], 0)).toEqual({ kind: 'checkpoint', turn: 1 });
  });
  it('answers the files now when nothing ran since the point', () => {
    expect(filesPoint(messages, [1, 9], 11)).toEqual({ kind: 'now' });
    expect(filesPoint(messages, [1, 9], 12)).toEqual({ kind: 'now' });
  });
  it('refuses a point inside a turn whose tools ran later, naming the turn start', () => {
    const point = filesPoint(messages, [1, 9], 3);
    expect(point.kind).toBe('none');
    expect(point.kind === 'none' && point.problem).toMatch(/rewind to message 0 \(before that turn began\)/);
    const inLast = filesPoint(messages, [1, 9], 10);
    expect(inLast.kind === 'none' && inLast.problem).toMatch(/rewind to message 8/);
  });
  it('says when the checkpoint is missing', () => {
    const point = filesPoint(messages, [1], 6);
    expect(point.kind === 'none' && point.problem).toMatch(/not captured/);
  });
});

describe('names', () => {
  it('gives storage-safe checkpoint ids and the current turn', () => {
    expect(checkpointIdOf('0F8FAD5B-D9CB-469F-A165-70867728950E', 7)).toBe('c0f8fad5bd9cb469fa16570867728950e-7');
    expect(currentTurn(messages)).toBe(9);
    expect(currentTurn(M('agent'))).toBeUndefined();
  });
});
