import { createHmac } from 'node:crypto';
import { describe, it, expect } from '@jest/globals';
import { ownerRefOf } from './owner-ref.ts';

describe('ownerRefOf', () => {
  it('is stable per user and secret, differs between users and secrets, and reveals neither', () => {
    const a = ownerRefOf('user-1', 'secret');
    expect(a).toMatch(/^[0-9a-f]{64}$/);
    expect(ownerRefOf('user-1', 'secret')).toBe(a);
    expect(ownerRefOf('user-2', 'secret')).not.toBe(a);
    expect(ownerRefOf('user-1', 'other')).not.toBe(a);
    expect(a).not.toContain('user-1');
  });

  it('is the HMAC of the owner under the secret, remembered or not, across a change of secret', () => {
    const hmac = (owner: string, secret: string) => createHmac('sha256', secret).update(`bedrock-owner-ref:v1:${owner}`).digest('hex');
    for (const secret of ['one', 'two', 'one']) {
      for (const owner of ['ann', 'ben', 'ann']) expect(ownerRefOf(owner, secret)).toBe(hmac(owner, secret));
    }
  });

  it('is empty without a secret (no id is sent)', () => {
    expect(ownerRefOf('user-1', undefined)).toBe('');
    expect(ownerRefOf('user-1', '')).toBe('');
  });
});
