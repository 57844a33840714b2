import { readFileSync } from 'node:fs';
import { describe, expect, it } from '@jest/globals';
import { configMarkdownTable } from '@bedrock/platform/config';
import { webBffConfigSchema } from '../src/config.ts';

const doc = readFileSync(new URL('../../../docs/web-bff.md', import.meta.url), 'utf8');

// The operator docs are checked against the code, so a renamed setting or a changed default
// cannot leave them stale.
describe('docs/web-bff.md', () => {
  it('holds the generated table of every setting', () => {
    const between = /<!-- web-bff-config:start[^>]*-->\n([\s\S]*?)\n<!-- web-bff-config:end -->/.exec(doc);
    expect(between?.[1]).toBe(configMarkdownTable(webBffConfigSchema));
  });
});
