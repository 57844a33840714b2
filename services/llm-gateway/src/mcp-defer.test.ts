/** Deferred MCP tools: past the threshold they are defer_loading behind the tool search tool, and the prefix stays byte-stable. */
import { describe, it, expect } from '@jest/globals';
import type Anthropic from '@anthropic-ai/sdk';
import { create } from '@bufbuild/protobuf';
import { McpToolDefinitionSchema, Role } from '@bedrock/contracts';
import { createBlockSigner, prefixUnits, validateRequest } from '@bedrock/offline-model';
import { buildMessagesRequest } from './build-request.ts';
import { TOOL_SEARCH_TOOL } from './mcp-defer.ts';
import { makeJob, runOptions, serverTool, text, toolResult, toolUse } from '../test/helpers.ts';

const options = runOptions();
const signer = createBlockSigner();
const schema = JSON.stringify({ type: 'object', properties: { q: { type: 'string' } } });
const def = (name: string, description = `the ${name} tool`) =>
  create(McpToolDefinitionSchema, { name, description, inputSchemaJson: schema });
/** 200 tools of one server, in the order the server listed them (not sorted). */
const twoHundred = Array.from({ length: 200 }, (_, i) => def(`mcp__big__tool_${String((i * 7919) % 200).padStart(3, '0')}`));

type Params = Anthropic.MessageCreateParamsStreaming;
const toolsOf = (p: Params) => p.tools as Array<Anthropic.Tool & { type?: string }>;
/** The prompt prefix the provider renders and caches: the loaded (not deferred) tools and the system prompt, as sent. */
const prefixBytes = (p: Params) => JSON.stringify({ tools: toolsOf(p).filter((t) => t.defer_loading !== true), system: p.system });
/** The fake provider's cache key at the end of the system prompt. */
const systemPrefixHash = (p: Params) => {
  const units = prefixUnits(JSON.parse(JSON.stringify(p)));
  const loaded = toolsOf(p).filter((t) => t.defer_loading !== true).length;
  const systemBlocks = (p.system as unknown[] | undefined)?.length ?? 0;
  return units[loaded + systemBlocks - 1]!.hash;
};
const valid = (p: Params) => validateRequest(JSON.parse(JSON.stringify(p)), signer);

describe('deferred MCP tools', () => {
  it('defines 200 MCP tools deferred behind the tool search tool; the built-in tools are loaded and carry the tools breakpoint', async () => {
    const params = await buildMessagesRequest({ ...makeJob({ toolNames: ['bash', 'think'] }), mcpTools: twoHundred }, options);
    const tools = toolsOf(params);
    expect(tools).toHaveLength(2 + 1 + 200);
    expect(tools.slice(0, 3).map((t) => t.name)).toEqual(['bash', 'think', 'tool_search_tool_bm25']);
    expect(tools[0]!.defer_loading).toBeUndefined();
    expect(tools[1]!.defer_loading).toBeUndefined();
    expect(tools[2]).toEqual({ ...TOOL_SEARCH_TOOL, cache_control: { type: 'ephemeral', ttl: '1h' } });
    const mcp = tools.slice(3);
    expect(mcp.every((t) => t.defer_loading === true && t.cache_control === undefined)).toBe(true);
    expect(mcp.map((t) => t.name)).toEqual([...twoHundred.map((t) => t.name)].sort());
    expect(valid(params)).toBeUndefined();
  });

  it('keeps the prefix (loaded tools + system) byte-identical across turns, also after the server adds a tool', async () => {
    const turn1 = await buildMessagesRequest({ ...makeJob({ toolNames: ['bash'] }), mcpTools: twoHundred }, options);
    const history = [
      { role: Role.USER, content: [text('find the tool')] },
      {
        role: Role.ASSISTANT,
        content: [
          serverTool({ type: 'server_tool_use', id: 'srvtoolu_1', name: 'tool_search_tool_bm25', input: { query: 'tool 042' } }),
          serverTool({
            type: 'tool_search_tool_result',
            tool_use_id: 'srvtoolu_1',
            content: {
              type: 'tool_search_tool_search_result',
              tool_references: [{ type: 'tool_reference', tool_name: 'mcp__big__tool_042' }],
            },
          }),
          toolUse('toolu_1', 'mcp__big__tool_042', { q: 'x' }),
        ],
      },
      { role: Role.USER, content: [toolResult('toolu_1', 'done')] },
    ];
    const turn2 = await buildMessagesRequest({ ...makeJob({ toolNames: ['bash'], messages: history }), mcpTools: twoHundred }, options);
    // The server adds a tool whose name sorts first, and changes one description.
    const changed = [
      def('mcp__big__aaa_new'),
      ...twoHundred.map((t) => (t.name === 'mcp__big__tool_100' ? def(t.name, 'now different') : t)),
    ];
    const turn3 = await buildMessagesRequest({ ...makeJob({ toolNames: ['bash'], messages: history }), mcpTools: changed }, options);

    for (const p of [turn1, turn2, turn3]) expect(valid(p)).toBeUndefined();
    expect(prefixBytes(turn2)).toBe(prefixBytes(turn1));
    expect(prefixBytes(turn3)).toBe(prefixBytes(turn1));
    expect(systemPrefixHash(turn2)).toBe(systemPrefixHash(turn1));
    expect(systemPrefixHash(turn3)).toBe(systemPrefixHash(turn1));
    // The search blocks go back verbatim, and the new tool is defined (deferred).
    expect((turn3.messages[1]!.content as Array<{ type: string }>).map((b) => b.type)).toEqual([
      'server_tool_use',
      'tool_search_tool_result',
      'tool_use',
    ]);
    expect(toolsOf(turn3).find((t) => t.name === 'mcp__big__aaa_new')?.defer_loading).toBe(true);
  });

  it('without deferral (below the threshold) the same change would alter the prefix: the test above can fail', async () => {
    const few = twoHundred.slice(0, 5);
    const a = await buildMessagesRequest({ ...makeJob({ toolNames: ['bash'] }), mcpTools: few }, options);
    const b = await buildMessagesRequest({ ...makeJob({ toolNames: ['bash'] }), mcpTools: [def('mcp__big__aaa_new'), ...few] }, options);
    expect(toolsOf(a).some((t) => t.name === 'tool_search_tool_bm25' || t.defer_loading)).toBe(false);
    expect(prefixBytes(b)).not.toBe(prefixBytes(a));
    expect(systemPrefixHash(b)).not.toBe(systemPrefixHash(a));
  });

  it('the thresholds: more than maxTools tools, or definitions over maxTokens', async () => {
    const thirty = twoHundred.slice(0, 30);
    const at30 = await buildMessagesRequest({ ...makeJob({ toolNames: ['bash'] }), mcpTools: thirty }, options);
    expect(toolsOf(at30).some((t) => t.defer_loading)).toBe(false);
    const at31 = await buildMessagesRequest({ ...makeJob({ toolNames: ['bash'] }), mcpTools: twoHundred.slice(0, 31) }, options);
    expect(toolsOf(at31).filter((t) => t.defer_loading)).toHaveLength(31);
    const big = [def('mcp__docs__huge', 'x'.repeat(50_000))];
    const byTokens = await buildMessagesRequest({ ...makeJob({ toolNames: ['bash'] }), mcpTools: big }, options);
    expect(toolsOf(byTokens).map((t) => [t.name, t.defer_loading])).toEqual([
      ['bash', undefined],
      ['tool_search_tool_bm25', undefined],
      ['mcp__docs__huge', true],
    ]);
    const custom = await buildMessagesRequest(
      { ...makeJob({ toolNames: ['bash'] }), mcpTools: twoHundred.slice(0, 3) },
      { ...options, mcpDefer: { maxTools: 2, maxTokens: 1_000_000 } },
    );
    expect(toolsOf(custom).filter((t) => t.defer_loading)).toHaveLength(3);
  });

  it('a search that found a tool no longer offered becomes a text note (the API rejects a reference to an undefined tool)', async () => {
    const history = [
      { role: Role.USER, content: [text('go')] },
      {
        role: Role.ASSISTANT,
        content: [
          serverTool({ type: 'server_tool_use', id: 'srvtoolu_1', name: 'tool_search_tool_bm25', input: { query: 'gone' } }),
          serverTool({
            type: 'tool_search_tool_result',
            tool_use_id: 'srvtoolu_1',
            content: { type: 'tool_search_tool_search_result', tool_references: [{ type: 'tool_reference', tool_name: 'mcp__gone__x' }] },
          }),
          text('Found it.'),
        ],
      },
      { role: Role.USER, content: [text('and now?')] },
    ];
    const deferredStill = await buildMessagesRequest(
      { ...makeJob({ toolNames: ['bash'], messages: history }), mcpTools: twoHundred },
      options,
    );
    expect((deferredStill.messages[1]!.content as Array<{ type: string; text?: string }>).map((b) => b.type)).toEqual([
      'text',
      'text',
      'text',
    ]);
    expect((deferredStill.messages[1]!.content as Array<{ text: string }>)[1]!.text).toContain('mcp__gone__x');
    expect(valid(deferredStill)).toBeUndefined();
    // No MCP tools at all now: no search tool, the search blocks are notes too.
    const none = await buildMessagesRequest({ ...makeJob({ toolNames: ['bash'], messages: history }), mcpTools: [] }, options);
    expect(toolsOf(none).map((t) => t.name)).toEqual(['bash']);
    expect(valid(none)).toBeUndefined();
  });
});
