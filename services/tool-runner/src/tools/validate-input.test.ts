import { describe, it, expect, jest } from '@jest/globals';
import { Ajv } from 'ajv';
import { TOOLS } from '@bedrock/contracts';
import type { JsonSchema } from '@bedrock/contracts';
import { prepareValidators, validateInput } from './validate-input.ts';

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

  it('compiles a schema once: prepared ahead, a call does not compile it again', () => {
    const compile = jest.spyOn(Ajv.prototype, 'compile');
    try {
      // Fresh objects: validators are kept per schema object.
      const schema = structuredClone(TOOLS.bash.inputSchema) as JsonSchema;
      prepareValidators([schema]);
      expect(compile).toHaveBeenCalledTimes(1);
      expect(validateInput(schema, { command: 'ls' })).toEqual([]);
      expect(validateInput(schema, { command: 1 })).toEqual(['input.command must be a string, got integer']);
      expect(compile).toHaveBeenCalledTimes(1);
      const other = structuredClone(TOOLS.think.inputSchema) as JsonSchema;
      expect(validateInput(other, { thoughts: '' })).toEqual([]);
      expect(compile).toHaveBeenCalledTimes(2);
    } finally {
      compile.mockRestore();
    }
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
