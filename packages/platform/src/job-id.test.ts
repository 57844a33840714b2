import { describe, it, expect } from '@jest/globals';
import { decodeJobId, encodeJobId } from './job-id.ts';

describe('job ids', () => {
  const samples = ['conv-1:llm:3', 'a:b', 'a:b:c', '123', '-5', '+7', '0', '12abc', '%3A', '100%', 'plain', 'ünï:cødé', ':'];

  it('round-trips any id', () => {
    for (const id of samples) expect(decodeJobId(encodeJobId(id))).toBe(id);
  });

  it('never produces a colon or an integer-looking id', () => {
    for (const id of samples) {
      const encoded = encodeJobId(id);
      expect(encoded).not.toContain(':');
      expect(`${parseInt(encoded, 10)}`).not.toBe(encoded);
    }
  });

  it('keeps distinct ids distinct', () => {
    const encoded = new Set(samples.map(encodeJobId));
    expect(encoded.size).toBe(samples.length);
  });

  it('leaves ordinary ids readable', () => {
    expect(encodeJobId('conv-1:llm:3')).toBe('conv-1%3Allm%3A3');
    expect(encodeJobId('tool-abc')).toBe('tool-abc');
  });

  it('rejects an empty id', () => {
    expect(() => encodeJobId('')).toThrow();
  });
});
