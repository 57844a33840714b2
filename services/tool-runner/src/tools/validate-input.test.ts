import { describe, it, expect } from '@jest/globals';
import { TOOLS } from '@bedrock/contracts';
import { validateInput } from './validate-input.ts';

describe('validateInput', () => {
  it('accepts valid input for every runner tool', () => {
    expect(validateInput(TOOLS.bash.inputSchema, { command: 'ls', timeout_seconds: 10 })).toEqual([]);
    expect(
      validateInput(TOOLS.patch.inputSchema, { path: 'a', patches: [{ operation: 'replace', old_text: 'x', new_text: 'y' }] }),
    ).toEqual([]);
    expect(validateInput(TOOLS.keyword_search.inputSchema, { query: 'q', search_terms: ['a'] })).toEqual([]);
    expect(validateInput(TOOLS.think.inputSchema, { thoughts: '' })).toEqual([]);
  });

  it('compiles every schema of the registry (ajv strict: no unknown keywords)', () => {
    for (const tool of Object.values(TOOLS)) expect(() => validateInput(tool.inputSchema, {})).not.toThrow();
  });

  it('names every problem with its path', () => {
    expect(validateInput(TOOLS.patch.inputSchema, { path: '', patches: [{ operation: 'delete', new_text: 1 }], x: true })).toEqual([
      'input.x is not a known field',
      'input.path must not be empty',
      'input.patches[0].operation must be one of "replace", "append_eof", "prepend_bof", "overwrite"',
      'input.patches[0].new_text must be a string, got integer',
    ]);
    expect(validateInput(TOOLS.keyword_search.inputSchema, { query: 'q', search_terms: [] })).toEqual([
      'input.search_terms must have at least 1 item',
    ]);
    expect(validateInput(TOOLS.bash.inputSchema, 'ls')).toEqual(['input must be an object, got string']);
    expect(validateInput(TOOLS.bash.inputSchema, { command: 'x', timeout_seconds: 99999 })).toEqual([
      'input.timeout_seconds must be at most 1800',
    ]);
    expect(validateInput(TOOLS.bash.inputSchema, { timeout_seconds: '10' })).toEqual([
      'input.command is required',
      'input.timeout_seconds must be a number, got string',
    ]);
    expect(validateInput(TOOLS.patch.inputSchema, { path: 'a', patches: 'x' })).toEqual(['input.patches must be an array, got string']);
    expect(validateInput(TOOLS.bash.inputSchema, null)).toEqual(['input must be an object, got null']);
  });
});
