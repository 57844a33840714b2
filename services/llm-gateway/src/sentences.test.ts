import { describe, expect, it } from '@jest/globals';
import { APIError } from '@anthropic-ai/sdk';
import { classifyError } from './classify-error.ts';
import { sentence, sentences } from './sentences.ts';

describe('sentences', () => {
  it('ends each part exactly once', () => {
    expect(sentence('Overloaded.')).toBe('Overloaded.');
    expect(sentence('Overloaded. ')).toBe('Overloaded.');
    expect(sentence('Overloaded...')).toBe('Overloaded.');
    expect(sentence('Is it down?')).toBe('Is it down?');
    expect(sentences('Model provider error (HTTP 529): Overloaded.', 'The model provider is overloaded or failing.')).toBe(
      'Model provider error (HTTP 529): Overloaded. The model provider is overloaded or failing.',
    );
    expect(sentences('a', undefined, '')).toBe('a.');
  });

  it('classified provider errors never read ".."', () => {
    for (const [status, type, message] of [
      [529, 'overloaded_error', 'Overloaded.'],
      [400, 'invalid_request_error', 'messages: text content blocks must be non-empty.'],
      [401, 'authentication_error', 'invalid x-api-key'],
      [429, 'rate_limit_error', 'Number of request tokens has exceeded your per-minute rate limit. '],
    ] as const) {
      const err = APIError.generate(status, { type: 'error', error: { type, message } }, message, new Headers());
      const text = classifyError(err).message;
      expect(text).not.toMatch(/\.\./);
      expect(text).toMatch(/\.$/);
    }
  });
});
