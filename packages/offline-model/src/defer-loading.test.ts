/** Deferred tools (defer_loading) and the tool search tool: the fake rejects what the Messages API rejects, and caches as it does. */
import { describe, it, expect } from '@jest/globals';
import { createBlockSigner } from './signing.ts';
import { validateRequest } from './validate-request.ts';
import { prefixUnits } from './prompt-cache.ts';

const signer = createBlockSigner();
const TOOL_SEARCH_TOOL = { type: 'tool_search_tool_bm25_20251119', name: 'tool_search_tool_bm25' };

describe('the strict fake checks deferred tools as the API does', () => {
  const body = (tools: unknown[], messages: unknown[] = [{ role: 'user', content: 'hi' }]) => ({
    model: 'claude-haiku-4-5',
    max_tokens: 100,
    messages,
    tools,
  });
  const custom = (name: string, extra: Record<string, unknown> = {}) => ({ name, input_schema: { type: 'object' }, ...extra });

  it('accepts deferred tools with a loaded search tool', () => {
    expect(validateRequest(body([custom('bash'), TOOL_SEARCH_TOOL, custom('mcp__a__b', { defer_loading: true })]), signer)).toBeUndefined();
  });

  it('rejects deferred tools without a search tool, every tool deferred, a deferred search tool, a non-boolean', () => {
    expect(validateRequest(body([custom('bash'), custom('mcp__a__b', { defer_loading: true })]), signer)).toMatch(
      /require a tool search tool/,
    );
    expect(validateRequest(body([custom('mcp__a__b', { defer_loading: true })]), signer)).toMatch(/All tools have defer_loading/);
    expect(
      validateRequest(body([custom('bash'), { ...TOOL_SEARCH_TOOL, defer_loading: true }, custom('x', { defer_loading: true })]), signer),
    ).toMatch(/tool search tool cannot have defer_loading/);
    expect(validateRequest(body([custom('bash'), TOOL_SEARCH_TOOL, custom('x', { defer_loading: 'yes' })]), signer)).toMatch(
      /valid boolean/,
    );
  });

  it('rejects a tool search result that references a tool the request does not define', () => {
    const messages = [
      { role: 'user', content: 'go' },
      {
        role: 'assistant',
        content: [
          { type: 'server_tool_use', id: 'srvtoolu_1', name: 'tool_search_tool_bm25', input: { query: 'q' } },
          {
            type: 'tool_search_tool_result',
            tool_use_id: 'srvtoolu_1',
            content: { type: 'tool_search_tool_search_result', tool_references: [{ type: 'tool_reference', tool_name: 'mcp__gone__x' }] },
          },
          { type: 'text', text: 'ok' },
        ],
      },
      { role: 'user', content: 'again' },
    ];
    const tools = [custom('bash'), TOOL_SEARCH_TOOL, custom('mcp__a__b', { defer_loading: true })];
    expect(validateRequest(body(tools, messages), signer)).toMatch(/Tool reference 'mcp__gone__x' not found/);
    expect(validateRequest(body([...tools, custom('mcp__gone__x', { defer_loading: true })], messages), signer)).toBeUndefined();
  });
});

describe('the prompt cache and deferred tools', () => {
  it('leaves deferred tools out of the prefix: adding or changing one keeps every cache key', () => {
    const base = (deferred: unknown[]) =>
      prefixUnits({
        model: 'claude-haiku-4-5',
        max_tokens: 100,
        system: [{ type: 'text', text: 'sys' }],
        messages: [{ role: 'user', content: 'hi' }],
        tools: [{ name: 'bash', input_schema: { type: 'object' } }, TOOL_SEARCH_TOOL, ...deferred],
      } as never).map((u) => u.hash);
    const a = base([{ name: 'mcp__a__x', input_schema: { type: 'object' }, defer_loading: true }]);
    const b = base([
      { name: 'mcp__a__new', input_schema: { type: 'object' }, defer_loading: true },
      { name: 'mcp__a__x', description: 'changed', input_schema: { type: 'object' }, defer_loading: true },
    ]);
    expect(b).toEqual(a);
    // A loaded tool's change does change them: the check can fail.
    const c = base([{ name: 'mcp__a__x', input_schema: { type: 'object' } }]);
    expect(c).not.toEqual(a);
  });
});
