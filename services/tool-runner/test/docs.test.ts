import { readFileSync } from 'node:fs';
import { describe, expect, it } from '@jest/globals';
import { configMarkdownTable } from '@bedrock/platform/config';
import { toolRunnerConfigSchema } from '../src/config.ts';

const doc = readFileSync(new URL('../../../docs/tool-runner.md', import.meta.url), 'utf8');

// The operator docs are checked against the code, so a renamed setting or a changed default
// cannot leave them stale.
describe('docs/tool-runner.md', () => {
  it('holds the table generated from the config schema', () => {
    const between = /<!-- tool-runner-config:start[^>]*-->\n([\s\S]*?)\n<!-- tool-runner-config:end -->/.exec(doc);
    expect(between?.[1]).toBe(configMarkdownTable(toolRunnerConfigSchema));
  });
});
