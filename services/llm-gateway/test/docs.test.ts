import { readFileSync } from 'node:fs';
import { describe, it, expect } from '@jest/globals';
import { envMarkdownTable } from '@bedrock/platform/server';
import { createModelRegistry } from '@bedrock/contracts/models';
import { llmGatewayEnv } from '../src/config.ts';

const doc = readFileSync(new URL('../../../docs/llm-gateway.md', import.meta.url), 'utf8');

// The operator docs are checked against the code, so a renamed setting or a changed default
// cannot leave them stale.
describe('docs/llm-gateway.md', () => {
  it('holds the generated table of every setting', () => {
    const between = /<!-- llm-gateway-env:start[^>]*-->\n([\s\S]*?)\n<!-- llm-gateway-env:end -->/.exec(doc);
    expect(between?.[1]).toBe(envMarkdownTable(llmGatewayEnv));
  });

  it('lists every default model with its limits', () => {
    for (const m of createModelRegistry().list()) {
      expect(doc).toContain(`| \`${m.id}\` | ${m.contextWindow.toLocaleString('en-US')} | ${m.maxOutputTokens.toLocaleString('en-US')} |`);
    }
  });
});
