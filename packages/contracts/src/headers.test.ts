import { describe, expect, it } from '@jest/globals';
import { CLIENT_MAX_LENGTH, clientOf } from './headers.ts';

describe('clientOf', () => {
  it('takes bedrock-client, else user-agent, printable and cut; empty without either', () => {
    expect(clientOf(new Headers({ 'bedrock-client': 'cli', 'user-agent': 'connect-es/2.1.2' }))).toBe('cli');
    expect(clientOf(new Headers({ 'user-agent': 'Mozilla/5.0 (X11)' }))).toBe('Mozilla/5.0 (X11)');
    expect(clientOf(new Headers({ 'bedrock-client': '  ', 'user-agent': 'curl/8.5.0' }))).toBe('curl/8.5.0');
    expect(clientOf(new Headers({ 'bedrock-client': 'wéb\ttab' }))).toBe('w?b?tab');
    expect(clientOf(new Headers({ 'bedrock-client': 'x'.repeat(500) }))).toHaveLength(CLIENT_MAX_LENGTH);
    expect(clientOf(new Headers())).toBe('');
  });
});
