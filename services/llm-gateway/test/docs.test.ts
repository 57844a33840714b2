import { readFileSync } from 'node:fs';
import { describe, it, expect } from '@jest/globals';
import { configMarkdownTable } from '@bedrock/platform/config';
import { createModelRegistry } from '@bedrock/contracts/models';
import { ThinkingLevel } from '@bedrock/contracts';
import { SERVER_TOOL_DEFINITIONS } from '../src/request-tools.ts';
import { THINKING_BUDGETS } from '../src/request-thinking.ts';
import { llmGatewayConfigSchema } from '../src/config.ts';

const doc = readFileSync(new URL('../../../docs/llm-gateway.md', import.meta.url), 'utf8');

// The operator docs are checked against the code, so a renamed setting or a changed default
// cannot leave them stale.
describe('docs/llm-gateway.md', () => {
  it('holds the generated table of every setting', () => {
    const between = /<!-- llm-gateway-env:start[^>]*-->\n([\s\S]*?)\n<!-- llm-gateway-env:end -->/.exec(doc);
    expect(between?.[1]).toBe(configMarkdownTable(llmGatewayConfigSchema));
  });

  it('lists every default model with its limits and thinking form', () => {
    for (const m of createModelRegistry().list()) {
      expect(doc).toContain(
        `| \`${m.id}\` | ${m.contextWindow.toLocaleString('en-US')} | ${m.maxOutputTokens.toLocaleString('en-US')} | ${m.thinking} |`,
      );
    }
  });

  it('states the thinking budgets and server tool definitions the gateway sends', () => {
    for (const [level, budget] of Object.entries(THINKING_BUDGETS))
      expect(doc).toContain(`${ThinkingLevel[Number(level)]} ${budget!.toLocaleString('en-US').replace(',', ' ')}`);
    for (const def of Object.values(SERVER_TOOL_DEFINITIONS))
      expect(doc).toContain(`\`${JSON.stringify(def).replaceAll(',', ', ').replaceAll(':', ': ')}\``);
  });
});
